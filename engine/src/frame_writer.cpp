#include "warren/wire/frame_writer.hpp"

namespace warren::wire {

namespace detail {
Error frame_over_limit(std::string_view what, std::size_t payload, std::uint32_t frame_max) {
  return make_error(errc::frame_too_large,
                    std::string(what) + " frame of " + std::to_string(payload + frame_overhead_bytes) +
                        " bytes exceeds frame_max " + std::to_string(frame_max));
}
}  // namespace detail

Result<void> write_method_frame(OutputQueue& out, std::uint16_t channel, const Method& method,
                                std::uint32_t frame_max_bytes) {
  return std::visit([&](const auto& m) { return write_method(out, channel, m, frame_max_bytes); }, method);
}

void write_heartbeat(OutputQueue& out) {
  Writer w(out.append_contiguous(frame_overhead_bytes));
  detail::frame_start(w, FrameType::heartbeat, 0, 0);
  w.u8(std::to_integer<std::uint8_t>(frame_end));
}

void write_protocol_header(OutputQueue& out) {
  Writer w(out.append_contiguous(protocol_header.size()));
  w.bytes(protocol_header);
}

}  // namespace warren::wire

#include "warren/wire/frame_decoder.hpp"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <string>

#include "warren/spent_buffer.hpp"
#include "warren/wire/byte_io.hpp"

namespace warren::wire {
namespace {

std::string hex_byte(std::byte b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", std::to_integer<unsigned>(b));
  return buf;
}

bool known_type(std::uint8_t t) { return t == 1 || t == 2 || t == 3 || t == 8; }

[[gnu::noinline]] Error bad_frame_end(std::byte end) {
  return make_error(errc::bad_frame_end, "frame end byte " + hex_byte(end) + " is not 0xCE");
}

// A header's three fields, read without a Reader's bounds checks: the span's extent is the
// header's own.
struct HeaderFields {
  std::uint8_t type;
  std::uint16_t channel;
  std::uint32_t size;
};

HeaderFields header_fields(std::span<const std::byte, frame_header_bytes> h) noexcept {
  return {std::to_integer<std::uint8_t>(h[0]), detail::load_big_endian<std::uint16_t>(h.data() + 1),
          detail::load_big_endian<std::uint32_t>(h.data() + 3)};
}

// What is wrong with a header, if anything, in the order the checks are reported: an unknown
// type, then a size over frame_max (for every type), then the type's own rule. Every frame
// passes these checks, so they only compare; the error's text is built out of line, from the
// problem, once a header fails.
enum class HeaderProblem : std::uint8_t {
  none,
  unknown_type,
  too_large,
  method_too_small,
  content_header_too_small,
  heartbeat_with_payload,
  heartbeat_off_channel_0,
};

HeaderProblem header_problem(const HeaderFields& f, std::uint32_t frame_max) noexcept {
  if (!known_type(f.type)) return HeaderProblem::unknown_type;
  if (frame_max != 0 && std::uint64_t{f.size} + frame_overhead_bytes > frame_max) return HeaderProblem::too_large;
  switch (static_cast<FrameType>(f.type)) {
    case FrameType::method:
      return f.size < method_header_bytes ? HeaderProblem::method_too_small : HeaderProblem::none;
    case FrameType::header:
      return f.size < content_header_min_bytes ? HeaderProblem::content_header_too_small : HeaderProblem::none;
    case FrameType::heartbeat:
      if (f.size != 0) return HeaderProblem::heartbeat_with_payload;
      return f.channel != 0 ? HeaderProblem::heartbeat_off_channel_0 : HeaderProblem::none;
    default:  // a body frame: any size frame_max allows
      return HeaderProblem::none;
  }
}

[[gnu::noinline]] Error header_error(HeaderProblem problem, const HeaderFields& f, std::uint32_t frame_max) {
  switch (problem) {
    case HeaderProblem::unknown_type:
      return make_error(errc::unknown_frame_type, "frame type " + hex_byte(std::byte{f.type}) + " is not 1, 2, 3 or 8");
    case HeaderProblem::too_large:
      return make_error(errc::frame_too_large, "frame of " + std::to_string(std::uint64_t{f.size} + frame_overhead_bytes) +
                                                   " bytes exceeds frame_max " + std::to_string(frame_max));
    case HeaderProblem::method_too_small:
      return make_error(errc::frame_too_small,
                        "method frame of " + std::to_string(f.size) + " bytes has no class and method id");
    case HeaderProblem::content_header_too_small:
      return make_error(errc::frame_too_small,
                        "content header frame of " + std::to_string(f.size) + " bytes is shorter than 14");
    case HeaderProblem::heartbeat_with_payload:
      return make_error(errc::malformed_payload, "heartbeat frame carries " + std::to_string(f.size) + " bytes");
    case HeaderProblem::heartbeat_off_channel_0:
      return make_error(errc::protocol_error, "heartbeat frame on channel " + std::to_string(f.channel));
    case HeaderProblem::none:
      break;
  }
  assert(false && "header_error() called for a header without a problem");
  return make_error(errc::protocol_error, "frame header rejected");
}

}  // namespace

void FrameDecoder::feed(std::span<const std::byte> input) {
  assert(input_.empty() && "feed() before next() used up the previous input");
  input_ = input;
}

Result<std::optional<FrameView>> FrameDecoder::latch(Error e) {
  failed_ = true;
  error_ = std::move(e);
  input_ = {};
  partial_.clear();
  partial_.shrink_to_fit();
  return error_;
}

// With a frame_max in force the size was checked against it, so reserving it is bounded by
// our own limit; without one, the buffer grows only with the bytes that actually arrive.
void FrameDecoder::reserve_for(std::size_t total) {
  if (frame_max_ != 0) partial_.reserve(total);
}

std::size_t FrameDecoder::take(std::size_t want) {
  std::size_t n = std::min(want, input_.size());
  partial_.insert(partial_.end(), input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(n));
  input_ = input_.subspan(n);
  return n;
}

Result<std::optional<FrameView>> FrameDecoder::read_protocol_header() {
  // A broker that does not speak our version answers with its own header and closes.
  if (from_ == Peer::broker && partial_.empty() && !input_.empty() && input_[0] != std::byte{'A'}) {
    started_ = true;
    return std::optional<FrameView>{};
  }
  take(protocol_header.size() - partial_.size());
  if (partial_.size() < protocol_header.size()) {
    for (std::size_t i = 0; i < partial_.size(); ++i)
      if (partial_[i] != protocol_header[i] && i < 4)
        return latch(make_error(errc::protocol_error, "stream does not start with an AMQP protocol header"));
    return std::optional<FrameView>{};
  }
  const auto& h = partial_;
  if (!std::equal(h.begin(), h.begin() + 4, protocol_header.begin()))
    return latch(make_error(errc::protocol_error, "stream does not start with an AMQP protocol header"));
  if (from_ == Peer::broker) {
    std::string version = std::to_string(std::to_integer<int>(h[5])) + "-" +
                          std::to_string(std::to_integer<int>(h[6])) + "-" +
                          std::to_string(std::to_integer<int>(h[7]));
    return latch(make_error(errc::protocol_version_mismatch,
                            "broker refused AMQP 0-9-1 and offered protocol " + version));
  }
  if (!std::equal(h.begin(), h.end(), protocol_header.begin()))
    return latch(make_error(errc::protocol_version_mismatch, "client did not send the AMQP 0-9-1 protocol header"));
  started_ = true;
  partial_done_ = true;
  partial_total_ = 0;
  return std::optional<FrameView>{FrameView{FrameType::protocol_header, 0, partial_}};
}

Result<std::optional<FrameView>> FrameDecoder::next() {
  if (failed_) return error_;
  if (partial_done_) {
    // Its frame was handed out on the previous call. A large frame's room is given back: a
    // connection holds input only while a frame is incomplete, not for the rest of its life
    // (a small one's stays, for the next frame split across reads).
    release_spent(partial_);
    partial_done_ = false;
    partial_total_ = 0;
  }
  if (!started_) {
    auto r = read_protocol_header();
    if (!r.ok() || r->has_value() || !started_) return r;
  }

  if (partial_.empty()) {
    // Fast path: a whole frame in the caller's bytes is handed out without a copy.
    if (input_.size() >= frame_header_bytes) {
      const HeaderFields f = header_fields(input_.first<frame_header_bytes>());
      if (const auto problem = header_problem(f, frame_max_); problem != HeaderProblem::none)
        return latch(header_error(problem, f, frame_max_));
      const std::size_t total = std::size_t{f.size} + frame_overhead_bytes;
      if (input_.size() >= total) {
        if (input_[total - 1] != frame_end) return latch(bad_frame_end(input_[total - 1]));
        FrameView v{static_cast<FrameType>(f.type), f.channel, input_.subspan(frame_header_bytes, f.size)};
        input_ = input_.subspan(total);
        return std::optional<FrameView>{v};
      }
      reserve_for(total);
      partial_total_ = total;
    }
    if (input_.empty()) return std::optional<FrameView>{};
    take(input_.size());
    return std::optional<FrameView>{};
  }

  // Slow path: finish the frame whose first bytes are buffered.
  if (partial_total_ == 0) {
    take(frame_header_bytes - partial_.size());
    if (partial_.size() < frame_header_bytes) return std::optional<FrameView>{};
    const HeaderFields f = header_fields(std::span<const std::byte, frame_header_bytes>(partial_.data(), frame_header_bytes));
    if (const auto problem = header_problem(f, frame_max_); problem != HeaderProblem::none)
      return latch(header_error(problem, f, frame_max_));
    const std::size_t total = std::size_t{f.size} + frame_overhead_bytes;
    reserve_for(total);
    partial_total_ = total;
  }
  take(partial_total_ - partial_.size());
  if (partial_.size() < partial_total_) return std::optional<FrameView>{};
  if (partial_.back() != frame_end) return latch(bad_frame_end(partial_.back()));
  const HeaderFields f = header_fields(std::span<const std::byte, frame_header_bytes>(partial_.data(), frame_header_bytes));
  FrameView v{static_cast<FrameType>(f.type), f.channel,
              std::span<const std::byte>(partial_).subspan(frame_header_bytes, f.size)};
  partial_done_ = true;
  return std::optional<FrameView>{v};
}

}  // namespace warren::wire

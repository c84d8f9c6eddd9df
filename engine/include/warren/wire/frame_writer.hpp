// Writes whole frames to an OutputQueue: a method frame, a content message (method + header +
// body frames, bodies split at frame_max) as one unit, heartbeats, the protocol header.
// Every size is checked before the first byte is queued, so a refused write leaves the queue
// exactly as it was.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "warren/always_inline.hpp"
#include "warren/result.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/method_codec.hpp"
#include "warren/wire/output_queue.hpp"
#include "warren/wire/properties.hpp"

namespace warren::wire {

// The largest payload a frame may carry under frame_max (0 means the peers set no limit).
[[nodiscard]] constexpr std::size_t max_payload_bytes(std::uint32_t frame_max_bytes) noexcept {
  if (frame_max_bytes == 0) return std::size_t{UINT32_MAX};
  return frame_max_bytes > frame_overhead_bytes ? frame_max_bytes - frame_overhead_bytes : 0;
}

namespace detail {

[[nodiscard]] Error frame_over_limit(std::string_view what, std::size_t payload, std::uint32_t frame_max);

inline void frame_start(Writer& out, FrameType type, std::uint16_t channel, std::size_t payload) {
  out.u8(static_cast<std::uint8_t>(type));
  out.u16(channel);
  out.u32(static_cast<std::uint32_t>(payload));
}

}  // namespace detail

template <class M>
[[nodiscard]] Result<void> write_method(OutputQueue& out, std::uint16_t channel, const M& method,
                                        std::uint32_t frame_max_bytes) {
  auto size = detail::payload_size(method);
  if (!size.ok()) return std::move(size).error();
  if (*size > max_payload_bytes(frame_max_bytes))
    return detail::frame_over_limit(M::name, *size, frame_max_bytes);
  Writer w(out.append_contiguous(*size + frame_overhead_bytes));
  detail::frame_start(w, FrameType::method, channel, *size);
  detail::encode_payload(w, method);
  w.u8(std::to_integer<std::uint8_t>(frame_end));
  return {};
}

// A content-carrying method (basic.publish from a client; basic.deliver, basic.get-ok and
// basic.return from a broker) with its header and body frames, queued as one unit so no other
// frame can come between them. The body is copied once, into the queue. Always inlined: the
// publish path calls it per message, and the call with its Result cost as much as the header.
template <class M>
[[nodiscard]] WARREN_ALWAYS_INLINE Result<void> write_content(OutputQueue& out, std::uint16_t channel, const M& method,
                                                              const BasicProperties& properties,
                                                              std::span<const std::byte> body,
                                                              std::uint32_t frame_max_bytes) {
  auto method_size = detail::payload_size(method);
  if (!method_size.ok()) return std::move(method_size).error();
  auto header = plan_content_header(properties);
  if (!header.ok()) return std::move(header).error();
  const std::size_t header_size = header->size;
  const std::size_t limit = max_payload_bytes(frame_max_bytes);
  if (*method_size > limit) return detail::frame_over_limit(M::name, *method_size, frame_max_bytes);
  if (header_size > limit) return detail::frame_over_limit("content header", header_size, frame_max_bytes);

  const std::size_t head = *method_size + header_size + 2 * frame_overhead_bytes;
  // A small body rides in the same contiguous piece as its method and header frames.
  const bool one_piece = body.size() <= limit && body.size() <= 2048;
  const std::size_t first = head + (one_piece && !body.empty() ? body.size() + frame_overhead_bytes : 0);
  Writer w(out.append_contiguous(first));
  detail::frame_start(w, FrameType::method, channel, *method_size);
  detail::encode_payload(w, method);
  w.u8(std::to_integer<std::uint8_t>(frame_end));
  detail::frame_start(w, FrameType::header, channel, header_size);
  encode_content_header(w, body.size(), properties, *header);
  w.u8(std::to_integer<std::uint8_t>(frame_end));
  if (one_piece) {
    if (!body.empty()) {
      detail::frame_start(w, FrameType::body, channel, body.size());
      w.bytes(body);
      w.u8(std::to_integer<std::uint8_t>(frame_end));
    }
    return {};
  }
  while (!body.empty()) {
    auto chunk = body.first(std::min(body.size(), limit));
    Writer h(out.append_contiguous(frame_header_bytes));
    detail::frame_start(h, FrameType::body, channel, chunk.size());
    out.append(chunk);
    *out.append_contiguous(1) = frame_end;
    body = body.subspan(chunk.size());
  }
  return {};
}

// The same for any method held in the variant (not the hot path).
[[nodiscard]] Result<void> write_method_frame(OutputQueue& out, std::uint16_t channel,
                                              const Method& method, std::uint32_t frame_max_bytes);
void write_heartbeat(OutputQueue& out);
void write_protocol_header(OutputQueue& out);

}  // namespace warren::wire

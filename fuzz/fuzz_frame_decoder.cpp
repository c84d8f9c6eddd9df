// Rule: any byte stream, cut anywhere, either yields frames or fails with one error that is
// latched (every later call returns it); no read past a buffer, no UB, no hang. Every method
// and content header frame it yields either decodes or fails cleanly, and what decodes
// survives a round trip through the encoder.
#include <cstdlib>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warren::wire;
  if (size < 2) return 0;
  // The first two bytes choose where the stream is cut and the frame_max in force.
  const std::size_t step = 1 + data[0] % 64;
  const std::uint32_t frame_max = data[1] & 1 ? 4096 : 0;
  auto stream = std::span(reinterpret_cast<const std::byte*>(data) + 2, size - 2);

  FrameDecoder decoder(FrameDecoder::Peer::broker, frame_max);
  std::optional<warren::Error> latched;
  for (std::size_t at = 0; at < stream.size() && !latched; at += step) {
    decoder.feed(stream.subspan(at, std::min(step, stream.size() - at)));
    for (;;) {
      auto r = decoder.next();
      if (!r.ok()) {
        latched = r.error();
        break;
      }
      if (!r->has_value()) break;
      const FrameView& f = **r;
      if (frame_max != 0 && f.payload.size() + frame_overhead_bytes > frame_max) std::abort();
      if (f.type == FrameType::method) warren::fuzz::check_method_round_trip(f.payload);
      if (f.type == FrameType::header) warren::fuzz::check_header_round_trip(f.payload);
    }
  }
  if (latched) {
    auto again = decoder.next();
    if (again.ok() || !(again.error() == *latched)) std::abort();
  }
  return 0;
}

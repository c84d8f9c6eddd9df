// Test helpers: run a byte stream through a FrameDecoder in chunks and collect what it yields.
#pragma once

#include <string>
#include <vector>

#include "support/hex.hpp"
#include "warren/wire/wire.hpp"

namespace warren::test {

struct DecodedFrame {
  wire::FrameType type;
  std::uint16_t channel;
  std::string payload_hex;
  friend bool operator==(const DecodedFrame&, const DecodedFrame&) = default;
};

struct DecodeRun {
  std::vector<DecodedFrame> frames;
  std::optional<Error> error;
};

// Feeds `stream` cut at the given offsets (ascending), draining after each piece.
inline DecodeRun decode_in_pieces(std::span<const std::byte> stream, const std::vector<std::size_t>& cuts,
                                  wire::FrameDecoder decoder = wire::FrameDecoder{}) {
  DecodeRun run;
  std::size_t from = 0;
  auto drain = [&] {
    for (;;) {
      auto r = decoder.next();
      if (!r.ok()) {
        run.error = r.error();
        return false;
      }
      if (!r->has_value()) return true;
      const auto& f = **r;
      run.frames.push_back({f.type, f.channel, to_hex(f.payload)});
    }
  };
  std::vector<std::size_t> ends = cuts;
  ends.push_back(stream.size());
  for (std::size_t end : ends) {
    if (end < from) continue;
    decoder.feed(stream.subspan(from, end - from));
    from = end;
    if (!drain()) break;
  }
  return run;
}

}  // namespace warren::test

// A resumable frame decoder. It accepts bytes split anywhere, hands out a frame as soon as it
// is complete (a view into the caller's bytes when the frame arrived whole, into its own
// buffer when it arrived in pieces), buffers only what an incomplete frame still needs, and
// checks a frame's size against frame_max before buffering a byte of it. The first error is
// latched: a stream that lost its framing cannot be resynchronised, so every later call
// returns that same error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "warren/result.hpp"
#include "warren/wire/constants.hpp"

namespace warren::wire {

struct FrameView {
  FrameType type = FrameType::heartbeat;
  std::uint16_t channel = 0;
  std::span<const std::byte> payload{};  // valid until the next call to next() or feed()
};

class FrameDecoder {
 public:
  // Whose bytes this decoder reads: a client reads the broker's frames; a broker (the tests'
  // scripted broker) reads a client's protocol header first.
  enum class Peer : std::uint8_t { broker, client };

  explicit FrameDecoder(Peer from = Peer::broker,
                        std::uint32_t frame_max_bytes = min_frame_max_bytes) noexcept
      : from_(from), frame_max_(frame_max_bytes) {}

  // 0 means the peers agreed on no limit.
  void set_frame_max(std::uint32_t frame_max_bytes) noexcept { frame_max_ = frame_max_bytes; }
  [[nodiscard]] std::uint32_t frame_max() const noexcept { return frame_max_; }

  // Offers the next bytes of the stream. Call it only once next() has returned nullopt (the
  // earlier input is used up); the bytes must stay valid until next() returns nullopt again.
  void feed(std::span<const std::byte> input);

  // The next complete frame; nullopt when more bytes are needed; the latched error after a
  // failure.
  [[nodiscard]] Result<std::optional<FrameView>> next();

  [[nodiscard]] const Error* error() const noexcept { return failed_ ? &error_ : nullptr; }
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return partial_.size(); }
  // The memory held for frames split across reads (tests).
  [[nodiscard]] std::size_t held_bytes() const noexcept { return partial_.capacity(); }

 private:
  Result<std::optional<FrameView>> latch(Error e);
  Result<std::optional<FrameView>> read_protocol_header();
  std::size_t take(std::size_t want);
  void reserve_for(std::size_t total);

  Peer from_;
  std::uint32_t frame_max_;
  bool started_ = false;       // the stream's first bytes (protocol header stage) are behind us
  bool partial_done_ = false;  // partial_ holds a frame already handed out
  std::size_t partial_total_ = 0;  // whole size of the frame in partial_, once its header is in
  std::span<const std::byte> input_;
  std::vector<std::byte> partial_;
  bool failed_ = false;
  Error error_;
};

}  // namespace warren::wire

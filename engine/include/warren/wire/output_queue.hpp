// The connection's single output queue: a byte stream kept in fixed blocks, written at the
// tail and drained from the head with one gathered write. Blocks are recycled, so a steady
// stream of messages allocates nothing; a block never moves, so a view stays valid until
// the bytes it shows are consumed.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace warren::wire {

// Up to max_parts spans of the queue's head, in order: what a driver hands to writev.
struct OutputView {
  static constexpr std::size_t max_parts = 16;
  std::array<std::span<const std::byte>, max_parts> parts{};
  std::size_t count = 0;
  std::size_t bytes = 0;

  [[nodiscard]] auto begin() const { return parts.begin(); }
  [[nodiscard]] auto end() const { return parts.begin() + static_cast<std::ptrdiff_t>(count); }
};

class OutputQueue {
 public:
  static constexpr std::size_t block_bytes = 64 * 1024;
  static constexpr std::size_t first_block_bytes = 4 * 1024;

  OutputQueue() = default;
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;
  OutputQueue(OutputQueue&&) noexcept = default;
  OutputQueue& operator=(OutputQueue&&) noexcept = default;

  // n writable bytes in one piece at the tail, already counted as queued; a request larger
  // than a block gets a block of its own.
  [[nodiscard]] std::byte* append_contiguous(std::size_t n) {
    if (!blocks_.empty()) {
      Block& tail = blocks_.back();
      if (tail.capacity - tail.end >= n) {
        std::byte* p = tail.data.get() + tail.end;
        tail.end += n;
        size_ += n;
        return p;
      }
    }
    return append_in_new_block(n);
  }
  // Copies `bytes` to the tail, across blocks as needed: the only copy a body gets.
  void append(std::span<const std::byte> bytes);

  [[nodiscard]] OutputView view() const noexcept;
  void consume(std::size_t n) noexcept;
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // When nothing is queued, frees every block: an idle connection holds no write buffer
  // (the engine calls it from a timer turn, so a busy stream keeps reusing its blocks).
  void release_when_empty() noexcept {
    if (size_ != 0) return;
    blocks_.clear();
    spare_.clear();
  }
  // Bytes of blocks held, queued or spare (tests).
  [[nodiscard]] std::size_t held_bytes() const noexcept {
    std::size_t n = spare_.size() * block_bytes;
    for (const Block& b : blocks_) n += b.capacity;
    return n;
  }
  // Copies everything queued into one vector (tests and tools; not for the hot path).
  [[nodiscard]] std::vector<std::byte> to_vector() const;

 private:
  struct Block {
    std::unique_ptr<std::byte[]> data{};
    std::size_t capacity = 0;
    std::size_t begin = 0;  // first unconsumed byte
    std::size_t end = 0;    // one past the last written byte
  };

  std::byte* append_in_new_block(std::size_t n);
  Block& new_block(std::size_t at_least);

  std::vector<Block> blocks_;  // head first
  std::vector<std::unique_ptr<std::byte[]>> spare_;  // standard-size blocks to reuse
  std::size_t size_ = 0;
};

}  // namespace warren::wire

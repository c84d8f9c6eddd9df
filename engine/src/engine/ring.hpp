// A FIFO over one growing array: push at the back, pop at the front, no allocation once it
// has grown to its working size (std::deque allocates and frees blocks as it moves).
#pragma once

#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

namespace warren::engine::detail {

template <class T>
class Ring {
 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  T& front() { assert(size_); return slots_[head_]; }
  const T& front() const { assert(size_); return slots_[head_]; }
  T& back() { assert(size_); return slots_[(head_ + size_ - 1) & mask()]; }
  T& operator[](std::size_t i) { return slots_[(head_ + i) & mask()]; }
  const T& operator[](std::size_t i) const { return slots_[(head_ + i) & mask()]; }

  T& push_back(T value) {
    if (size_ == slots_.size()) grow();
    T& slot = slots_[(head_ + size_) & mask()];
    slot = std::move(value);
    ++size_;
    return slot;
  }
  T pop_front() {
    assert(size_);
    T out = std::move(slots_[head_]);
    head_ = (head_ + 1) & mask();
    --size_;
    return out;
  }
  void pop_back() {
    assert(size_);
    slots_[(head_ + size_ - 1) & mask()] = T{};
    --size_;
  }
  // Frees the slots once nothing is queued: for a queue that is empty most of its life (a
  // channel's requests), at the price of allocating again for the next one.
  void release_when_empty() noexcept {
    if (size_ != 0) return;
    std::vector<T>().swap(slots_);
    head_ = 0;
  }
  void clear() noexcept {
    while (size_) pop_front();
    head_ = 0;
  }

 private:
  std::size_t mask() const noexcept { return slots_.size() - 1; }
  void grow() {
    // Four to start: a channel's queue of requests is mostly empty, and every channel has
    // one (2,000 channels at 16 slots held 2.5 MiB before a request was made).
    std::vector<T> bigger(slots_.empty() ? 4 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & mask()]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // a power of two in size
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace warren::engine::detail

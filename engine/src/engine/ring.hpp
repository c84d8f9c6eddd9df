// A FIFO over one growing array: push at the back, pop at the front, no allocation once it
// has grown to its working size (std::deque allocates and frees blocks as it moves).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace warren::engine::detail {

// `first_capacity`: the slots its first push allocates (a power of two).
template <class T, std::size_t first_capacity = 4>
class Ring {
  static_assert(first_capacity > 0 && (first_capacity & (first_capacity - 1)) == 0);

 public:
  Ring() = default;
  // A moved-from ring is empty and holds no slots (the default move would leave capacity_).
  Ring(Ring&& o) noexcept
      : slots_(std::move(o.slots_)),
        capacity_(std::exchange(o.capacity_, 0)),
        head_(std::exchange(o.head_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  Ring& operator=(Ring&& o) noexcept {
    if (this == &o) return *this;
    slots_ = std::move(o.slots_);
    capacity_ = std::exchange(o.capacity_, 0);
    head_ = std::exchange(o.head_, 0);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }

  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  T& front() { assert(size_); return slots_[head_]; }
  const T& front() const { assert(size_); return slots_[head_]; }
  T& back() { assert(size_); return slots_[(head_ + size_ - 1) & mask()]; }
  T& operator[](std::size_t i) { return slots_[(head_ + i) & mask()]; }
  const T& operator[](std::size_t i) const { return slots_[(head_ + i) & mask()]; }

  T& push_back(T value) {
    if (size_ == capacity_) grow();
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
    slots_.reset();
    capacity_ = 0;
    head_ = 0;
  }
  void clear() noexcept {
    while (size_) pop_front();
    head_ = 0;
  }

 private:
  std::size_t mask() const noexcept { return capacity_ - 1; }
  void grow() {
    // Few to start: a channel's queue of requests is mostly empty, and every channel has
    // one (2,000 channels at 16 slots held 2.5 MiB before a request was made).
    const std::uint32_t capacity = capacity_ == 0 ? std::uint32_t{first_capacity} : capacity_ * 2;
    auto bigger = std::make_unique<T[]>(capacity);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & mask()]);
    slots_ = std::move(bigger);
    capacity_ = capacity;
    head_ = 0;
  }

  // The slots and their count, a power of two, kept beside them: a vector's size is a
  // division by sizeof(T) on every index (a publish indexes its run of unwritten ones).
  // 32-bit counts: a ring is 24 bytes, not 32, and a channel holds two (no ring comes near
  // 2^31 entries: that many of the smallest would take 64 GiB).
  std::unique_ptr<T[]> slots_;
  std::uint32_t capacity_ = 0;
  std::uint32_t head_ = 0;
  std::uint32_t size_ = 0;
};

}  // namespace warren::engine::detail

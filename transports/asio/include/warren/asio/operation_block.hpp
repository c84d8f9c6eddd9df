// Memory for the Asio operations one object keeps in flight (a socket's read, its write, a
// timer's waits, a consumer's posted completion), reused so that a steady stream of them
// allocates nothing. Asio allocates an operation through its handler's associated allocator
// and frees it before it runs the handler, so a few blocks serve one operation after another;
// when every block is lent, the heap serves. Asio's own recycling keeps only two blocks per
// thread for all operations together, which a connection's read, write and timer outnumber.
// One thread at a time (the loop's). May not: outlive an operation it lent a block to (the
// handler keeps its owner alive).
#pragma once

#include <array>
#include <cstddef>
#include <new>

namespace warren::asio_driver::detail {

class OperationBlocks {
 public:
  OperationBlocks() = default;
  OperationBlocks(const OperationBlocks&) = delete;
  OperationBlocks& operator=(const OperationBlocks&) = delete;
  ~OperationBlocks() {
    for (auto& b : blocks_) ::operator delete(b.memory);
  }

  [[nodiscard]] void* take(std::size_t bytes) {
    for (auto& b : blocks_) {
      if (b.lent) continue;
      if (bytes > b.size) {
        ::operator delete(b.memory);
        b.memory = nullptr;  // should the next line throw
        b.memory = ::operator new(bytes);
        b.size = bytes;
      }
      b.lent = true;
      return b.memory;
    }
    return ::operator new(bytes);
  }
  void give(void* p) noexcept {
    for (auto& b : blocks_) {
      if (b.memory == p) {
        b.lent = false;
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  struct Block {
    void* memory = nullptr;
    std::size_t size = 0;
    bool lent = false;
  };
  std::array<Block, 3> blocks_{};
};

// The allocator a handler is bound to (asio::bind_allocator) to use an object's blocks.
template <class T>
struct OperationAllocator {
  using value_type = T;
  OperationBlocks* blocks{};
  explicit OperationAllocator(OperationBlocks* b) noexcept : blocks(b) {}
  template <class U>
  OperationAllocator(const OperationAllocator<U>& other) noexcept : blocks(other.blocks) {}  // NOLINT: rebinding
  [[nodiscard]] T* allocate(std::size_t n) { return static_cast<T*>(blocks->take(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { blocks->give(p); }
  template <class U>
  friend bool operator==(const OperationAllocator& a, const OperationAllocator<U>& b) noexcept {
    return a.blocks == b.blocks;
  }
};

}  // namespace warren::asio_driver::detail

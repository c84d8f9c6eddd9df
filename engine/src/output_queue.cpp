#include "warren/wire/output_queue.hpp"

#include <algorithm>
#include <cstring>

namespace warren::wire {

OutputQueue::Block& OutputQueue::new_block(std::size_t at_least) {
  Block b;
  if (at_least <= block_bytes && !spare_.empty()) {
    b.data = std::move(spare_.back());
    spare_.pop_back();
    b.capacity = block_bytes;
  } else {
    // An empty queue starts with a small block: a connection that writes a little (acks, a
    // heartbeat) never holds a whole one. Blocks after it are standard, and recycled.
    const std::size_t size = blocks_.empty() ? first_block_bytes : block_bytes;
    b.capacity = std::max(at_least, size);
    b.data = std::make_unique_for_overwrite<std::byte[]>(b.capacity);
  }
  return blocks_.emplace_back(std::move(b));
}

std::byte* OutputQueue::append_in_new_block(std::size_t n) {
  Block& b = new_block(n);
  b.end = n;
  size_ += n;
  return b.data.get();
}

void OutputQueue::append(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    if (blocks_.empty() || blocks_.back().end == blocks_.back().capacity) new_block(1);
    Block& tail = blocks_.back();
    std::size_t n = std::min(bytes.size(), tail.capacity - tail.end);
    std::memcpy(tail.data.get() + tail.end, bytes.data(), n);
    tail.end += n;
    size_ += n;
    bytes = bytes.subspan(n);
  }
}

OutputView OutputQueue::view() const noexcept {
  OutputView v;
  for (const Block& b : blocks_) {
    if (v.count == OutputView::max_parts) break;
    if (b.end == b.begin) continue;
    v.parts[v.count++] = {b.data.get() + b.begin, b.end - b.begin};
    v.bytes += b.end - b.begin;
  }
  return v;
}

void OutputQueue::consume(std::size_t n) noexcept {
  n = std::min(n, size_);
  size_ -= n;
  std::size_t done = 0;  // leading blocks emptied
  for (Block& b : blocks_) {
    std::size_t take = std::min(n, b.end - b.begin);
    b.begin += take;
    n -= take;
    if (b.begin != b.end) break;
    ++done;
  }
  if (done == blocks_.size() && done > 0) {
    // Everything written: keep the last block as the tail, rewound, and spare the rest.
    --done;
    blocks_.back().begin = blocks_.back().end = 0;
  }
  for (std::size_t i = 0; i < done; ++i) {
    if (blocks_[i].capacity == block_bytes) spare_.push_back(std::move(blocks_[i].data));
  }
  blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(done));
}

std::vector<std::byte> OutputQueue::to_vector() const {
  std::vector<std::byte> out;
  out.reserve(size_);
  for (const Block& b : blocks_) out.insert(out.end(), b.data.get() + b.begin, b.data.get() + b.end);
  return out;
}

}  // namespace warren::wire

#include "warren/client/read_buffer.hpp"

namespace warren::client {
namespace {

struct ThreadBuffer {
  std::unique_ptr<std::byte[]> data;  // made at the thread's first read; never zeroed (recv fills it)
  bool lent = false;
};

ThreadBuffer& thread_buffer() {
  thread_local ThreadBuffer buffer;
  return buffer;
}

}  // namespace

ReadBuffer::ReadBuffer() {
  ThreadBuffer& shared = thread_buffer();
  if (shared.lent) {
    own_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
    data_ = own_.get();
    return;
  }
  if (!shared.data) shared.data = std::make_unique_for_overwrite<std::byte[]>(bytes);
  shared.lent = true;
  data_ = shared.data.get();
}

ReadBuffer::~ReadBuffer() {
  if (!own_) thread_buffer().lent = false;
}

}  // namespace warren::client

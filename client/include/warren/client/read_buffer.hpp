// The buffer a driver reads a socket into, lent for one read and shared by every stream on
// the thread. A read hands its bytes on before it returns (StreamEvents::on_bytes: "valid
// during the call"), and the engine copies only what it keeps (a frame still incomplete), so
// no stream needs a buffer of its own between reads: an idle connection holds none of it.
// Ten thousand connections on one loop then hold one 64 KiB buffer, not ten thousand.
// A read started while the thread's buffer is lent (a callback that runs another loop's read
// inside its own) gets a buffer of its own for that read.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace warren::client {

class ReadBuffer {
 public:
  // One read's worth: what a driver asks recv() for, and the most a read batching mark can
  // ask the kernel to hold (ReadBatching::min_bytes counts as this at most).
  static constexpr std::size_t bytes = 64 * 1024;

  // The thread's buffer, or a buffer of its own when the thread's is lent already.
  ReadBuffer();
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data_, bytes}; }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }

 private:
  std::byte* data_;
  std::unique_ptr<std::byte[]> own_;  // set only when the thread's buffer was lent
};

}  // namespace warren::client

// Emptying a byte buffer whose contents were handed on, for buffers a connection keeps for
// its whole life (a frame split across reads, TLS plaintext and ciphertext): a burst may
// have grown one far past what the connection needs while idle.
#pragma once

#include <cstddef>
#include <vector>

namespace warren {

// Empties `buffer`, and gives its memory back when a burst grew it past 16 KiB (about one
// TLS record, or a small frame): an idle connection keeps nothing of its last burst, and a
// busy one reallocates per burst, which costs little beside copying or decrypting it.
inline void release_spent(std::vector<std::byte>& buffer) {
  if (buffer.capacity() > 16 * 1024) std::vector<std::byte>().swap(buffer);
  else buffer.clear();
}

}  // namespace warren

// The TLS half of a driver's stream, written once for every driver: a client's plaintext
// writes go in, ciphertext comes out for the socket; ciphertext read from the socket goes in,
// plaintext and "the handshake is verified" come out. The driver keeps only its socket: it
// writes what take_ciphertext() hands it, one buffer at a time, and reports a plaintext write
// complete when take_completed() says so (its records have all gone to the socket).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "warren/result.hpp"
#include "warren/tls/tls_session.hpp"

namespace warren::tls {

class TlsPump {
 public:
  [[nodiscard]] static Result<TlsPump> client(const TlsOptions& options);

  // One gathered plaintext write from the client. Its completion is reported by
  // take_completed() once its records are all handed to the socket.
  [[nodiscard]] Result<void> write(std::span<const std::span<const std::byte>> parts);
  // The ciphertext to send next, moved into `out` (reusing its capacity); false when there
  // is none.
  [[nodiscard]] bool take_ciphertext(std::vector<std::byte>& out);
  // Plaintext bytes whose write is complete: nothing of them is left to encrypt or send.
  // Call when take_ciphertext() returned false.
  [[nodiscard]] std::size_t take_completed() noexcept;

  struct Read {
    bool verified_now = false;            // the handshake finished with this input
    std::span<const std::byte> plaintext{};  // valid until the next read()
  };
  // Ciphertext from the socket. A failed handshake (untrusted, expired, wrong name) is an
  // error that says why. Call take_ciphertext() after it: the handshake may have more to say.
  [[nodiscard]] Result<Read> read(std::span<const std::byte> ciphertext);
  [[nodiscard]] bool verified() const noexcept { return verified_; }

 private:
  explicit TlsPump(TlsSession session) : session_(std::move(session)) {}
  TlsSession session_;
  std::size_t plain_written_ = 0;
  bool verified_ = false;
};

}  // namespace warren::tls

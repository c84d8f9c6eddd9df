// A sans-I/O TLS client over OpenSSL memory BIOs, shared by the libuv and Asio drivers:
// ciphertext in from the socket, plaintext out to the engine, and the reverse. The peer's
// certificate chain and its host name (or IP address) are always verified; there is no
// option that turns verification off. SNI is sent for host names. CAs, a client
// certificate and its key come as PEM text, never as file paths.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "warren/result.hpp"
#include "warren/spent_buffer.hpp"  // release_spent, for the plaintext and ciphertext buffers

namespace warren::tls {

struct TlsOptions {
  std::string server_name{};      // the name (or IP) the certificate must carry; sent as SNI
  std::string ca_pem{};           // trusted CAs, PEM; empty: the system's default store
  std::string client_cert_pem{};  // optional, for EXTERNAL authentication
  std::string client_key_pem{};
};

class TlsSession {
 public:
  [[nodiscard]] static Result<TlsSession> client(const TlsOptions& options);
  TlsSession(TlsSession&&) noexcept;
  TlsSession& operator=(TlsSession&&) noexcept;
  ~TlsSession();

  // Bytes read from the socket. Advances the handshake and decrypts what it can; a failed
  // handshake (untrusted, expired, wrong name) is an error that says why, and is latched.
  [[nodiscard]] Result<void> handle_ciphertext(std::span<const std::byte> bytes);
  // The bytes the last handle_ciphertext() decrypted. They stay put until the next
  // handle_ciphertext() (writing does not touch them), so a driver can hand them straight to
  // the engine; take_plaintext() empties them early.
  [[nodiscard]] std::span<const std::byte> plaintext() const noexcept { return plain_in_; }
  void take_plaintext() noexcept { plain_in_.clear(); }

  // Bytes for the peer; held back until the handshake is done.
  [[nodiscard]] Result<void> write_plaintext(std::span<const std::byte> bytes);
  // Ciphertext to write to the socket, and how much of it was written.
  [[nodiscard]] std::span<const std::byte> pending_ciphertext();
  void consume_ciphertext(std::size_t n);

  [[nodiscard]] bool handshake_done() const noexcept;
  [[nodiscard]] bool peer_closed() const noexcept { return peer_closed_; }
  void close();  // queues close_notify

 private:
  struct Impl;
  explicit TlsSession(std::unique_ptr<Impl> impl);
  Result<void> pump(bool decrypt);

  std::unique_ptr<Impl> impl_;
  std::vector<std::byte> plain_in_;
  std::vector<std::byte> plain_out_;  // written before the handshake finished
  std::vector<std::byte> cipher_out_;
  std::size_t cipher_out_head_ = 0;
  bool peer_closed_ = false;
};

}  // namespace warren::tls

#include "warren/tls/tls_pump.hpp"

namespace warren::tls {

Result<TlsPump> TlsPump::client(const TlsOptions& options) {
  auto session = TlsSession::client(options);
  if (!session.ok()) return std::move(session).error();
  return TlsPump(std::move(session).value());
}

Result<void> TlsPump::write(std::span<const std::span<const std::byte>> parts) {
  for (auto p : parts) {
    if (auto r = session_.write_plaintext(p); !r.ok()) return r;
    plain_written_ += p.size();
  }
  return {};
}

bool TlsPump::take_ciphertext(std::vector<std::byte>& out) {
  auto pending = session_.pending_ciphertext();
  if (pending.empty()) return false;
  out.assign(pending.begin(), pending.end());
  session_.consume_ciphertext(pending.size());
  return true;
}

std::size_t TlsPump::take_completed() noexcept {
  // Plaintext written before the handshake finished waits inside the session; it is not
  // complete until the handshake is and its records went out.
  if (!session_.handshake_done()) return 0;
  const std::size_t n = plain_written_;
  plain_written_ = 0;
  return n;
}

Result<TlsPump::Read> TlsPump::read(std::span<const std::byte> ciphertext) {
  if (auto r = session_.handle_ciphertext(ciphertext); !r.ok()) return std::move(r).error();
  Read out;
  if (!verified_ && session_.handshake_done()) {
    verified_ = true;
    out.verified_now = true;
  }
  out.plaintext = session_.plaintext();
  return out;
}

}  // namespace warren::tls

#include "warren/tls/tls_session.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>

#include <map>
#include <mutex>
#include <optional>

namespace warren::tls {
namespace {

struct BioFree { void operator()(BIO* p) const { BIO_free(p); } };
struct X509Free { void operator()(X509* p) const { X509_free(p); } };
struct KeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

Error config_error(std::string what) {
  std::string details = openssl_errors();
  if (!details.empty()) what += " (" + details + ")";
  return make_error(errc::tls_config, std::move(what));
}

std::unique_ptr<BIO, BioFree> memory(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

struct CtxFree { void operator()(SSL_CTX* p) const { SSL_CTX_free(p); } };
using SharedCtx = std::shared_ptr<SSL_CTX>;

// A context holds the trusted CAs (the system's store is a few hundred certificates) and the
// client's certificate: made once for every connection with the same settings, not once per
// connection. Keyed by a digest of the settings, so the cache keeps no copy of a private key.
std::string settings_digest(const TlsOptions& options) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  for (const std::string* part : {&options.ca_pem, &options.client_cert_pem, &options.client_key_pem}) {
    const std::uint64_t size = part->size();  // lengths first: no two settings hash alike by moving a boundary
    EVP_DigestUpdate(md, &size, sizeof size);
    EVP_DigestUpdate(md, part->data(), part->size());
  }
  EVP_DigestFinal_ex(md, digest, &length);
  EVP_MD_CTX_free(md);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

Result<SharedCtx> make_context(const TlsOptions& options) {
  SharedCtx ctx(SSL_CTX_new(TLS_client_method()), CtxFree{});
  if (!ctx) return config_error("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // An idle connection gives its record buffers back (about 34 KiB each) until its next
  // record: most of a connection's memory while nothing moves.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  // Verification is not optional: a chain to a trusted CA, and the expected name.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (options.ca_pem.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) return config_error("cannot load the system's CAs");
  } else {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    auto bio = memory(options.ca_pem);
    int loaded = 0;
    while (std::unique_ptr<X509, X509Free> cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
      if (X509_STORE_add_cert(store, cert.get()) != 1) return config_error("cannot trust a CA certificate");
      ++loaded;
    }
    ERR_clear_error();  // the loop ends on "no start line"
    if (loaded == 0) return config_error("the CA PEM holds no certificate");
  }
  if (!options.client_cert_pem.empty() || !options.client_key_pem.empty()) {
    auto cbio = memory(options.client_cert_pem);
    std::unique_ptr<X509, X509Free> cert{PEM_read_bio_X509(cbio.get(), nullptr, nullptr, nullptr)};
    if (!cert) return config_error("the client certificate PEM holds no certificate");
    auto kbio = memory(options.client_key_pem);
    std::unique_ptr<EVP_PKEY, KeyFree> key{PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr)};
    if (!key) return config_error("the client key PEM holds no private key");
    if (SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 || SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1)
      return config_error("the client key does not match its certificate");
  }
  return ctx;
}

// The context for these settings: one that a live connection uses already, or a new one.
// Connections dialled from several threads share the cache (a context, once made, is only
// read by OpenSSL).
Result<SharedCtx> shared_context(const TlsOptions& options) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<SSL_CTX>> contexts;
  const std::string key = settings_digest(options);
  std::lock_guard lock(mutex);
  std::erase_if(contexts, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = contexts.find(key); it != contexts.end())
    if (SharedCtx ctx = it->second.lock()) return ctx;
  auto made = make_context(options);
  if (made.ok()) contexts[key] = *made;
  return made;
}

bool is_ip_address(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

struct TlsSession::Impl {
  // Deleters named here, not in the file's anonymous namespace: Impl has external linkage.
  struct SslFree { void operator()(SSL* p) const { SSL_free(p); } };
  std::shared_ptr<SSL_CTX> ctx;  // shared by every connection with the same settings
  std::unique_ptr<SSL, SslFree> ssl;
  BIO* in = nullptr;   // ciphertext from the peer (owned by ssl)
  BIO* out = nullptr;  // ciphertext to the peer (owned by ssl)
  std::optional<Error> failed;
};

Result<TlsSession> TlsSession::client(const TlsOptions& options) {
  if (options.server_name.empty())
    return make_error(errc::tls_config, "a TLS connection needs the server name to verify");
  auto impl = std::make_unique<Impl>();
  auto ctx = shared_context(options);
  if (!ctx.ok()) return std::move(ctx).error();
  impl->ctx = std::move(*ctx);
  impl->ssl.reset(SSL_new(impl->ctx.get()));
  if (!impl->ssl) return config_error("cannot create a TLS session");
  if (is_ip_address(options.server_name)) {
    // An address is checked against the certificate's IP entries; SNI carries names only.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(impl->ssl.get()), options.server_name.c_str()) != 1)
      return config_error("cannot verify against address " + options.server_name);
  } else {
    if (SSL_set1_host(impl->ssl.get(), options.server_name.c_str()) != 1 ||
        SSL_set_tlsext_host_name(impl->ssl.get(), options.server_name.c_str()) != 1)
      return config_error("cannot verify against name " + options.server_name);
  }
  impl->in = BIO_new(BIO_s_mem());
  impl->out = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(impl->in, -1);  // empty means "wait for more", not end of stream
  SSL_set_bio(impl->ssl.get(), impl->in, impl->out);
  SSL_set_connect_state(impl->ssl.get());
  TlsSession s(std::move(impl));
  if (auto r = s.pump(false); !r.ok()) return std::move(r).error();  // the ClientHello
  return s;
}

TlsSession::TlsSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsSession::TlsSession(TlsSession&&) noexcept = default;
TlsSession& TlsSession::operator=(TlsSession&&) noexcept = default;
TlsSession::~TlsSession() = default;

bool TlsSession::handshake_done() const noexcept { return SSL_is_init_finished(impl_->ssl.get()) == 1; }

Result<void> TlsSession::handle_ciphertext(std::span<const std::byte> bytes) {
  if (impl_->failed) return *impl_->failed;
  if (!bytes.empty() && BIO_write(impl_->in, bytes.data(), static_cast<int>(bytes.size())) != static_cast<int>(bytes.size()))
    return make_error(errc::tls_failed, "cannot buffer TLS input");
  release_spent(plain_in_);  // the previous call's plaintext has been handed on
  return pump(true);
}

// Advances the handshake, flushes held-back plaintext, decrypts what arrived (only when
// `decrypt`: a write never touches plaintext() while a caller may still be viewing it), and
// collects the ciphertext to send.
Result<void> TlsSession::pump(bool decrypt) {
  SSL* ssl = impl_->ssl.get();
  if (!handshake_done()) {
    int rc = SSL_do_handshake(ssl);
    if (rc != 1) {
      int err = SSL_get_error(ssl, rc);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        std::string why;
        long verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK) why = std::string("certificate rejected: ") + X509_verify_cert_error_string(verify);
        std::string details = openssl_errors();
        if (why.empty()) why = details.empty() ? "the peer ended the handshake" : details;
        impl_->failed = make_error(errc::tls_failed, why);
      }
    }
  }
  if (!impl_->failed && handshake_done() && !plain_out_.empty()) {
    int n = SSL_write(ssl, plain_out_.data(), static_cast<int>(plain_out_.size()));
    if (n > 0) plain_out_.erase(plain_out_.begin(), plain_out_.begin() + n);
    if (plain_out_.empty()) release_spent(plain_out_);
  }
  if (decrypt && !impl_->failed && handshake_done()) {
    std::byte buf[16384];
    for (;;) {
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) {
        plain_in_.insert(plain_in_.end(), buf, buf + n);
        continue;
      }
      int err = SSL_get_error(ssl, n);
      if (err == SSL_ERROR_ZERO_RETURN) peer_closed_ = true;
      else if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
        impl_->failed = make_error(errc::tls_failed, "TLS record error: " + openssl_errors());
      break;
    }
  }
  // Whatever OpenSSL wants to send, handshake or data, leaves through cipher_out_.
  char* data = nullptr;
  long pending = BIO_get_mem_data(impl_->out, &data);
  if (pending > 0) {
    cipher_out_.insert(cipher_out_.end(), reinterpret_cast<std::byte*>(data), reinterpret_cast<std::byte*>(data) + pending);
    (void)BIO_reset(impl_->out);
  }
  if (impl_->failed) return *impl_->failed;
  return {};
}

Result<void> TlsSession::write_plaintext(std::span<const std::byte> bytes) {
  if (impl_->failed) return *impl_->failed;
  plain_out_.insert(plain_out_.end(), bytes.begin(), bytes.end());
  return pump(false);
}

std::span<const std::byte> TlsSession::pending_ciphertext() {
  return std::span<const std::byte>(cipher_out_).subspan(cipher_out_head_);
}

void TlsSession::consume_ciphertext(std::size_t n) {
  cipher_out_head_ = std::min(cipher_out_head_ + n, cipher_out_.size());
  if (cipher_out_head_ == cipher_out_.size()) {
    release_spent(cipher_out_);
    cipher_out_head_ = 0;
  }
}

void TlsSession::close() {
  SSL_shutdown(impl_->ssl.get());
  (void)pump(false);
}

}  // namespace warren::tls

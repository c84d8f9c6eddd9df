// The TLS session against an in-memory OpenSSL server with certificates this test makes: a
// verified connection carries bytes both ways and sends SNI; an untrusted CA, an expired
// certificate and a wrong host name are each refused with a clear error; an IP address is
// checked against the certificate's IP entries; a client certificate reaches the server.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

#include "warren/tls/tls_session.hpp"

namespace warren::tls {
namespace {

struct Identity {
  std::shared_ptr<EVP_PKEY> key;
  std::shared_ptr<X509> cert;
  std::string cert_pem, key_pem;
};

std::string pem_of(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(b);
  return out;
}

std::string pem_of(EVP_PKEY* key) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<std::size_t>(n));
  BIO_free(b);
  return out;
}

// A certificate for `cn`, signed by `issuer` (self-signed when null), valid from
// `from_s` to `to_s` seconds relative to now, with the given extensions.
Identity make_identity(const char* cn, const Identity* issuer, long from_s, long to_s, const char* san, bool ca,
                       const char* usage = nullptr) {
  Identity id;
  id.key.reset(EVP_EC_gen("P-256"), EVP_PKEY_free);
  id.cert.reset(X509_new(), X509_free);
  X509* c = id.cert.get();
  X509_set_version(c, 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(c), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(c), from_s);
  X509_gmtime_adj(X509_getm_notAfter(c), to_s);
  X509_set_pubkey(c, id.key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509* issuer_cert = issuer ? issuer->cert.get() : c;
  X509_set_issuer_name(c, X509_get_subject_name(issuer_cert));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer_cert, c, nullptr, nullptr, 0);
  auto add = [&](int nid, const char* value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(c, ext, -1);
    X509_EXTENSION_free(ext);
  };
  add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) add(NID_key_usage, "critical,keyCertSign,cRLSign");
  if (san) add(NID_subject_alt_name, san);
  if (usage) add(NID_ext_key_usage, usage);
  X509_sign(c, issuer ? issuer->key.get() : id.key.get(), EVP_sha256());
  id.cert_pem = pem_of(c);
  id.key_pem = pem_of(id.key.get());
  return id;
}

constexpr long day = 24 * 3600;

struct Pki {
  Identity ca = make_identity("warren-test-ca", nullptr, -day, 30 * day, nullptr, true);
  Identity other_ca = make_identity("someone-else", nullptr, -day, 30 * day, nullptr, true);
  Identity server = make_identity("localhost", &ca, -day, 30 * day, "DNS:localhost,IP:127.0.0.1", false, "serverAuth");
  Identity expired = make_identity("localhost", &ca, -30 * day, -day, "DNS:localhost,IP:127.0.0.1", false, "serverAuth");
  Identity client = make_identity("tls-client", &ca, -day, 30 * day, nullptr, false, "clientAuth");
};

const Pki& pki() {
  static const Pki p;
  return p;
}

// The broker's side: an OpenSSL server over memory BIOs.
struct Server {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL* ssl = nullptr;
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  std::string sni_seen;
  std::string client_cn;

  explicit Server(const Identity& id, bool want_client_cert = false) {
    SSL_CTX_use_certificate(ctx, id.cert.get());
    SSL_CTX_use_PrivateKey(ctx, id.key.get());
    if (want_client_cert) {
      X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), pki().ca.cert.get());
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    ssl = SSL_new(ctx);
    BIO_set_mem_eof_return(in, -1);
    SSL_set_bio(ssl, in, out);
    SSL_set_accept_state(ssl);
  }
  ~Server() {
    SSL_free(ssl);
    SSL_CTX_free(ctx);
  }
  std::string drain_plain() {
    std::string got;
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
    if (const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) sni_seen = name;
    if (X509* peer = SSL_get1_peer_certificate(ssl)) {
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      client_cn = cn;
      X509_free(peer);
    }
    return got;
  }
};

// Moves bytes both ways until neither side has anything to say; returns the client's error.
Result<void> exchange(TlsSession& client, Server& server, std::string* server_got = nullptr) {
  for (int round = 0; round < 20; ++round) {
    auto out = client.pending_ciphertext();
    if (!out.empty()) {
      BIO_write(server.in, out.data(), static_cast<int>(out.size()));
      client.consume_ciphertext(out.size());
    }
    SSL_do_handshake(server.ssl);
    std::string got = server.drain_plain();
    if (server_got) *server_got += got;
    char* data = nullptr;
    long n = BIO_get_mem_data(server.out, &data);
    std::string to_client(data, static_cast<std::size_t>(n > 0 ? n : 0));
    (void)BIO_reset(server.out);
    if (to_client.empty() && out.empty()) return {};
    auto r = client.handle_ciphertext(std::as_bytes(std::span{to_client.data(), to_client.size()}));
    if (!r.ok()) return r;
  }
  return {};
}

TlsOptions options_for(const std::string& name, const Identity& ca) {
  TlsOptions o;
  o.server_name = name;
  o.ca_pem = ca.cert_pem;
  return o;
}

TEST(Tls, a_verified_connection_carries_bytes_both_ways_and_sends_sni) {
  Server server(pki().server);
  auto client = TlsSession::client(options_for("localhost", pki().ca));
  ASSERT_TRUE(client.ok()) << client.error().to_string();
  std::string hello = "AMQP\x00\x00\x09\x01";
  ASSERT_TRUE(client->write_plaintext(std::as_bytes(std::span{hello.data(), hello.size()})).ok());
  std::string server_got;
  auto r = exchange(*client, server, &server_got);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(client->handshake_done());
  EXPECT_EQ(server_got, hello);  // held back until the handshake finished, then sent
  EXPECT_EQ(server.sni_seen, "localhost");
  SSL_write(server.ssl, "reply", 5);
  char* data = nullptr;
  long n = BIO_get_mem_data(server.out, &data);
  ASSERT_TRUE(client->handle_ciphertext(std::as_bytes(std::span{data, static_cast<std::size_t>(n)})).ok());
  std::string plain(reinterpret_cast<const char*>(client->plaintext().data()), client->plaintext().size());
  EXPECT_EQ(plain, "reply");
}

TEST(Tls, a_certificate_from_an_untrusted_ca_is_refused) {
  Server server(pki().server);
  auto client = TlsSession::client(options_for("localhost", pki().other_ca));
  ASSERT_TRUE(client.ok());
  auto r = exchange(*client, server);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::tls_failed);
  EXPECT_EQ(r.error().detail, "certificate rejected: unable to get local issuer certificate");
  auto later = client->handle_ciphertext({});
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error(), r.error());  // latched
}

TEST(Tls, an_expired_certificate_is_refused) {
  Server server(pki().expired);
  auto client = TlsSession::client(options_for("localhost", pki().ca));
  ASSERT_TRUE(client.ok());
  auto r = exchange(*client, server);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "certificate rejected: certificate has expired");
}

TEST(Tls, a_wrong_host_name_is_refused) {
  Server server(pki().server);
  auto client = TlsSession::client(options_for("rabbit.example.com", pki().ca));
  ASSERT_TRUE(client.ok());
  auto r = exchange(*client, server);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "certificate rejected: hostname mismatch");
}

TEST(Tls, an_ip_address_is_checked_against_the_ip_entries_and_sends_no_sni) {
  {
    Server server(pki().server);
    auto client = TlsSession::client(options_for("127.0.0.1", pki().ca));
    ASSERT_TRUE(client.ok());
    auto r = exchange(*client, server);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(server.sni_seen.empty());
  }
  Server server(pki().server);
  auto client = TlsSession::client(options_for("127.0.0.2", pki().ca));
  ASSERT_TRUE(client.ok());
  auto r = exchange(*client, server);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "certificate rejected: IP address mismatch");
}

TEST(Tls, a_client_certificate_reaches_the_server) {
  Server server(pki().server, true);
  auto o = options_for("localhost", pki().ca);
  o.client_cert_pem = pki().client.cert_pem;
  o.client_key_pem = pki().client.key_pem;
  auto client = TlsSession::client(o);
  ASSERT_TRUE(client.ok()) << client.error().to_string();
  std::string ping = "ping";
  ASSERT_TRUE(client->write_plaintext(std::as_bytes(std::span{ping.data(), ping.size()})).ok());
  std::string got;
  auto r = exchange(*client, server, &got);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(got, "ping");
  EXPECT_EQ(server.client_cn, "tls-client");
}

TEST(Tls, bad_pem_and_missing_names_are_configuration_errors) {
  TlsOptions o = options_for("localhost", pki().ca);
  o.ca_pem = "not a certificate";
  auto r = TlsSession::client(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::tls_config);
  EXPECT_EQ(r.error().detail, "the CA PEM holds no certificate");
  o = options_for("localhost", pki().ca);
  o.client_cert_pem = pki().client.cert_pem;
  o.client_key_pem = pki().server.key_pem;  // someone else's key
  auto mismatch = TlsSession::client(o);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().detail.rfind("the client key does not match its certificate", 0), 0u);
  auto unnamed = TlsSession::client(TlsOptions{});
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.error().detail, "a TLS connection needs the server name to verify");
}

}  // namespace
}  // namespace warren::tls

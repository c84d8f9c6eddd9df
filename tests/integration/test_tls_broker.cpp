// TLS against RabbitMQ's own TLS listener (RMQ_TLS_PORT), with the CA and client certificate
// the test command generated (RMQ_DIR/tls): a verified connection, a CA that did not sign the
// broker's certificate, a name the certificate does not carry, and EXTERNAL login with a
// client certificate.
#include <gtest/gtest.h>

#include "engine_pump.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

std::uint16_t tls_port() { return static_cast<std::uint16_t>(std::stoi(env("RMQ_TLS_PORT"))); }
std::string tls_file(const char* name) { return file_text(env("RMQ_DIR") + "/tls/" + name); }

tls::TlsSession session(const std::string& name, const std::string& ca_pem, bool client_cert = false) {
  tls::TlsOptions o;
  o.server_name = name;
  o.ca_pem = ca_pem;
  if (client_cert) {
    o.client_cert_pem = tls_file("client.pem");
    o.client_key_pem = tls_file("client.key");
  }
  auto s = tls::TlsSession::client(o);
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
  return std::move(s).value();
}

TEST(TlsAgainstBroker, a_verified_connection_works) {
  for (const char* name : {"localhost", "127.0.0.1"}) {
    EnginePump p({}, session(name, tls_file("ca.pem")), tls_port());
    EXPECT_EQ(p.take("connected"), "connected(channel_max=2047, frame_max=131072, heartbeat=60)") << name;
    ASSERT_TRUE(p.conn.close(p.now()).ok());
    p.take("closed");
  }
}

TEST(TlsAgainstBroker, a_ca_that_did_not_sign_the_broker_is_refused) {
  // Any other CA will do: the client certificate is not a CA for the broker's chain.
  EnginePump p({}, session("localhost", tls_file("client.pem")), tls_port());
  p.wait_for("closed", 5s);
  ASSERT_TRUE(p.tls_error.has_value());
  EXPECT_EQ(p.tls_error->code, errc::tls_failed);
  EXPECT_EQ(p.tls_error->detail.rfind("certificate rejected: ", 0), 0u) << p.tls_error->detail;
  EXPECT_FALSE(p.conn.is_open());
}

TEST(TlsAgainstBroker, a_name_the_certificate_does_not_carry_is_refused) {
  EnginePump p({}, session("rabbit.example.com", tls_file("ca.pem")), tls_port());
  p.wait_for("closed", 5s);
  ASSERT_TRUE(p.tls_error.has_value());
  EXPECT_EQ(p.tls_error->detail, "certificate rejected: hostname mismatch");
}

TEST(TlsAgainstBroker, external_login_with_a_client_certificate) {
  engine::ConnectionOptions o;
  o.mechanism = engine::Mechanism::external;
  o.user.clear();
  o.password.clear();
  EnginePump p(o, session("localhost", tls_file("ca.pem"), true), tls_port());
  EXPECT_EQ(p.take("connected"), "connected(channel_max=2047, frame_max=131072, heartbeat=60)");
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

}  // namespace
}  // namespace warren::test

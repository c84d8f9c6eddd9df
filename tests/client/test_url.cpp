// Connection URLs: what RabbitMQ's URI specification says, warren's multi-host form, and a
// clear refusal, naming the parameter, for everything warren will not honour as written.
#include <gtest/gtest.h>

#include "warren/client/url.hpp"

namespace warren::client {
namespace {

ConnectionUrl ok(std::string_view text) {
  auto r = parse_url(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : ConnectionUrl{};
}

std::string refusal(std::string_view text) {
  auto r = parse_url(text);
  EXPECT_FALSE(r.ok()) << text << " should be refused";
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code, errc::invalid_url);
  return r.error().detail;
}

TEST(Url, defaults_follow_the_rabbitmq_uri_spec) {
  auto u = ok("amqp://");
  EXPECT_FALSE(u.tls);
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0], (Endpoint{"localhost", 5672}));
  EXPECT_EQ(u.user, "guest");
  EXPECT_EQ(u.password, "guest");
  EXPECT_EQ(u.vhost, "/");  // no path: the default vhost
  EXPECT_EQ(ok("amqps://broker").endpoints[0], (Endpoint{"broker", 5671}));
}

TEST(Url, user_password_host_port_vhost_with_percent_decoding) {
  auto u = ok("amqp://al%40ice:p%3As%2Fs@rabbit.example:5673/prod%2fv1");
  EXPECT_EQ(u.user, "al@ice");
  EXPECT_EQ(u.password, "p:s/s");
  EXPECT_EQ(u.endpoints[0], (Endpoint{"rabbit.example", 5673}));
  EXPECT_EQ(u.vhost, "prod/v1");
}

TEST(Url, the_three_vhost_forms) {
  EXPECT_EQ(ok("amqp://h").vhost, "/");      // no path
  EXPECT_EQ(ok("amqp://h/").vhost, "");      // an empty path is the empty vhost
  EXPECT_EQ(ok("amqp://h/%2f").vhost, "/");  // "/" named explicitly
  EXPECT_EQ(ok("amqp://h/%2F").vhost, "/");
}

TEST(Url, several_hosts_are_tried_in_order) {
  auto u = ok("amqp://u:p@h1:5672,h2:5673,[::1]:5674,h4/v");
  ASSERT_EQ(u.endpoints.size(), 4u);
  EXPECT_EQ(u.endpoints[0], (Endpoint{"h1", 5672}));
  EXPECT_EQ(u.endpoints[1], (Endpoint{"h2", 5673}));
  EXPECT_EQ(u.endpoints[2], (Endpoint{"::1", 5674}));
  EXPECT_EQ(u.endpoints[3], (Endpoint{"h4", 5672}));
  EXPECT_EQ(u.vhost, "v");
}

TEST(Url, honoured_parameters_reach_the_engine_options) {
  auto u = ok("amqp://h?heartbeat=5&connection_timeout=2500&channel_max=16&frame_max=8192&auth_mechanism=AMQPLAIN");
  EXPECT_EQ(u.heartbeat_s, 5);
  EXPECT_EQ(u.connection_timeout, engine::Duration{2500});
  auto o = u.apply({});
  EXPECT_EQ(o.heartbeat_s, 5);
  EXPECT_EQ(o.channel_max, 16);
  EXPECT_EQ(o.frame_max_bytes, 8192u);
  EXPECT_EQ(o.mechanism, engine::Mechanism::amqplain);
  EXPECT_EQ(o.vhost, "/");
  auto tls = ok("amqps://10.0.0.5?server_name_indication=rabbit.internal&verify=verify_peer&auth_mechanism=external");
  EXPECT_EQ(tls.server_name_indication, "rabbit.internal");
  EXPECT_EQ(tls.auth_mechanism, engine::Mechanism::external);
}

TEST(Url, file_parameters_are_refused) {
  for (const char* key : {"cacertfile", "certfile", "keyfile"}) {
    auto why = refusal(std::string("amqps://h?") + key + "=/etc/ssl/x.pem");
    EXPECT_EQ(why, std::string("parameter ") + key +
                       " names a file, and a URL may not make the process read one: give the PEM text in the "
                       "connection options");
  }
}

TEST(Url, verify_none_is_not_offered) {
  EXPECT_EQ(refusal("amqps://h?verify=verify_none"),
            "verify=verify_none is not offered: warren always verifies the broker's certificate and name");
  EXPECT_EQ(refusal("amqps://h?server_name_indication=disable"),
            "server_name_indication=disable would send no host name; warren always verifies one");
}

TEST(Url, unknown_and_misspelt_parameters_are_refused) {
  EXPECT_EQ(refusal("amqp://h?heartbeats=10"),
            "unknown parameter heartbeats (warren honours heartbeat, connection_timeout, channel_max, frame_max, "
            "auth_mechanism, server_name_indication, verify)");
  EXPECT_NE(refusal("amqp://h?ssl_options=x").find("unknown parameter ssl_options"), std::string::npos);
}

TEST(Url, bad_values_are_refused_with_the_parameter_named) {
  EXPECT_EQ(refusal("amqp://h?heartbeat=ten"), "heartbeat=ten is not a whole number from 0 to 65535");
  EXPECT_EQ(refusal("amqp://h?heartbeat=70000"), "heartbeat=70000 is not a whole number from 0 to 65535");
  EXPECT_EQ(refusal("amqp://h?frame_max=1024"), "frame_max=1024 is below the minimum 4096");
  EXPECT_EQ(refusal("amqp://h?auth_mechanism=scram"), "auth_mechanism=scram is not plain, amqplain or external");
  EXPECT_EQ(refusal("amqp://h?heartbeat=1&heartbeat=2"), "parameter heartbeat is given twice");
  EXPECT_EQ(refusal("amqp://h?server_name_indication=x"), "parameter server_name_indication is for amqps:// URLs only");
}

TEST(Url, malformed_urls_are_refused) {
  EXPECT_EQ(refusal("http://h"), "a URL starts with amqp:// or amqps://");
  EXPECT_EQ(refusal("amqp://h:0"), "port 0 is not a number from 1 to 65535");
  EXPECT_EQ(refusal("amqp://h:99999"), "port 99999 is not a number from 1 to 65535");
  EXPECT_EQ(refusal("amqp://h/a/b"), "the vhost \"a/b\" holds a '/': write it as %2f");
  EXPECT_EQ(refusal("amqp://u:p%zz@h"), "bad percent-encoding in the password");
  EXPECT_EQ(refusal("amqp://h/v%2"), "bad percent-encoding in the vhost");
  EXPECT_EQ(refusal("amqp://[::1:5672"), "unclosed '[' in host [::1:5672");
  EXPECT_EQ(refusal("amqp://h#frag"), "a URL has no fragment (#...)");
}

TEST(Url, redacted_never_shows_the_password) {
  auto u = ok("amqp://bob:hunter2@h1,[::1]:5673/%2f");
  auto text = u.redacted();
  EXPECT_EQ(text, "amqp://bob:****@h1:5672,[::1]:5673/%2f");
  EXPECT_EQ(text.find("hunter2"), std::string::npos);
  auto parsed_again = ok(text);
  EXPECT_EQ(parsed_again.endpoints, u.endpoints);
  EXPECT_EQ(parsed_again.vhost, u.vhost);
}

}  // namespace
}  // namespace warren::client

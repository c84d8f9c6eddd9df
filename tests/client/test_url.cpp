// Connection URLs: what RabbitMQ's URI specification says, warren's multi-host form,
// credentials that hold any character and that no error quotes, and a clear refusal, naming
// the parameter, for everything warren will not honour as written.
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

// RFC 3986's reserved characters: gen-delims, then sub-delims. A generated password holds
// any of them, and an operator pastes it into a URL as it is.
constexpr std::string_view reserved = ":/?#[]@!$&'()*+,;=";

std::string percent_encoded(std::string_view text) {
  std::string out;
  const char* digits = "0123456789ABCDEF";
  for (char c : text) {
    out += '%';
    out += digits[(static_cast<unsigned char>(c) >> 4) & 15];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// Marker words no error text holds by chance: a split password shows one of them.
constexpr std::string_view user_word = "uSERzq";
constexpr std::string_view head_word = "pASSzq";
constexpr std::string_view tail_word = "tAILzq";

TEST(Url, a_password_may_hold_every_reserved_character_raw_or_percent_encoded) {
  std::vector<std::string> specials;
  for (char c : reserved) specials.emplace_back(1, c);
  specials.emplace_back(reserved);  // all of them at once
  for (const std::string& special : specials) {
    const std::string password = std::string(head_word) + special + std::string(tail_word);
    for (const std::string& written : {std::string(head_word) + special + std::string(tail_word),
                                       std::string(head_word) + percent_encoded(special) + std::string(tail_word)}) {
      const std::string text = "amqp://" + std::string(user_word) + ":" + written + "@rabbit.example:5673/prod";
      auto u = ok(text);
      EXPECT_EQ(u.user, user_word) << text;
      EXPECT_EQ(u.password, password) << text;
      ASSERT_EQ(u.endpoints.size(), 1u) << text;
      EXPECT_EQ(u.endpoints[0], (Endpoint{"rabbit.example", 5673})) << text;
      EXPECT_EQ(u.vhost, "prod") << text;
    }
  }
}

// The findings of issue 41, as reported: a raw '/' or '?' in the password split it before
// its '@', so the rest of the password was read as a port, a host or a parameter.
TEST(Url, the_credentials_end_at_the_last_at_sign) {
  auto slash = ok("amqp://admin:S3cret/Tail@rabbit.example");
  EXPECT_EQ(slash.password, "S3cret/Tail");
  EXPECT_EQ(slash.endpoints, (std::vector<Endpoint>{{"rabbit.example", 5672}}));
  EXPECT_EQ(slash.vhost, "/");
  auto query = ok("amqp://guest:123?S3cretTail@rabbit.example?heartbeat=5");
  EXPECT_EQ(query.password, "123?S3cretTail");
  EXPECT_EQ(query.heartbeat_s, 5);
  auto digits = ok("amqp://admin:123/Tail@rabbit.example/v");  // once dialled "admin", port 123
  EXPECT_EQ(digits.user, "admin");
  EXPECT_EQ(digits.endpoints, (std::vector<Endpoint>{{"rabbit.example", 5672}}));
  EXPECT_EQ(digits.vhost, "v");
  auto several = ok("amqp://u:a@b@c@h1,h2:5673/v%40x");
  EXPECT_EQ(several.password, "a@b@c");
  EXPECT_EQ(several.endpoints, (std::vector<Endpoint>{{"h1", 5672}, {"h2", 5673}}));
  EXPECT_EQ(several.vhost, "v@x");
}

TEST(Url, a_raw_at_sign_after_the_host_is_refused_not_read_as_credentials) {
  // "amqp://h/v@x" would otherwise log in to x as the user "h/v".
  for (const char* text : {"amqp://h/v@x", "amqp://h?heartbeat=5@x", "amqp://h#f@x"})
    EXPECT_EQ(refusal(text),
              "the user name holds a raw '/', '?' or '#': write it %2F, %3F or %23 (and a '@' in the vhost or a "
              "parameter as %40)")
        << text;
  EXPECT_EQ(ok("amqp://h/v%40x").vhost, "v@x");
}

// Every way parse_url can refuse a URL, given credentials around the fault. `user` and
// `password` are written into the URL as they are.
std::vector<std::string> every_refusal(const std::string& user, const std::string& password) {
  const std::string creds = user + ":" + password + "@";
  return {
      "http://" + creds + "h",
      "amqp://" + creds + "h#fragment",
      "amqp://" + user + "%zz:" + password + "@h",
      "amqp://" + user + "/x:" + password + "@h",
      "amqp://" + user + "?x:" + password + "@h",
      "amqp://" + user + ":" + password + "%z@h",
      "amqp://" + user + ":" + password + "%@h",
      "amqp://" + creds + "[::1",
      "amqp://" + creds + "[::1]x",
      "amqp://" + creds + "h1,[::1",
      "amqp://" + creds + "h%zz",
      "amqp://" + creds + "h:x",
      "amqp://" + creds + "h:0",
      "amqp://" + creds + "h:99999",
      "amqp://" + creds + "h:5672,h2:-1",
      "amqp://" + creds + "h/a/b",
      "amqp://" + creds + "h/v%2",
      "amqp://" + creds + "h?heartbeat=ten",
      "amqp://" + creds + "h?connection_timeout=-1",
      "amqp://" + creds + "h?channel_max=70000",
      "amqp://" + creds + "h?frame_max=1024",
      "amqp://" + creds + "h?auth_mechanism=scram",
      "amqp://" + creds + "h?heartbeat=1&heartbeat=2",
      "amqp://" + creds + "h?x=%zz",
      "amqp://" + creds + "h?heartbeats=10",
      "amqp://" + creds + "h?server_name_indication=x",
      "amqps://" + creds + "h?server_name_indication=disable",
      "amqps://" + creds + "h?verify=verify_none",
      "amqps://" + creds + "h?cacertfile=/etc/ssl/x.pem",
  };
}

TEST(Url, no_refusal_holds_any_part_of_the_user_name_or_password) {
  std::vector<std::string> specials;
  for (char c : reserved) specials.emplace_back(1, c);
  specials.emplace_back(reserved);
  int refusals = 0;
  for (const std::string& special : specials) {
    for (bool encoded : {false, true}) {
      // The user name may not hold a raw '/', '?' or '#' (they mark a '@' that belongs after
      // the host), nor a raw ':' (it ends the user name): those are written encoded there.
      const std::string user = std::string(user_word) + percent_encoded(special) + std::string(user_word);
      const std::string password =
          std::string(head_word) + (encoded ? percent_encoded(special) : special) + std::string(tail_word);
      for (const std::string& text : every_refusal(user, password)) {
        auto r = parse_url(text);
        if (r.ok()) {
          ADD_FAILURE() << text << " should be refused";
          continue;
        }
        ++refusals;
        const std::string said = r.error().to_string();
        for (std::string_view word : {user_word, head_word, tail_word})
          EXPECT_EQ(said.find(word), std::string::npos) << text << " -> " << said;
        EXPECT_EQ(said.find(password), std::string::npos) << text << " -> " << said;
      }
    }
  }
  EXPECT_EQ(refusals, 2 * static_cast<int>(specials.size()) * 29);  // every case ran
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
  EXPECT_EQ(refusal("amqp://h/a/b"), "the vhost \"a/b\" holds a '/': write it as %2f");
  EXPECT_EQ(refusal("amqp://u:p%zz@h"), "bad percent-encoding in the password");
  EXPECT_EQ(refusal("amqp://u%zz:p@h"), "bad percent-encoding in the user name");
  EXPECT_EQ(refusal("amqp://h/v%2"), "bad percent-encoding in the vhost");
  EXPECT_EQ(refusal("amqp://h#frag"), "a URL has no fragment (#...)");
}

// What stands where the host should is not echoed: a URL whose '@' is missing puts the
// credentials there ("amqp://admin:S3cret" is the host "admin", port "S3cret"). The host is
// named by its place in the list instead.
TEST(Url, a_bad_host_or_port_is_named_by_its_place_not_by_its_text) {
  EXPECT_EQ(refusal("amqp://admin:S3cret"), "the port of host 1 is not a number from 1 to 65535");
  EXPECT_EQ(refusal("amqp://h:0"), "the port of host 1 is not a number from 1 to 65535");
  EXPECT_EQ(refusal("amqp://h1,h:99999"), "the port of host 2 is not a number from 1 to 65535");
  EXPECT_EQ(refusal("amqp://[::1:5672"), "host 1 has an unclosed '['");
  EXPECT_EQ(refusal("amqp://h1,[::1]x"), "host 2 has text after ']' that is not :PORT");
  EXPECT_EQ(refusal("amqp://h%zz"), "bad percent-encoding in host 1");
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

TEST(Url, redacted_parses_back_to_the_same_user_hosts_and_vhost) {
  // Since the credentials end at the last '@', a '@' in the vhost must be written encoded.
  auto u = ok("amqp://a%3Ab%40c%2F:pw@h/v%40x%2f");
  auto text = u.redacted();
  EXPECT_EQ(text, "amqp://a%3ab%40c%2f:****@h:5672/v%40x%2f");
  auto parsed_again = ok(text);
  EXPECT_EQ(parsed_again.user, u.user);
  EXPECT_EQ(parsed_again.endpoints, u.endpoints);
  EXPECT_EQ(parsed_again.vhost, u.vhost);
}

}  // namespace
}  // namespace warren::client

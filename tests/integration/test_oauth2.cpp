// Credentials that expire, against RabbitMQ's own OAuth 2 backend (rabbitmq_auth_backend_oauth2,
// enabled beside the internal backend on the test command's node B: RMQ_OAUTH2_KEY is the
// HS256 key its tokens are signed with). Tokens here live a few seconds, so "several lifetimes"
// is seconds. The negative case first: a login with an expired token is refused, and a
// connection whose token expired (no provider) stays open but every new channel's declare is
// refused with 403. Then a connection and a Session with a consumer live past several
// lifetimes on refreshed tokens, nothing lost; a reconnect after expiry uses a fresh token; a
// refresh the broker refuses is named; a refresh with narrower scopes takes effect on the next
// channel, not on one already open (what a channel caches).
#include <gtest/gtest.h>
#include <openssl/hmac.h>

#include <atomic>
#include <chrono>
#include <set>

#include "integration/client_fixture.hpp"
#include "support/record_lines.hpp"
#include "warren/client/session.hpp"

namespace warren::test {
namespace {

std::string base64url(std::string_view in) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t bits = 0;
  int held = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    held += 8;
    while (held >= 6) {
      held -= 6;
      out.push_back(alphabet[(bits >> held) & 63]);
    }
  }
  if (held > 0) out.push_back(alphabet[(bits << (6 - held)) & 63]);
  return out;
}

// A JWT as the plugin takes it: HS256 with the node's key, audience "rabbitmq".
std::string token(std::chrono::seconds life, std::string_view scopes = "rabbitmq.configure:*/* rabbitmq.write:*/* rabbitmq.read:*/*",
                  std::string_view key = {}) {
  const std::string k = key.empty() ? env("RMQ_OAUTH2_KEY") : std::string(key);
  const auto exp = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch() + life).count();
  std::string scope_list;
  for (std::size_t at = 0; at < scopes.size();) {
    const auto end = std::min(scopes.find(' ', at), scopes.size());
    scope_list += (scope_list.empty() ? "\"" : ",\"") + std::string(scopes.substr(at, end - at)) + "\"";
    at = end + 1;
  }
  const std::string header = base64url(R"({"alg":"HS256","typ":"JWT","kid":"warren-test"})");
  const std::string claims = base64url(R"({"sub":"warren-test","aud":["rabbitmq"],"scope":[)" + scope_list +
                                       R"(],"exp":)" + std::to_string(exp) + "}");
  const std::string signed_part = header + "." + claims;
  unsigned char mac[32];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), k.data(), static_cast<int>(k.size()), reinterpret_cast<const unsigned char*>(signed_part.data()),
       signed_part.size(), mac, &mac_len);
  return signed_part + "." + base64url(std::string_view(reinterpret_cast<const char*>(mac), mac_len));
}

constexpr auto life = std::chrono::seconds(3);  // refreshed at 2 s

class OAuth2 : public ClientSuite {
 protected:
  void SetUp() override {}  // no guest connection: each case connects with tokens
  std::string url() { return "amqp://warren-test@127.0.0.1:" + env("RMQ_PORT") + "/%2f"; }
  std::shared_ptr<RecordLines> records = std::make_shared<RecordLines>();
  std::vector<std::string> issued;
  std::shared_ptr<client::CredentialsProvider> provider(std::chrono::seconds token_life = life) {
    return client::credentials_from([this, token_life](client::Callback<client::Credentials> done) {
      issued.push_back(token(token_life));
      done(client::Credentials{.secret = issued.back(), .expires_in = token_life});
    });
  }
  // A new channel's first declare: what the broker re-checks against the token in force.
  std::string declare_on_new_channel(client::Connection& c) {
    auto ch = wait<client::Channel>([&](auto done) { c.open_channel(done); });
    if (!ch) return ch.error().to_string();
    auto q = wait<client::QueueDeclared>([&](auto done) { ch->queue_declare({.exclusive = true, .auto_delete = true}, done); });
    return said(q);
  }
  void pause(std::chrono::milliseconds d) { loop.run_until([] { return false; }, d); }
};

TEST_P(OAuth2, without_a_refresh_an_expired_token_refuses_new_channels_and_logins) {
  client::ClientOptions o;
  o.credentials = client::credentials_from([](client::Callback<client::Credentials> done) {
    done(client::Credentials{.secret = token(std::chrono::seconds(2))});  // no expires_in: never refreshed
  });
  auto [c, failed] = try_connect(url(), o);
  ASSERT_FALSE(failed) << failed->to_string();
  EXPECT_EQ(declare_on_new_channel(*c), "ok");
  pause(3000ms);
  EXPECT_TRUE(c->is_open()) << "3.10.8 keeps a connection whose token expired open";
  const std::string refused = declare_on_new_channel(*c);
  EXPECT_NE(refused.find("403"), std::string::npos) << refused;
  EXPECT_NE(refused.find("expired"), std::string::npos) << refused;

  client::ClientOptions expired;
  expired.credentials = client::credentials_from([](client::Callback<client::Credentials> done) {
    done(client::Credentials{.secret = token(std::chrono::seconds(-5))});
  });
  auto [c2, login] = try_connect(url(), expired);
  ASSERT_TRUE(login.has_value()) << "a login with an expired token was taken";
  EXPECT_EQ(login->code, errc::access_refused) << login->to_string();
  if (c->is_open()) close(*c);
}

TEST_P(OAuth2, a_connection_lives_past_several_token_lifetimes_on_refreshes_and_loses_nothing) {
  client::ClientOptions o;
  o.credentials = provider();
  o.observer = records;
  auto [c, failed] = try_connect(url(), o);
  ASSERT_FALSE(failed) << failed->to_string();
  auto ch = open(*c);
  ASSERT_TRUE(wait<void>([&](auto done) { ch.confirm_select(done); }).ok());
  const auto q = temp_queue(ch);
  int received = 0;
  auto in = open(*c);
  client::Consumer consumer;
  in.consume({.queue = q}, [&](const client::Delivery& d) {
    ++received;
    (void)d.ack();
  }, [&](Result<client::Consumer> r) { consumer = std::move(r.value()); });
  ASSERT_TRUE(loop.run_until([&] { return consumer.active(); }));
  // Four lifetimes: publish (confirmed) all along, and after each expiry of the token that was
  // in force, a new channel's declare must be taken.
  int confirmed = 0;
  const auto until = std::chrono::steady_clock::now() + 4 * life;
  auto next_check = std::chrono::steady_clock::now() + life + 500ms;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(confirm_publish(ch, {.routing_key = q}, text("m")), "confirmed");
    ++confirmed;
    if (std::chrono::steady_clock::now() > next_check) {
      EXPECT_EQ(declare_on_new_channel(*c), "ok") << "after " << issued.size() << " tokens";
      next_check += life;
    }
    pause(50ms);
  }
  ASSERT_TRUE(loop.run_until([&] { return received == confirmed; }));
  EXPECT_TRUE(c->is_open());
  EXPECT_GE(records->count("credentials.refreshed"), 4) << "refreshed at 2 s of each 3 s token";
  EXPECT_EQ(records->count("connection.connected"), 1);
  for (const auto& t : issued) EXPECT_FALSE(records->mention(t));
  close(*c);
}

TEST_P(OAuth2, a_refresh_the_broker_refuses_is_named_and_closes_the_connection) {
  client::ClientOptions o;
  o.credentials = provider(std::chrono::seconds(60));
  o.observer = records;
  auto [c, failed] = try_connect(url(), o);
  ASSERT_FALSE(failed) << failed->to_string();
  auto r = wait<void>([&](auto done) { c->update_secret(token(life, "rabbitmq.read:*/*", "not-the-key"), "test", done); });
  ASSERT_FALSE(r.ok()) << "the broker took a token signed by another key";
  EXPECT_TRUE(r.error().connection_ended) << r.error().to_string();
  // Measured on 3.10.8: the broker closes the connection with 530 and these words.
  EXPECT_EQ(r.error().to_string(), "connection closed (530): NOT_ALLOWED - New secret was refused by one of the backends");
  EXPECT_EQ(records->count("credentials.refused"), 1);
  ASSERT_TRUE(loop.run_until([&] { return !c->is_open(); }));
}

TEST_P(OAuth2, narrower_scopes_take_effect_on_the_next_channel_not_on_one_already_open) {
  client::ClientOptions o;
  o.credentials = provider(std::chrono::seconds(60));
  auto [c, failed] = try_connect(url(), o);
  ASSERT_FALSE(failed) << failed->to_string();
  auto before = open(*c);
  ASSERT_TRUE(wait<void>([&](auto done) { before.confirm_select(done); }).ok());
  const auto q = temp_queue(before);
  ASSERT_EQ(confirm_publish(before, {.routing_key = q}, text("m")), "confirmed");
  ASSERT_TRUE(wait<void>([&](auto done) {
    c->update_secret(token(std::chrono::seconds(60), "rabbitmq.read:*/*"), "read only", done);
  }).ok());
  // The channel opened before the refresh, publishing to the queue it already wrote to: the
  // broker checks that write against what the channel cached, not against the new token.
  EXPECT_EQ(confirm_publish(before, {.routing_key = q}, text("m")), "confirmed");
  const std::string after = declare_on_new_channel(*c);
  EXPECT_NE(after.find("403"), std::string::npos) << "a new channel's configure under a read-only token: " << after;
  close(*c);
}

TEST_P(OAuth2, a_session_consumes_across_lifetimes_and_reconnects_with_a_fresh_token) {
  client::SessionOptions so;
  so.client.credentials = provider();
  so.client.observer = records;
  so.backoff = client::Backoff{100ms, 2.0, 500ms};
  auto u = client::parse_url(url());
  auto session = client::Session::start(loop.driver(), *u, so);
  ASSERT_TRUE(loop.run_until([&] { return session->status().state == client::Session::State::connected; }));
  // A queue of its own, named so that it outlives a connection.
  const std::string q = "warren-oauth2-" + std::string(GetParam() == DriverKind::uv ? "uv" : "asio");
  std::set<std::string> seen;
  std::vector<client::Consumer> consumers;
  auto consuming = session->channel([&](client::RecoveringChannel& rc, client::Callback<void> done) {
    rc.channel().queue_declare({.name = q, .durable = true},
                               [&, done, ch = rc.channel()](Result<client::QueueDeclared> d) mutable {
      if (!d) return done(d.error());
      ch.consume({.queue = q}, [&](const client::Delivery& m) {
        seen.insert(std::string(text_of(m.body())));
        (void)m.ack();
      }, [&, done](Result<client::Consumer> r) {
        if (!r) return done(r.error());
        consumers.push_back(std::move(*r));  // a dropped Consumer handle cancels its subscription
        done({});
      });
    });
  });
  auto publisher = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done({}); });
  int n = 0;
  auto publish_some = [&](int count) {
    for (int i = 0; i < count; ++i) {
      const std::string body = "m" + std::to_string(n++);
      std::optional<Result<engine::PublishOutcome>> r;
      publisher->publish({.routing_key = q}, text(body), [&](Result<engine::PublishOutcome> x) { r.emplace(std::move(x)); });
      ASSERT_TRUE(loop.run_until([&] { return r.has_value(); })) << body;
      ASSERT_TRUE(r->ok()) << r->error().to_string();
      pause(100ms);
    }
  };
  ASSERT_TRUE(loop.run_until([&] { return consuming->status().state == client::RecoveringChannel::State::ready &&
                                           publisher->status().state == client::RecoveringChannel::State::ready; }));
  publish_some(40);  // 4 s: past the first token's expiry
  // The connection is closed under it (a node restart, say): the reconnect logs in with a
  // fresh token, the first having expired long ago.
  const auto tokens_before = issued.size();
  rabbitmqctl("close_all_connections \"test\"");
  ASSERT_TRUE(loop.run_until([&] { return records->count("session.reconnected") == 1 &&
                                          consuming->status().state == client::RecoveringChannel::State::ready; }, 15s));
  EXPECT_GT(issued.size(), tokens_before);
  publish_some(40);
  ASSERT_TRUE(loop.run_until([&] { return static_cast<int>(seen.size()) == n; }, 10s)) << seen.size() << " of " << n;
  EXPECT_GE(records->count("credentials.refreshed"), 2);
  for (const auto& t : issued) EXPECT_FALSE(records->mention(t));
  std::optional<Result<void>> closed;
  session->close([&](Result<void> r) { closed.emplace(std::move(r)); });
  loop.run_until([&] { return closed.has_value(); });
  rabbitmqctl("delete_queue " + q);
}

INSTANTIATE_TEST_SUITE_P(Drivers, OAuth2, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

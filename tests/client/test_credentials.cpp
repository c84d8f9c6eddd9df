// Credentials that expire (credentials.hpp) on the fake driver's virtual clock, against a fake
// broker whose auth backend refuses expired tokens: the provider is asked before each dial,
// the secret is refreshed in place at two thirds of its life, a failed fetch is retried with
// backoff, a refused secret is named, a Session reconnects with a fresh token and retries a
// failing provider, and no record ever carries a secret. The real OAuth 2 backend:
// tests/integration/test_oauth2.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "client/fake_driver.hpp"
#include "support/record_lines.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/session.hpp"

namespace warren::test {
namespace {

// Tokens "token-1", "token-2", ...: each valid for `life` from when it is handed out, on the
// driver's clock; the fake broker's auth backend refuses one past its expiry.
struct TokenService {
  FakeDriver& driver;
  engine::Duration life;
  int issued = 0;
  int fail_next = 0;  // this many fetches fail (the token service is down)
  std::map<std::string, engine::Instant, std::less<>> expiry;
  std::vector<std::string> logins, updates;

  std::shared_ptr<client::CredentialsProvider> provider() {
    return client::credentials_from([this](client::Callback<client::Credentials> done) {
      if (fail_next > 0) {
        --fail_next;
        return done(make_error(errc::connection_lost, "token endpoint: connection refused"));
      }
      const std::string token = "token-" + std::to_string(++issued);
      expiry[token] = driver.now() + life;
      done(client::Credentials{.user = "svc", .secret = token, .expires_in = life});
    });
  }
  FakeBroker::Config broker() {
    FakeBroker::Config c;
    c.accepts = [this](std::string_view secret) {
      auto it = expiry.find(secret);
      return it != expiry.end() && driver.now() < it->second;
    };
    c.on_secret = [this](std::string_view what, std::string_view secret) {
      (what == "login" ? logins : updates).emplace_back(secret);
    };
    return c;
  }
};

class CredentialsTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  TokenService tokens{driver, std::chrono::minutes(60)};
  std::shared_ptr<RecordLines> records = std::make_shared<RecordLines>();
  std::string ready = "<not yet>";

  client::ClientOptions options() {
    client::ClientOptions o;
    o.credentials = tokens.provider();
    o.observer = records;
    return o;
  }
  std::shared_ptr<client::Connection> dial(client::ClientOptions o) {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = tokens.broker();
    auto url = client::parse_url("amqp://guest:url-password@fake:5001?heartbeat=0");
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    auto c = client::Connection::connect(driver, *url, std::move(o), [this](Result<void> r) {
      ready = r ? "ok" : r.error().to_string();
    });
    driver.run();
    return c;
  }
};

TEST_F(CredentialsTest, the_provider_is_asked_before_the_dial_and_its_user_and_secret_log_in) {
  auto c = dial(options());
  ASSERT_EQ(ready, "ok");
  EXPECT_EQ(tokens.logins, (std::vector<std::string>{"token-1"}));  // not the URL's password
  EXPECT_EQ(records->count("credentials.fetched"), 1);
  EXPECT_TRUE(records->mention("expires in 3600000 ms"));
}

TEST_F(CredentialsTest, the_secret_is_refreshed_in_place_at_two_thirds_of_its_life_again_and_again) {
  auto c = dial(options());
  ASSERT_EQ(ready, "ok");
  driver.advance(std::chrono::minutes(40) - 1ms);
  EXPECT_TRUE(tokens.updates.empty());
  driver.advance(1ms);
  EXPECT_EQ(tokens.updates, (std::vector<std::string>{"token-2"}));
  // Three token lifetimes later the same connection is still open, on its fifth token.
  driver.advance(std::chrono::minutes(159));  // refreshes at 80, 120 and 160 min
  EXPECT_TRUE(c->is_open());
  EXPECT_EQ(tokens.updates, (std::vector<std::string>{"token-2", "token-3", "token-4", "token-5"}));
  EXPECT_EQ(tokens.logins.size(), 1u);  // never reconnected
  EXPECT_EQ(records->count("credentials.refreshed"), 4);
  for (const auto& t : {"token-1", "token-2", "token-5", "url-password"}) EXPECT_FALSE(records->mention(t)) << t;
}

TEST_F(CredentialsTest, a_failed_fetch_is_retried_with_backoff_while_the_old_secret_still_works) {
  auto c = dial(options());
  ASSERT_EQ(ready, "ok");
  tokens.fail_next = 3;
  driver.advance(std::chrono::minutes(40));  // the refresh: fails
  EXPECT_EQ(records->count("credentials.refresh_failed"), 1);
  EXPECT_TRUE(records->mention("attempt 1, again in 1000 ms"));
  driver.advance(1000ms);  // fails again
  EXPECT_TRUE(records->mention("attempt 2, again in 2000 ms"));
  driver.advance(2000ms);  // and again
  EXPECT_TRUE(records->mention("attempt 3, again in 4000 ms"));
  EXPECT_TRUE(records->mention("credentials unavailable: the credentials provider failed: connection lost: token endpoint"));
  EXPECT_TRUE(tokens.updates.empty());
  driver.advance(4000ms);  // the service is back
  EXPECT_EQ(tokens.updates, (std::vector<std::string>{"token-2"}));
  EXPECT_EQ(records->count("credentials.refreshed"), 1);
  EXPECT_TRUE(c->is_open());
  EXPECT_EQ(client::refresh_retry_after(6), 30000ms);  // the cap
  EXPECT_EQ(client::refresh_retry_after(20), 30000ms);
}

TEST_F(CredentialsTest, a_secret_the_broker_refuses_closes_the_connection_and_is_named) {
  auto o = options();
  auto c = dial(o);
  ASSERT_EQ(ready, "ok");
  std::string closed;
  c->on_closed = [&](const Error& e) { closed = e.to_string(); };
  std::string answered;
  c->update_secret("revoked-token", "manual", [&](Result<void> r) { answered = r ? "ok" : r.error().to_string(); });
  driver.run();
  EXPECT_EQ(tokens.updates, (std::vector<std::string>{"revoked-token"}));
  EXPECT_EQ(answered, "connection closed (530): NOT_ALLOWED - New secret was refused by one of the backends");
  EXPECT_EQ(closed, answered);
  EXPECT_EQ(records->count("credentials.refused"), 1);
  EXPECT_FALSE(records->mention("revoked-token"));
}

TEST_F(CredentialsTest, an_update_cut_short_by_the_applications_close_is_not_a_refusal) {
  auto c = dial(options());
  ASSERT_EQ(ready, "ok");
  std::string answered;
  c->update_secret("token-x", "manual", [&](Result<void> r) { answered = r ? "ok" : r.error().to_string(); });
  c->close(nullptr);
  driver.run();
  EXPECT_EQ(answered, "connection closed (200): closed by the application");
  EXPECT_EQ(records->count("credentials.refused"), 0);
  EXPECT_EQ(records->count("credentials.refreshed"), 0);
}

TEST_F(CredentialsTest, a_provider_that_answers_at_once_with_a_failure_is_told_after_connect_returns) {
  client::ClientOptions o;
  o.credentials = client::credentials_from([](client::Callback<client::Credentials> done) {
    done(make_error(errc::connection_lost, "no token"));
  });
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto url = client::parse_url("amqp://fake:5001");
  bool inside_connect = true;
  bool told_inside = false;
  auto c = client::Connection::connect(driver, *url, o, [&](Result<void> r) {
    told_inside = inside_connect;
    ready = r ? "ok" : r.error().to_string();
  });
  inside_connect = false;
  driver.run();
  EXPECT_FALSE(told_inside) << "on_ready ran inside connect()";
  EXPECT_EQ(ready, "credentials unavailable: the credentials provider failed: connection lost: no token");
}

TEST_F(CredentialsTest, a_manual_update_is_taken_and_a_connection_without_expiry_never_refreshes) {
  client::ClientOptions o;
  o.credentials = client::credentials_from([](client::Callback<client::Credentials> done) {
    done(client::Credentials{.secret = "static"});
  });
  o.observer = records;
  FakeBroker::Config config;
  std::vector<std::string> seen;
  config.on_secret = [&](std::string_view what, std::string_view s) { seen.push_back(std::string(what) + ":" + std::string(s)); };
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.broker_configs[5001] = config;
  auto url = client::parse_url("amqp://fake:5001?heartbeat=0");
  auto c = client::Connection::connect(driver, *url, o, [this](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  driver.run();
  ASSERT_EQ(ready, "ok");
  driver.advance(std::chrono::hours(24));
  EXPECT_EQ(seen, (std::vector<std::string>{"login:static"}));
  std::string answered;
  c->update_secret("rotated", "by the application", [&](Result<void> r) { answered = r ? "ok" : r.error().to_string(); });
  driver.run();
  EXPECT_EQ(answered, "ok");
  EXPECT_EQ(seen.back(), "update:rotated");
}

TEST_F(CredentialsTest, a_provider_that_fails_before_the_dial_fails_it_with_its_words) {
  tokens.fail_next = 1;
  auto c = dial(options());
  EXPECT_EQ(ready,
            "credentials unavailable: the credentials provider failed: connection lost: token endpoint: connection refused");
  EXPECT_EQ(driver.dials, 0);
  EXPECT_EQ(records->count("credentials.fetch_failed"), 1);
}

TEST_F(CredentialsTest, a_session_reconnects_with_a_fresh_token_and_retries_a_failing_provider) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.broker_configs[5001] = tokens.broker();
  client::SessionOptions so;
  so.client = options();
  so.jitter_seed = 1;
  so.backoff = client::Backoff{100ms, 2.0, 1000ms};
  tokens.fail_next = 2;  // the token service is down when the session starts
  auto url = client::parse_url("amqp://guest@fake:5001?heartbeat=0");
  auto s = client::Session::start(driver, *url, so);
  driver.run();
  EXPECT_EQ(records->count("credentials.fetch_failed"), 1);
  driver.advance(3000ms);
  ASSERT_EQ(s->status().state, client::Session::State::connected);
  EXPECT_EQ(records->count("credentials.fetch_failed"), 2);
  EXPECT_EQ(tokens.logins, (std::vector<std::string>{"token-1"}));

  // The connection is lost after the first token expired (its refresh was cut off by a
  // fault): the reconnect logs in with a fresh token, never the expired one.
  driver.advance(std::chrono::minutes(39));
  tokens.fail_next = 1000;
  driver.advance(std::chrono::minutes(25));  // refreshes fail; token-1 expires at 60 min
  ASSERT_TRUE(driver.cut(5001));
  tokens.fail_next = 0;
  driver.advance(2000ms);
  ASSERT_EQ(s->status().state, client::Session::State::connected);
  ASSERT_EQ(tokens.logins.size(), 2u);
  EXPECT_EQ(tokens.logins.back(), "token-2");

  // A login refused (the provider handed out a token that had expired already) is retried
  // with the next fetch, not given up on.
  tokens.life = 0ms;
  ASSERT_TRUE(driver.cut(5001));
  driver.advance(500ms);
  EXPECT_NE(s->status().state, client::Session::State::closed);
  EXPECT_TRUE(records->mention("ACCESS_REFUSED"));
  tokens.life = std::chrono::minutes(60);
  driver.advance(3000ms);
  EXPECT_EQ(s->status().state, client::Session::State::connected);
  for (const auto& t : tokens.logins) EXPECT_FALSE(records->mention(t)) << t;
}

}  // namespace
}  // namespace warren::test

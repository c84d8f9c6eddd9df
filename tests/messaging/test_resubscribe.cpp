// The layer's resubscribe backoff on the fake driver's virtual clock (no broker): a
// subscription whose channel the broker closed subscribes again on a new channel; while its
// setup keeps failing, each next try comes after a delay that is a backoff level, at least the
// base (100 ms) and at most the ceiling for that many failures (100 ms doubling to 5 s);
// healthy() is false meanwhile, consumer.closed is logged once and consumer.recovered once.
#include <gtest/gtest.h>

#include <algorithm>

#include "client/fake_driver.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/session.hpp"
#include "warren/client/url.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using namespace warren::messaging;
using Ms = std::chrono::milliseconds;

class Resubscribe : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<client::Connection> conn;
  std::vector<std::string> events;

  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    ASSERT_TRUE(url.ok());
    bool ready = false;
    conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { ready = r.ok(); });
    driver.run();
    ASSERT_TRUE(ready);
  }
};

TEST_F(Resubscribe, each_try_waits_a_backoff_level_between_the_base_and_the_ceiling_and_is_logged_once) {
  auto layer = Messaging::create(conn, {.on_event = [&](const Event& e) { events.push_back(e.what); }});
  ASSERT_TRUE(layer.ok());
  const Backoff backoff{100ms, 5000ms};
  constexpr int failing = 7;  // setups 2 to 8 fail, the 9th succeeds
  int setups = 0;
  engine::ChannelId channel = 0;
  std::vector<engine::Instant> tries;
  bool started = false;
  auto s = Subscription::start(
      *layer,
      {.queue = "jobs",
       .prefetch = 1,
       .setup = [&](const client::Channel& ch, client::Callback<void> done) {
         ++setups;
         tries.push_back(driver.now());
         channel = ch.id();
         if (setups >= 2 && setups <= 1 + failing) {
           Error e = make_error(errc::not_found, "NOT_FOUND - no queue 'jobs' in vhost '/'");
           e.reply_code = 404;
           return done(e);
         }
         ch.queue_declare({.name = "jobs"}, [done](Result<client::QueueDeclared> r) {
           if (!r) return done(r.error());
           done(Result<void>());
         });
       },
       .on_delivery = [](const client::Delivery&) {},
       .resubscribe = backoff},
      [&](Result<void> r) { started = r.ok(); });
  driver.run();
  ASSERT_TRUE(started);
  ASSERT_TRUE(s->healthy());

  const auto closed_at = driver.now();
  driver.broker_on(5001)->close_channel(channel, 404, "NOT_FOUND - queue 'jobs' was deleted");
  driver.run();
  EXPECT_FALSE(s->healthy());
  while (!s->healthy() && driver.now() - closed_at < 60s) {
    driver.advance(1ms);
    if (setups <= 1 + failing) {
      EXPECT_FALSE(s->healthy());
    }
  }
  ASSERT_TRUE(s->healthy()) << setups << " setups";
  ASSERT_EQ(tries.size(), static_cast<std::size_t>(2 + failing));
  const auto levels = delay_levels(backoff);
  auto previous = closed_at;
  for (std::uint32_t failure = 1; failure <= failing + 1; ++failure) {
    const auto waited = std::chrono::duration_cast<Ms>(tries[failure] - previous);
    EXPECT_GE(waited, backoff.base) << "try after failure " << failure;
    EXPECT_LE(waited, backoff_ceiling(backoff, failure)) << "try after failure " << failure;
    EXPECT_NE(std::find(levels.begin(), levels.end(), waited), levels.end()) << waited.count() << " ms is not a level";
    previous = tries[failure];
  }
  // Past 6 failures the ceiling stops at max: never more than 5 s between tries.
  EXPECT_EQ(backoff_ceiling(backoff, failing + 1), 5000ms);
  EXPECT_EQ(s->resubscribed(), 1u);
  EXPECT_EQ(events, (std::vector<std::string>{"consumer.closed", "consumer.recovered"}));
}

// On a Session, a lost connection is one more episode: the subscription waits for the next
// connection, runs its setup again and consumes, logged once closed and once recovered; the
// layer is unhealthy meanwhile. Only a session that closes ends it for good.
TEST_F(Resubscribe, on_a_session_a_lost_connection_is_waited_out_and_setup_runs_again) {
  conn->close(nullptr);
  driver.run();
  auto url = client::parse_url("amqp://guest:guest@fake:5001");
  ASSERT_TRUE(url.ok());
  client::SessionOptions options;
  options.jitter_seed = 7;
  options.backoff = client::Backoff{1000ms, 2.0, 1000ms};
  auto session = client::Session::start(driver, *url, options);
  driver.run();
  ASSERT_EQ(session->status().state, client::Session::State::connected);
  auto layer = Messaging::create(session, {.on_event = [&](const Event& e) { events.push_back(e.what); }});
  ASSERT_TRUE(layer.ok());
  int setups = 0;
  bool started = false;
  std::optional<Error> over;
  auto s = Subscription::start(
      *layer,
      {.queue = "jobs",
       .prefetch = 1,
       .setup = [&](const client::Channel& ch, client::Callback<void> done) {
         ++setups;
         ch.queue_declare({.name = "jobs"}, [done](Result<client::QueueDeclared> r) {
           if (!r) return done(r.error());
           done(Result<void>());
         });
       },
       .on_delivery = [](const client::Delivery&) {},
       .resubscribe = Backoff{100ms, 400ms},
       .on_over = [&](const Error& e) { over = e; }},
      [&](Result<void> r) { started = r.ok(); });
  driver.run();
  ASSERT_TRUE(started);
  ASSERT_TRUE((*layer)->healthy());

  driver.reset_all();
  driver.run();
  ASSERT_EQ(session->status().state, client::Session::State::reconnecting);
  const auto reconnect_in = session->status().delay;
  EXPECT_FALSE(s->healthy());
  EXPECT_FALSE((*layer)->healthy());
  EXPECT_FALSE(s->over());
  // Its tries meanwhile wait for the connection (Session::open_channel) and fail nothing.
  driver.advance(reconnect_in);
  ASSERT_EQ(session->status().state, client::Session::State::connected);
  driver.advance(500ms);  // the subscription's own backoff, at most its ceiling
  EXPECT_TRUE(s->healthy());
  EXPECT_TRUE((*layer)->healthy());
  EXPECT_EQ(setups, 2);
  EXPECT_EQ(s->resubscribed(), 1u);
  EXPECT_EQ(events, (std::vector<std::string>{"consumer.closed", "consumer.recovered"}));
  EXPECT_FALSE(over.has_value());

  session->close(nullptr);
  driver.run();
  EXPECT_TRUE(s->over());
  EXPECT_FALSE((*layer)->healthy());
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(events.back(), "connection");
}

}  // namespace
}  // namespace warren::test

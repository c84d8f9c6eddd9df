// The Session on the fake driver and its virtual clock: the backoff schedule and its jitter
// bounds, the first connection retried while refused but not when the login is refused,
// setup re-run (and nothing else replayed) after a reconnect, publishes with an unknown
// outcome never republished, publishes waiting within their deadlines and within a bound,
// and deliveries from a dead channel never settled.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "client/fake_driver.hpp"
#include "support/outcome.hpp"
#include "warren/client/session.hpp"
#include "warren/engine/describe.hpp"

namespace warren::test {
namespace {

using client::Session;

class SessionTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  client::SessionOptions options;
  std::vector<Session::Status> statuses;

  SessionTest() {
    options.jitter_seed = 42;
    options.backoff = client::Backoff{100ms, 2.0, 1000ms};
  }

  std::shared_ptr<Session> start() {
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    auto s = Session::start(driver, *url, options);
    s->on_status = [this](const Session::Status& st) { statuses.push_back(st); };
    driver.run();
    return s;
  }
  // Waits out the retry the last status announced.
  void wait_retry() { driver.advance(statuses.back().delay); }

  static std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span{s.data(), s.size()}); }
  static std::size_t count(const std::vector<std::string>& methods, std::string_view name) {
    return static_cast<std::size_t>(std::count(methods.begin(), methods.end(), name));
  }
};

TEST(SessionStates, each_has_a_name_for_logs) {
  EXPECT_STREQ(client::to_string(Session::State::connecting), "connecting");
  EXPECT_STREQ(client::to_string(Session::State::connected), "connected");
  EXPECT_STREQ(client::to_string(Session::State::reconnecting), "reconnecting");
  EXPECT_STREQ(client::to_string(Session::State::closed), "closed");
  EXPECT_STREQ(client::to_string(client::RecoveringChannel::State::retrying), "retrying");
  EXPECT_EQ(client::to_string(Session::Status{.state = Session::State::connected}), "connected");
}

TEST(Backoff, the_ceiling_grows_by_the_factor_up_to_the_cap) {
  client::Backoff b{100ms, 2.0, 1000ms};
  std::vector<long> ceilings;
  for (unsigned a = 1; a <= 6; ++a) ceilings.push_back(static_cast<long>(b.ceiling(a).count()));
  EXPECT_EQ(ceilings, (std::vector<long>{100, 200, 400, 800, 1000, 1000}));
}

TEST_F(SessionTest, the_first_connection_is_retried_with_full_jitter_until_the_host_answers) {
  auto session = start();  // nothing listens yet
  std::vector<long> delays;
  for (unsigned attempt = 1; attempt <= 12; ++attempt) {
    ASSERT_FALSE(statuses.empty());
    const auto& st = statuses.back();
    EXPECT_EQ(st.state, Session::State::connecting);
    EXPECT_EQ(st.attempt, attempt);
    ASSERT_TRUE(st.last_cause.has_value());
    EXPECT_EQ(st.last_cause->to_string(), "connection lost: connect fake:5001: connection refused");
    EXPECT_GE(st.delay.count(), 0);
    EXPECT_LE(st.delay, options.backoff.ceiling(attempt)) << "attempt " << attempt;
    EXPECT_EQ(client::to_string(st), "connecting (attempt " + std::to_string(attempt) + " in " + std::to_string(st.delay.count()) +
                                         " ms; last cause: connection lost: connect fake:5001: connection refused)");
    delays.push_back(static_cast<long>(st.delay.count()));
    const int dials = driver.dials;
    if (st.delay.count() > 0) {
      driver.advance(st.delay - 1ms);
      EXPECT_EQ(driver.dials, dials) << "dialled before the delay was over";
    }
    driver.advance(st.delay.count() > 0 ? 1ms : 0ms);
    EXPECT_EQ(driver.dials, dials + 1);
  }
  // Full jitter: the delays are spread, not the ceilings themselves.
  EXPECT_GT(std::set<long>(delays.begin(), delays.end()).size(), 6u);
  driver.hosts[5001] = FakeDriver::Host::broker;
  wait_retry();
  EXPECT_EQ(statuses.back().state, Session::State::connected);
  EXPECT_TRUE(session->healthy());
}

TEST_F(SessionTest, refused_credentials_fail_at_once_and_are_not_retried) {
  driver.hosts[5001] = FakeDriver::Host::refuse_login;
  auto session = start();
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.back().state, Session::State::closed);
  ASSERT_TRUE(statuses.back().last_cause.has_value());
  EXPECT_EQ(statuses.back().last_cause->reply_code, 403);
  driver.advance(std::chrono::minutes(10));
  EXPECT_EQ(driver.dials, 1);
  EXPECT_FALSE(session->healthy());
}

TEST_F(SessionTest, setup_runs_again_after_every_reconnect_and_nothing_else_is_replayed) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  int setups = 0;
  std::vector<client::Consumer> consumers;
  auto ch = session->channel([&](client::RecoveringChannel& c, client::Callback<void> done) {
    ++setups;
    c.channel().queue_declare({.name = "work"}, [&, done](Result<client::QueueDeclared> q) {
      if (!q) return done(q.error());
      c.channel().consume({.queue = "work", .prefetch = 10}, [](const client::Delivery&) {},
                          [&, done](Result<client::Consumer> r) {
                            if (!r) return done(r.error());
                            consumers.push_back(std::move(*r));
                            done(Result<void>());
                          });
    });
  });
  driver.run();
  EXPECT_EQ(setups, 1);
  EXPECT_TRUE(ch->ready());

  driver.reset_all();
  EXPECT_FALSE(ch->ready());
  ASSERT_EQ(statuses.back().state, Session::State::reconnecting);
  EXPECT_EQ(statuses.back().attempt, 1u);
  EXPECT_EQ(statuses.back().last_cause->to_string(), "connection lost: connection reset by peer");
  EXPECT_FALSE(session->healthy());
  wait_retry();
  EXPECT_TRUE(session->healthy());
  EXPECT_EQ(setups, 2);
  EXPECT_TRUE(ch->ready());
  EXPECT_EQ(driver.last_broker().methods,
            (std::vector<std::string>{"connection.start-ok", "connection.tune-ok", "connection.open", "channel.open",
                                      "confirm.select", "queue.declare", "basic.qos", "basic.consume"}));
}

// Issue 24: a session's life reaches the observer of its connections' options, its own records
// between theirs: the reconnect (with its attempt and delay), the recovery of its channel.
TEST_F(SessionTest, a_reconnect_and_the_channels_recovery_reach_the_observer) {
  struct Names : client::Observer {
    std::vector<std::string> lines;
    void on_record(const client::Record& r) override {
      lines.push_back(std::string(r.name) + (r.subject.empty() ? "" : " '" + std::string(r.subject) + "'") + " " +
                      client::to_string(r.level) + " " + std::string(r.connection));
    }
  };
  auto names = std::make_shared<Names>();
  options.client.observer = names;
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  ASSERT_TRUE(ch->ready());
  driver.reset_all();
  ASSERT_EQ(statuses.back().state, Session::State::reconnecting);
  const std::string delay = std::to_string(statuses.back().delay.count());
  wait_retry();
  ASSERT_TRUE(ch->ready());
  EXPECT_EQ(names->lines,
            (std::vector<std::string>{"connection.connecting info fake:5001", "connection.connected info fake:5001",
                                      "session.connected info fake:5001", "connection.closed error fake:5001",
                                      "session.reconnecting 'attempt 1 in " + delay + " ms' warning fake:5001",
                                      "connection.connecting info fake:5001", "connection.connected info fake:5001",
                                      "session.reconnected info fake:5001", "channel.recovered info fake:5001"}));
}

// Issue 24, metrics: the Session's connections count in its options' Metrics, and so does the
// reconnect itself; the lost connection's share of the gauges went with it.
TEST_F(SessionTest, a_reconnect_counts_once_and_the_lost_connection_leaves_no_gauge) {
  auto metrics = std::make_shared<client::Metrics>();
  options.client.metrics = metrics;
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  ASSERT_TRUE(ch->ready());
  EXPECT_EQ(metrics->snapshot().total("warren.session.reconnects"), 0);
  driver.reset_all();
  EXPECT_EQ(metrics->snapshot().total("warren.connections"), 0);
  wait_retry();
  ASSERT_TRUE(ch->ready());
  const auto snap = metrics->snapshot();
  EXPECT_EQ(snap.total("warren.session.reconnects"), 1);
  EXPECT_EQ(snap.total("warren.connections"), 1);
  EXPECT_EQ(snap.total("warren.channels"), 1);
}

TEST_F(SessionTest, a_publish_whose_confirm_was_outstanding_fails_as_unknown_and_is_not_republished) {
  driver.hosts[5001] = FakeDriver::Host::broker_holding_confirms;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  std::optional<engine::PublishOutcome> outcome;
  ch->publish({.routing_key = "q", .timeout = 10s}, text("maybe"),
              [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); outcome = o; });
  driver.run();
  EXPECT_EQ(driver.last_broker().published, 1u);
  EXPECT_FALSE(outcome.has_value());  // unconfirmed
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.reset_all();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(*outcome, engine::PublishOutcome::failed);
  wait_retry();
  ASSERT_TRUE(session->healthy());
  EXPECT_EQ(driver.last_broker().published, 0u);  // never sent again
}

TEST_F(SessionTest, publishes_made_while_disconnected_wait_and_go_out_after_setup) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  bool setup_done = false;
  auto ch = session->channel([&](client::RecoveringChannel&, client::Callback<void> done) {
    setup_done = true;
    done(Result<void>());
  });
  driver.run();
  driver.reset_all();
  setup_done = false;
  std::vector<engine::PublishOutcome> outcomes;
  for (int i = 0; i < 3; ++i)
    ch->publish({.routing_key = "q", .timeout = 10s}, text("later"),
                [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); outcomes.push_back(o); });
  EXPECT_EQ(ch->waiting(), 3u);
  wait_retry();
  EXPECT_TRUE(setup_done);
  EXPECT_EQ(ch->waiting(), 0u);
  EXPECT_EQ(driver.last_broker().published, 3u);
  EXPECT_EQ(outcomes, std::vector<engine::PublishOutcome>(3, engine::PublishOutcome::confirmed));
}

TEST_F(SessionTest, a_waiting_publish_past_its_deadline_times_out_and_is_never_sent) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  driver.hosts[5001] = FakeDriver::Host::refuse;
  driver.reset_all();
  std::optional<engine::PublishOutcome> outcome;
  std::string cause;
  ch->publish({.routing_key = "q", .timeout = 500ms}, text("late"), [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r));
    outcome = o;
    cause = e.to_string();
  });
  driver.advance(499ms);
  EXPECT_FALSE(outcome.has_value());
  driver.advance(1ms);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(*outcome, engine::PublishOutcome::timed_out);
  EXPECT_EQ(cause, "timed out: no connection before the publish's deadline; it was never sent");
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.advance(10s);
  ASSERT_TRUE(session->healthy());
  EXPECT_EQ(driver.last_broker().published, 0u);
}

TEST_F(SessionTest, the_number_of_waiting_publishes_is_bounded) {
  options.max_waiting_publishes = 2;
  auto session = start();  // nothing listens
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  std::vector<std::string> refused;
  for (int i = 0; i < 3; ++i)
    ch->publish({.routing_key = "q", .timeout = 60s}, text("x"), [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r));
      if (o == engine::PublishOutcome::failed) refused.push_back(e.to_string());
    });
  driver.run();
  EXPECT_EQ(ch->waiting(), 2u);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0], "resource locked: 2 publishes already wait for the connection (max_waiting_publishes)");
}

TEST_F(SessionTest, a_delivery_from_before_the_drop_is_not_settled_and_nothing_is_sent) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  std::vector<client::Message> refs;
  std::vector<client::Consumer> consumers;
  auto ch = session->channel([&](client::RecoveringChannel& c, client::Callback<void> done) {
    c.channel().consume({.queue = "work", .prefetch = 10}, [&](const client::Delivery& d) { refs.push_back(d.take()); },
                        [&, done](Result<client::Consumer> r) {
                          if (!r) return done(r.error());
                          consumers.push_back(std::move(*r));
                          done(Result<void>());
                        });
  });
  driver.run();
  driver.last_broker().deliver("before");
  driver.run();
  ASSERT_EQ(refs.size(), 1u);

  driver.reset_all();
  wait_retry();
  ASSERT_TRUE(ch->ready());
  auto stale = refs[0].ack();
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, make_error_code(errc::channel_closed));
  EXPECT_EQ(stale.error().detail, "channel 1 is gone: nothing was sent, the broker redelivers delivery 1");
  driver.run();
  EXPECT_EQ(count(driver.last_broker().methods, "basic.ack"), 0u);

  driver.last_broker().deliver("after");
  driver.run();
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[1].delivery_tag(), 1u);  // the same tag number, but of the new channel
  EXPECT_TRUE(refs[1].ack().ok());
  driver.run();
  EXPECT_EQ(count(driver.last_broker().methods, "basic.ack"), 1u);
}

TEST_F(SessionTest, close_fails_what_waits_and_stops_retrying) {
  auto session = start();  // nothing listens
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  std::optional<std::string> cause;
  ch->publish({.routing_key = "q", .timeout = 60s}, text("x"),
              [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); cause = e.to_string(); });
  bool closed = false;
  session->close([&](Result<void>) { closed = true; });
  driver.run();
  EXPECT_TRUE(closed);
  EXPECT_EQ(cause.value_or(""), "connection closed: the session closed first; it was never sent");
  const int dials = driver.dials;
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.advance(std::chrono::minutes(5));
  EXPECT_EQ(driver.dials, dials);
  EXPECT_EQ(session->status().state, Session::State::closed);
}

// ---- plain channels: the messaging layer's channel source

TEST_F(SessionTest, open_channel_while_reconnecting_waits_for_the_next_connection) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  ASSERT_EQ(session->status().state, Session::State::connected);
  EXPECT_GT(session->frame_max_bytes(), 0u);
  std::optional<client::Channel> first;
  session->open_channel([&](Result<client::Channel> r) { first = r.ok() ? std::optional(*r) : std::nullopt; });
  driver.run();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->is_open());

  driver.reset_all();
  ASSERT_EQ(statuses.back().state, Session::State::reconnecting);
  EXPECT_FALSE(first->is_open()) << "a plain channel does not outlive its connection";
  int told = 0;
  std::optional<client::Channel> second;
  session->open_channel([&](Result<client::Channel> r) {
    ++told;
    if (r) second = *r;
  });
  driver.run();
  EXPECT_EQ(told, 0) << "it waits while the session reconnects";
  wait_retry();
  EXPECT_EQ(told, 1);
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(second->is_open());
  EXPECT_GT(session->frame_max_bytes(), 0u);
  driver.advance(std::chrono::minutes(5));
  EXPECT_EQ(told, 1) << "told exactly once";
}

TEST_F(SessionTest, open_channel_waits_at_most_the_request_timeout_then_fails) {
  options.client.engine.request_timeout = 2000ms;
  options.backoff = client::Backoff{60000ms, 2.0, 60000ms};  // no reconnect inside the test
  auto session = start();  // nothing listens
  std::vector<std::string> causes;
  session->open_channel([&](Result<client::Channel> r) {
    causes.push_back(r.ok() ? "opened" : r.error().to_string());
  });
  driver.advance(1999ms);
  EXPECT_TRUE(causes.empty());
  driver.advance(1ms);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0], "timed out: no connection came within the request timeout (the session is still dialling)");
  driver.advance(std::chrono::minutes(5));
  EXPECT_EQ(causes.size(), 1u);
}

TEST_F(SessionTest, open_channel_fails_when_the_session_closes_or_is_closed) {
  auto session = start();  // nothing listens
  std::vector<std::string> causes;
  auto note = [&](Result<client::Channel> r) {
    causes.push_back(r.ok() ? "opened" : r.error().to_string());
  };
  session->open_channel(note);
  session->close(nullptr);
  driver.run();
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0], "connection closed: the session closed before a connection came");
  session->open_channel(note);
  EXPECT_EQ(causes.size(), 1u) << "never told inside the call";
  driver.run();
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[1], "connection closed: the session is closed");
}

TEST_F(SessionTest, open_channel_is_told_when_the_session_is_dropped_while_it_waits) {
  auto session = start();  // nothing listens
  std::vector<std::string> causes;
  session->open_channel([&](Result<client::Channel> r) { causes.push_back(r.ok() ? "opened" : r.error().to_string()); });
  session.reset();
  EXPECT_TRUE(causes.empty()) << "never told inside the destructor";
  driver.run();
  EXPECT_EQ(causes, (std::vector<std::string>{"connection closed: the session was destroyed before a connection came"}));
}

TEST_F(SessionTest, open_channel_fails_at_once_with_refused_credentials) {
  driver.hosts[5001] = FakeDriver::Host::refuse_login;
  auto session = start();
  std::optional<Error> cause;
  session->open_channel([&](Result<client::Channel> r) {
    if (!r.ok()) cause = r.error();
  });
  driver.run();
  ASSERT_TRUE(cause.has_value());
  EXPECT_EQ(cause->reply_code, 403);
}

// ---- finding 9: a channel fails and recovers on its own while the connection lives

class ChannelRecoveryTest : public SessionTest {
 protected:
  BrokerWorld world;
  std::vector<client::RecoveringChannel::Status> channel_statuses;
  ChannelRecoveryTest() {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
  }
  std::shared_ptr<client::RecoveringChannel> channel(client::Session& s, client::RecoveringChannel::Setup setup) {
    auto ch = s.channel(std::move(setup));
    ch->on_status = [this](const client::RecoveringChannel::Status& st) { channel_statuses.push_back(st); };
    driver.run();
    return ch;
  }
  static client::RecoveringChannel::Setup plain() {
    return [](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); };
  }
};

TEST_F(ChannelRecoveryTest, a_channel_the_broker_closes_is_opened_and_set_up_again) {
  auto session = start();
  int setups = 0;
  auto ch = channel(*session, [&](client::RecoveringChannel&, client::Callback<void> done) {
    ++setups;
    done(Result<void>());
  });
  ASSERT_TRUE(ch->ready());
  ASSERT_TRUE(session->healthy());
  driver.broker_on(5001)->close_channel(ch->id(), 404, "NOT_FOUND - no exchange 'gone' in vhost '/'");
  driver.run();
  EXPECT_FALSE(ch->ready());
  EXPECT_FALSE(session->healthy());  // the connection is fine; the channel is not
  ASSERT_EQ(ch->status().state, client::RecoveringChannel::State::retrying);
  EXPECT_EQ(ch->status().attempt, 1u);
  EXPECT_EQ(ch->status().last_cause->reply_code, 404);
  driver.advance(ch->status().delay);
  EXPECT_TRUE(ch->ready());
  EXPECT_TRUE(session->healthy());
  EXPECT_EQ(setups, 2);
  EXPECT_EQ(driver.dials, 1);  // the same connection
}

TEST_F(ChannelRecoveryTest, a_setup_that_fails_is_retried_with_backoff_and_its_publishes_wait) {
  auto session = start();
  int setups = 0;
  auto ch = channel(*session, [&](client::RecoveringChannel&, client::Callback<void> done) {
    if (++setups < 3) {
      Error e = make_error(errc::not_found, "NOT_FOUND - no exchange 'upstream' in vhost '/'");
      e.reply_code = 404;
      return done(e);
    }
    done(Result<void>());
  });
  EXPECT_FALSE(ch->ready());
  std::optional<std::string> outcome;
  ch->publish({.routing_key = "q", .timeout = 60s}, text("k1:waits"),
              [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); outcome = std::string(engine::to_string(o)); });
  for (unsigned attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_EQ(ch->status().state, client::RecoveringChannel::State::retrying);
    EXPECT_EQ(ch->status().attempt, attempt);
    EXPECT_LE(ch->status().delay, options.backoff.ceiling(attempt));
    EXPECT_FALSE(outcome.has_value());  // a 404 may be fixed by someone else: it waits
    driver.advance(ch->status().delay);
  }
  EXPECT_TRUE(ch->ready());
  EXPECT_EQ(setups, 3);
  EXPECT_EQ(outcome.value_or("<none>"), "confirmed");
}

TEST_F(ChannelRecoveryTest, a_cause_no_retry_fixes_fails_waiting_publishes_at_once_with_it) {
  auto session = start();
  auto ch = session->channel([&](client::RecoveringChannel&, client::Callback<void> done) {
    Error e = make_error(errc::precondition_failed, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q'");
    e.reply_code = 406;
    done(e);
  });
  std::optional<std::string> waiting, later;
  ch->publish({.routing_key = "q", .timeout = 60s}, text("k1:x"),
              [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); waiting = std::string(engine::to_string(o)) + " " + e.to_string(); });
  driver.run();  // the channel opens, its setup fails with 406
  EXPECT_EQ(waiting.value_or("<none>"),
            "failed precondition failed (406): PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q'");
  ASSERT_FALSE(ch->ready());
  ch->publish({.routing_key = "q", .timeout = 60s}, text("k1:x"),
              [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r)); later = std::string(engine::to_string(o)) + " " + e.to_string(); });
  driver.run();
  EXPECT_EQ(later.value_or("<none>"),
            "failed precondition failed (406): PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q'");
  // It still retries (an operator may fix the queue), and says why it is not ready.
  EXPECT_EQ(ch->status().state, client::RecoveringChannel::State::retrying);
}

TEST_F(SessionTest, refused_credentials_on_a_reconnect_fail_every_waiting_publish_at_once) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  ASSERT_TRUE(ch->ready());
  driver.hosts[5001] = FakeDriver::Host::refuse_login;  // the password was changed
  driver.reset_all();
  std::optional<std::string> outcome;
  const auto sent_at = driver.now();
  engine::Instant settled_at{};
  ch->publish({.routing_key = "q", .timeout = 60s}, text("x"), [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r));
    outcome = std::string(engine::to_string(o)) + " " + std::to_string(e.reply_code);
    settled_at = driver.now();
  });
  wait_retry();
  ASSERT_EQ(statuses.back().state, Session::State::closed);
  EXPECT_EQ(outcome.value_or("<none>"), "failed 403");
  EXPECT_LT(settled_at - sent_at, 60s);
  // A publish after the end is told the session's cause too, not only that it is closed.
  std::optional<std::string> after;
  ch->publish({.routing_key = "q", .timeout = 60s}, text("y"), [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r));
    after = std::string(engine::to_string(o)) + " " + std::to_string(e.reply_code);
  });
  driver.run();
  EXPECT_EQ(after.value_or("<none>"), "failed 403");
}

// Finding 10: every attempt started from the first host of the URL.
TEST_F(SessionTest, each_attempt_starts_at_the_next_host) {
  auto url = client::parse_url("amqp://guest:guest@fake:5002,fake:5003");
  ASSERT_TRUE(url.ok());
  auto session = Session::start(driver, *url, options);
  session->on_status = [this](const Session::Status& st) { statuses.push_back(st); };
  driver.run();
  wait_retry();
  wait_retry();
  EXPECT_EQ(driver.dialled, (std::vector<std::uint16_t>{5002, 5003, 5003, 5002, 5002, 5003}));
}

// Issue 39: the CLI's --url given more than once (each URL with its own credentials or TLS)
// behind one Session: each attempt dials one URL, from the next host along them all.
TEST_F(SessionTest, several_urls_are_dialled_in_turn_host_by_host) {
  std::vector<client::ConnectionUrl> urls;
  for (const char* text : {"amqp://a:a@fake:5002", "amqp://b:b@fake:5003,fake:5004"}) {
    auto url = client::parse_url(text);
    ASSERT_TRUE(url.ok());
    urls.push_back(*url);
  }
  auto session = Session::start(driver, urls, options);
  session->on_status = [this](const Session::Status& st) { statuses.push_back(st); };
  driver.run();
  wait_retry();
  wait_retry();
  wait_retry();
  EXPECT_EQ(driver.dialled, (std::vector<std::uint16_t>{5002, 5003, 5004, 5004, 5003, 5002}));
  driver.hosts[5004] = FakeDriver::Host::broker;
  wait_retry();
  EXPECT_EQ(statuses.back().state, Session::State::connected);
  ASSERT_TRUE(session->endpoint().has_value());
  EXPECT_EQ(session->endpoint()->port, 5004);
  EXPECT_EQ(session->url_index(), std::optional<std::size_t>(1));  // b's: `warren pipe` keeps b's user_id
}

TEST_F(SessionTest, without_a_url_it_is_closed_at_once) {
  auto session = Session::start(driver, std::vector<client::ConnectionUrl>{}, options);
  EXPECT_EQ(session->status().state, Session::State::closed);
  ASSERT_TRUE(session->status().last_cause.has_value());
  EXPECT_EQ(session->status().last_cause->code, make_error_code(errc::invalid_argument));
  EXPECT_EQ(driver.dials, 0);
  bool closed = false;
  session->close([&](Result<void>) { closed = true; });  // and closing it again is harmless
  driver.run();
  EXPECT_TRUE(closed);
}

// Review of issue 39: a session closed from its own on_status while it announced a retry armed
// the retry all the same, and the loop ran on until it fired.
TEST_F(SessionTest, closed_from_on_status_it_arms_no_retry) {
  auto url = client::parse_url("amqp://guest:guest@fake:5001");
  ASSERT_TRUE(url.ok());
  auto session = Session::start(driver, *url, options);
  session->on_status = [&](const Session::Status& st) {
    if (st.state == Session::State::connecting && st.last_cause) session->close(nullptr);
  };
  driver.run();
  EXPECT_EQ(session->status().state, Session::State::closed);
  EXPECT_EQ(driver.armed_timers(), 0u);
  driver.advance(std::chrono::minutes(1));
  EXPECT_EQ(driver.dials, 1);
}

// Issue 39: after a loss every session of a node went on to the same next host (the one after
// it in the URL); now a host other than the lost one, drawn at random, is dialled first.
TEST_F(SessionTest, after_a_loss_another_host_than_the_lost_one_is_dialled_first_drawn_at_random) {
  auto url = client::parse_url("amqp://guest:guest@fake:5001,fake:5002,fake:5003");
  ASSERT_TRUE(url.ok());
  for (std::uint16_t port : {5001, 5002, 5003}) driver.hosts[port] = FakeDriver::Host::broker;
  std::set<std::uint16_t> firsts;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    options.jitter_seed = seed;
    statuses.clear();
    auto session = Session::start(driver, *url, options);
    session->on_status = [this](const Session::Status& st) { statuses.push_back(st); };
    driver.run();
    ASSERT_EQ(session->endpoint()->port, 5001);  // the first connection: the URL's order
    driver.dialled.clear();
    driver.reset_all();
    ASSERT_EQ(statuses.back().state, Session::State::reconnecting);
    wait_retry();
    ASSERT_FALSE(driver.dialled.empty());
    EXPECT_NE(driver.dialled.front(), 5001) << "seed " << seed;
    firsts.insert(driver.dialled.front());
    ASSERT_EQ(statuses.back().state, Session::State::connected);
    session->close(nullptr);
    driver.run();
  }
  EXPECT_EQ(firsts, (std::set<std::uint16_t>{5002, 5003}));
}

// Review of issue 39: the attempt after a loss that started at the third host went on to the
// lost (first) one second, which a hung node makes cost a whole handshake timeout.
TEST_F(SessionTest, after_a_loss_the_lost_host_is_dialled_last) {
  auto url = client::parse_url("amqp://guest:guest@fake:5001,fake:5002,fake:5003");
  ASSERT_TRUE(url.ok());
  driver.hosts[5001] = FakeDriver::Host::broker;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    options.jitter_seed = seed;
    statuses.clear();
    auto session = Session::start(driver, *url, options);
    session->on_status = [this](const Session::Status& st) { statuses.push_back(st); };
    driver.run();
    ASSERT_EQ(session->endpoint()->port, 5001);
    driver.dialled.clear();
    driver.reset_all();  // 5002 and 5003 refuse: the attempt ends at 5001
    wait_retry();
    ASSERT_EQ(driver.dialled.size(), 3u) << "seed " << seed;
    EXPECT_EQ(driver.dialled.back(), 5001) << "seed " << seed;
    ASSERT_EQ(statuses.back().state, Session::State::connected);
    session->close(nullptr);
    driver.run();
  }
}

// Issue 39: `warren work run` stopped while its session dialled a host that takes the
// connection and never answers: close() left that dial to its handshake timeout, and the loop
// (and the process) ran on until then.
TEST_F(SessionTest, close_ends_a_dial_under_way_at_once) {
  driver.hosts[5001] = FakeDriver::Host::mute;
  auto session = start();
  ASSERT_EQ(driver.open_streams(), 1u);
  bool closed = false;
  session->close([&](Result<void>) { closed = true; });
  driver.run();
  EXPECT_TRUE(closed);
  EXPECT_EQ(driver.open_streams(), 0u);
  EXPECT_EQ(driver.armed_timers(), 0u);
  EXPECT_EQ(session->status().state, Session::State::closed);
}

// Issue 39: a --password-file change reached the CLI's connections but not a Session's.
TEST_F(SessionTest, update_secret_goes_to_the_current_connection_and_says_when_there_is_none) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto session = start();
  std::optional<std::string> told;
  session->update_secret("new-token", "rotated", [&](Result<void> r) { told = r ? "ok" : r.error().to_string(); });
  driver.run();
  EXPECT_EQ(told.value_or("<none>"), "ok");
  driver.reset_all();
  driver.hosts[5001] = FakeDriver::Host::refuse;
  driver.run();
  told.reset();
  session->update_secret("newer-token", "rotated", [&](Result<void> r) { told = r ? "ok" : r.error().to_string(); });
  EXPECT_FALSE(told.has_value());  // never inside the call
  driver.run();
  EXPECT_EQ(told.value_or("<none>").rfind("connection closed", 0), 0u) << told.value_or("<none>");
}

// Issue 39: `warren pipe` starts its pipeline again on the session's next connection; the
// handle it is given is the current one, none while there is none, and a new one after a loss.
TEST_F(SessionTest, connection_is_the_current_one_and_none_while_there_is_none) {
  driver.hosts[5001] = FakeDriver::Host::refuse;
  auto session = start();
  EXPECT_EQ(session->connection(), nullptr);  // dialling, refused
  driver.hosts[5001] = FakeDriver::Host::broker;
  wait_retry();
  auto first = session->connection();
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->is_open());
  EXPECT_EQ(session->url_index(), std::optional<std::size_t>(0));
  driver.reset_all();
  driver.hosts[5001] = FakeDriver::Host::refuse;
  driver.run();
  EXPECT_EQ(session->connection(), nullptr);
  EXPECT_EQ(session->url_index(), std::nullopt);
  EXPECT_FALSE(first->is_open());  // a kept handle stays the lost connection
  driver.hosts[5001] = FakeDriver::Host::broker;
  wait_retry();
  auto second = session->connection();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_TRUE(second->is_open());
  session->close(nullptr);
  driver.run();
  EXPECT_EQ(session->connection(), nullptr);
}

// Finding 11: a Session publish's timeout bounds the confirm too, not only the wait for a
// connection (the engine's own deadline is the connection-wide 10 s).
TEST_F(SessionTest, a_publish_timeout_bounds_the_broker_s_answer_too) {
  driver.hosts[5001] = FakeDriver::Host::broker_holding_confirms;
  auto session = start();
  auto ch = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done(Result<void>()); });
  driver.run();
  ASSERT_TRUE(ch->ready());
  std::optional<std::string> outcome;
  ch->publish({.routing_key = "q", .timeout = 2s}, text("x"), [&](Result<engine::PublishOutcome> r) { [[maybe_unused]] auto [o, e] = split(std::move(r));
    outcome = std::string(engine::to_string(o)) + ": " + e.detail;
  });
  driver.advance(1999ms);
  EXPECT_FALSE(outcome.has_value());
  driver.advance(1ms);
  EXPECT_EQ(outcome.value_or("<none>"), "timed_out: no confirm within 2000 ms; the broker may or may not have the message");
  driver.advance(20s);  // the engine's own timeout later is not a second report
}

}  // namespace
}  // namespace warren::test

namespace warren::test {
namespace {

// Issue 23, item 5: a recovering channel whose setup the broker refuses for good (here a 406:
// the queue exists with other arguments) retried forever in silence unless the application
// had set on_status. The refusal is now told once per episode: to on_setup_refused when set,
// else as one line on standard error; retry_refused_setup = false stops the retries.
class RefusedSetup : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  client::SessionOptions options;
  int declares = 0;

  RefusedSetup() {
    options.jitter_seed = 42;
    options.backoff = client::Backoff{100ms, 2.0, 1000ms};
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
    world.queues["jobs"];
    world.queue_info["jobs"] = ModelQueueInfo{.type = "quorum"};
  }
  std::shared_ptr<Session> start() {
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    auto s = Session::start(driver, *url, options);
    driver.run();
    return s;
  }
  client::RecoveringChannel::Setup declare_classic() {
    return [this](client::RecoveringChannel& c, client::Callback<void> done) {
      ++declares;
      c.channel().queue_declare({.name = "jobs", .durable = true}, [done](Result<client::QueueDeclared> r) {
        done(r ? Result<void>() : Result<void>(r.error()));
      });
    };
  }
};

TEST_F(RefusedSetup, is_told_on_standard_error_once_by_default_and_retried) {
  auto session = start();
  ::testing::internal::CaptureStderr();
  auto ch = session->channel(declare_classic());
  driver.advance(10s);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(declares, 3) << "it stopped retrying";
  EXPECT_EQ(ch->status().state, client::RecoveringChannel::State::retrying);
  EXPECT_EQ(said,
            "warren: a recovering channel's setup was refused: precondition failed (406): PRECONDITION_FAILED - "
            "inequivalent arg 'x-queue-type' for queue 'jobs' in vhost '/' (retrying with backoff; "
            "SessionOptions::on_setup_refused replaces this line)\n");
  session->close(nullptr);
  driver.advance(10s);
}

TEST_F(RefusedSetup, is_a_record_for_the_observer_too) {
  struct Refusals : client::Observer {
    std::vector<std::string> lines;
    void on_record(const client::Record& r) override {
      if (r.name == "channel.setup_refused" || r.name == "channel.retrying")
        lines.push_back(std::string(r.name) + " " + std::string(r.subject) + ": " + (r.cause ? r.cause->to_string() : ""));
    }
  };
  auto refusals = std::make_shared<Refusals>();
  options.client.observer = refusals;
  options.on_setup_refused = [](const Error&) {};
  options.retry_refused_setup = false;
  auto session = start();
  auto ch = session->channel(declare_classic());
  driver.advance(10s);
  ASSERT_EQ(refusals->lines.size(), 1u);
  EXPECT_EQ(refusals->lines[0].rfind("channel.setup_refused not retried: precondition failed (406)", 0), 0u)
      << refusals->lines[0];
  session->close(nullptr);
  driver.advance(10s);
}

TEST_F(RefusedSetup, goes_to_on_setup_refused_when_set_and_can_stop_the_retries) {
  std::vector<std::string> told;
  options.on_setup_refused = [&](const Error& cause) { told.push_back(cause.to_string()); };
  options.retry_refused_setup = false;
  auto session = start();
  ::testing::internal::CaptureStderr();
  auto ch = session->channel(declare_classic());
  driver.advance(10s);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("inequivalent arg 'x-queue-type'"), std::string::npos) << told[0];
  EXPECT_EQ(declares, 1) << "it was retried";
  EXPECT_EQ(ch->status().state, client::RecoveringChannel::State::failed);
  int published = 0;
  ch->publish({.routing_key = "jobs"}, std::as_bytes(std::span{"x", 1}), [&](Result<engine::PublishOutcome>) { ++published; });
  driver.run();
  EXPECT_EQ(published, 1) << "a publish waited on a channel that will not be retried";
  // The application's own close: the status no longer names the old cause.
  bool closed = false;
  session->close([&](Result<void>) { closed = true; });
  driver.advance(10s);
  EXPECT_TRUE(closed);
  EXPECT_EQ(session->status().state, Session::State::closed);
  EXPECT_FALSE(session->status().last_cause.has_value()) << session->status().last_cause->to_string();
}

}  // namespace
}  // namespace warren::test

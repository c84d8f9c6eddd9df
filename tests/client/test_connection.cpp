// client::Connection on the fake driver: every callback it is handed runs exactly once,
// whatever ends the connection and whenever close() is called, and the dial moves past a
// host that takes the TCP connection but never finishes the handshake.
#include <gtest/gtest.h>

#include "client/fake_driver.hpp"
#include "support/outcome.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {
namespace {

// How often a callback ran, and with what.
struct Calls {
  int count = 0;
  std::string last;  // "ok" or the error's text
  template <class T>
  void operator()(const Result<T>& r) {
    ++count;
    last = r ? "ok" : r.error().to_string();
  }
};

std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span{s.data(), s.size()}); }

class ConnectionTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  Calls ready;

  std::shared_ptr<client::Connection> dial(const std::string& url_text, client::ClientOptions options = {}) {
    auto url = client::parse_url(url_text);
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    return client::Connection::connect(driver, *url, std::move(options), [this](Result<void> r) { ready(r); });
  }
  std::shared_ptr<client::Connection> connected() {
    driver.hosts[5001] = FakeDriver::Host::broker;
    auto c = dial("amqp://guest:guest@fake:5001");
    driver.run();
    if (ready.last != "ok") throw std::runtime_error("not connected: " + ready.last);
    return c;
  }
  client::Channel channel(client::Connection& c) {
    client::Channel ch;
    c.open_channel([&](Result<client::Channel> r) {
      if (r) ch = *r;
    });
    driver.run();
    if (!ch.is_open()) throw std::runtime_error("channel did not open");
    return ch;
  }
};

// Finding 2: a channel whose open-ok had not come when the connection died was never told.
TEST_F(ConnectionTest, a_channel_still_opening_when_the_connection_dies_is_told_once) {
  auto c = connected();
  Calls opened;
  c->open_channel([&](Result<client::Channel> r) { opened(r); });
  driver.reset_all();  // before the broker's open-ok is read
  driver.advance(60s);
  EXPECT_EQ(opened.count, 1);
  EXPECT_EQ(opened.last, "connection lost: connection reset by peer");
}

// Finding 3: a no-wait consume never registered its handler, so its deliveries were dropped.
// The public API has no no-wait consume; a subscription with a tag of our own is registered
// when consume-ok names it, and each delivery reaches on_delivery.
TEST_F(ConnectionTest, a_consume_with_its_own_tag_receives_its_deliveries) {
  auto c = connected();
  auto ch = channel(*c);
  std::vector<std::string> bodies;
  Calls consumed;
  client::Consumer consumer;
  ch.consume({.queue = "q", .tag = "mine"}, [&](const client::Delivery& d) { bodies.emplace_back(d.body_text()); },
             [&](Result<client::Consumer> r) {
               consumed(r);
               if (r) consumer = std::move(*r);
             });
  driver.run();
  EXPECT_EQ(consumed.count, 1);
  EXPECT_EQ(consumer.tag(), "mine");
  driver.last_broker().deliver("one");
  driver.last_broker().deliver("two");
  driver.run();
  EXPECT_EQ(bodies, (std::vector<std::string>{"one", "two"}));
}

// Finding 4: a publish that fails at once with no callback given called the empty callback
// (std::bad_function_call on the loop): on an empty handle, on a closed one, and refused by
// a connection that is closing.
TEST_F(ConnectionTest, a_failed_publish_without_a_callback_calls_nothing) {
  auto c = connected();
  client::Channel{}.publish({.routing_key = "q"}, text("x"), nullptr);
  EXPECT_NO_THROW(driver.run());

  auto closed = channel(*c);
  closed.close(nullptr);
  driver.run();
  ASSERT_FALSE(closed.is_open());
  closed.publish({.routing_key = "q"}, text("x"), nullptr);
  EXPECT_NO_THROW(driver.run());

  auto ch = channel(*c);
  driver.hold_input(5001, true);  // the close-ok waits: the connection is closing, the handle open
  c->close(nullptr);
  driver.run();
  ASSERT_TRUE(ch.is_open());
  ch.publish({.routing_key = "q"}, text("x"), nullptr);
  EXPECT_NO_THROW(driver.run());
}

// Finding 5: close() before the TCP connect completed reported success but let the dial go
// on; the connection then came up with nobody wanting it.
TEST_F(ConnectionTest, close_while_dialling_stops_the_dial) {
  driver.hosts[5001] = FakeDriver::Host::black_hole;
  auto c = dial("amqp://guest:guest@fake:5001,fake:5002");
  Calls closed;
  c->close([&](Result<void> r) { closed(r); });
  driver.advance(60s);
  EXPECT_EQ(closed.count, 1);
  EXPECT_EQ(closed.last, "ok");
  EXPECT_EQ(ready.count, 1);
  EXPECT_EQ(ready.last, "connection closed: closed by the application before it was connected");
  EXPECT_EQ(driver.dials, 1);  // the second host was never tried
}

// Finding 5: close() during the handshake never ran its done.
TEST_F(ConnectionTest, close_during_the_handshake_runs_its_done_once) {
  driver.hosts[5001] = FakeDriver::Host::mute;
  auto c = dial("amqp://guest:guest@fake:5001");
  driver.run();  // TCP is up; the broker has not answered the protocol header
  Calls closed;
  c->close([&](Result<void> r) { closed(r); });
  driver.advance(60s);
  EXPECT_EQ(closed.count, 1);
  EXPECT_EQ(closed.last, "ok");
  EXPECT_EQ(ready.count, 1);
  EXPECT_EQ(ready.last, "connection closed (200): closed by the application");
}

// Two close() calls: both are told when the one close ends.
TEST_F(ConnectionTest, every_close_caller_is_told_once) {
  auto c = connected();
  Calls first, second, third;
  c->close([&](Result<void> r) { first(r); });
  c->close([&](Result<void> r) { second(r); });
  driver.run();
  c->close([&](Result<void> r) { third(r); });  // after the end
  driver.advance(60s);
  EXPECT_EQ(first.count, 1);
  EXPECT_EQ(second.count, 1);
  EXPECT_EQ(third.count, 1);
  EXPECT_EQ(first.last, "ok");
  EXPECT_EQ(second.last, "ok");
  EXPECT_EQ(third.last, "ok");
}

// Finding 10: a host that accepts TCP but never finishes the handshake ended the dial with
// a timeout instead of moving on to the next host.
TEST_F(ConnectionTest, a_host_that_never_finishes_the_handshake_moves_the_dial_on) {
  driver.hosts[5002] = FakeDriver::Host::mute;
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto c = dial("amqp://guest:guest@fake:5002,fake:5001");
  driver.advance(9999ms);
  EXPECT_EQ(ready.count, 0);
  driver.advance(1ms);  // the handshake timeout (10 s) on the first host
  EXPECT_EQ(ready.count, 1);
  EXPECT_EQ(ready.last, "ok");
  EXPECT_EQ(c->endpoint().port, 5001);
}

// A refused login is the same on every host: the dial ends there.
TEST_F(ConnectionTest, a_refused_login_ends_the_dial_at_once) {
  driver.hosts[5002] = FakeDriver::Host::refuse_login;
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto c = dial("amqp://guest:guest@fake:5002,fake:5001");
  driver.advance(60s);
  EXPECT_EQ(ready.count, 1);
  EXPECT_EQ(ready.last.rfind("access refused (403)", 0), 0u) << ready.last;
  EXPECT_EQ(driver.dials, 1);
}

// Finding 11: the connect timeout defaults to the method timeout, so one setting bounds
// every wait.
TEST_F(ConnectionTest, the_connect_timeout_defaults_to_the_method_timeout) {
  driver.hosts[5001] = FakeDriver::Host::black_hole;
  client::ClientOptions options;
  options.engine.request_timeout = 3000ms;
  auto c = dial("amqp://guest:guest@fake:5001", options);
  driver.advance(2999ms);
  EXPECT_EQ(ready.count, 0);
  driver.advance(1ms);
  EXPECT_EQ(ready.count, 1);
  EXPECT_EQ(ready.last, "timed out: connect fake:5001: no connection within 3000 ms");
}

// Finding 11: a channel's timeout, and a publish's own, in place of the connection's.
TEST_F(ConnectionTest, a_publish_times_out_at_its_own_or_its_channels_deadline) {
  driver.hosts[5001] = FakeDriver::Host::broker_holding_confirms;
  auto c = dial("amqp://guest:guest@fake:5001");
  driver.run();
  ASSERT_EQ(ready.last, "ok");
  auto ch = channel(*c);
  ch.confirm_select(nullptr);
  driver.run();
  ASSERT_TRUE(ch.set_timeout(3s).ok());
  std::vector<std::string> outcomes;
  auto record = [&](std::string name) {
    return [&outcomes, name](Result<engine::PublishOutcome> r) {
      auto [o, e] = split(std::move(r));
      outcomes.push_back(name + " " + (o == engine::PublishOutcome::timed_out ? "timed out: " + e.detail : "other"));
    };
  };
  ch.publish({.routing_key = "q"}, text("x"), record("channel's"));
  ch.publish({.routing_key = "q", .timeout = 1s}, text("x"), record("own"));
  driver.advance(1s);
  EXPECT_EQ(outcomes, (std::vector<std::string>{"own timed out: no confirm within 1000 ms; the broker may or may not have the message"}));
  driver.advance(2s);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1], "channel's timed out: no confirm within 3000 ms; the broker may or may not have the message");
}

}  // namespace
}  // namespace warren::test

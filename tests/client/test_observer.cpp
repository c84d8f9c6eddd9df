// Issue 24, events: a connection's life reaches its observer (ClientOptions::observer) as one
// record per event, in order, with its level, the channel it concerns and its cause; the
// application's own hooks still run beside it; nothing in a record is a secret. On the fake
// driver, whose virtual clock shows a missed heartbeat without waiting for one.
#include <gtest/gtest.h>

#include "client/fake_driver.hpp"
#include "client/open_channel.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {
namespace {

struct Recorder : client::Observer {
  struct Line {
    std::string name, level, connection, subject, cause;
    engine::ChannelId channel = 0;
  };
  std::vector<Line> lines;
  void on_record(const client::Record& r) override {
    lines.push_back({std::string(r.name), client::to_string(r.level), std::string(r.connection), std::string(r.subject),
                     r.cause ? r.cause->to_string() : "", r.channel});
  }
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& l : lines) out.push_back(l.name);
    return out;
  }
  [[nodiscard]] const Line& last(std::string_view name) const {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->name == name) return *it;
    throw std::runtime_error("no record " + std::string(name));
  }
};

class ObserverTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<Recorder> recorder = std::make_shared<Recorder>();
  std::optional<std::string> ready;

  std::shared_ptr<client::Connection> dial(const std::string& url_text) {
    auto url = client::parse_url(url_text);
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    auto c = client::Connection::connect(driver, *url, {.observer = recorder},
                                         [this](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
    driver.run();
    return c;
  }
  client::Channel channel(client::Connection& c) { return open_channel_now(driver, c); }
};

TEST_F(ObserverTest, a_connections_life_reaches_its_observer_one_record_per_event_in_order) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
  auto c = dial("amqp://guest:guest@fake:5001");
  ASSERT_EQ(ready, "ok");
  bool application_told = false;
  c->on_channel_closed = [&](engine::ChannelId, const Error&) { application_told = true; };
  auto& broker = driver.last_broker();

  auto refused = channel(*c);
  broker.close_channel(refused.id(), 406, "PRECONDITION_FAILED - inequivalent arg 'durable'");
  driver.run();
  EXPECT_TRUE(application_told) << "the observer takes no hook away from the application";

  broker.set_blocked(true);
  driver.run();
  broker.set_blocked(false);
  driver.run();

  auto ch = channel(*c);
  ch.confirm_select(nullptr);
  driver.run();
  broker.nack_next_publish();
  ch.publish({.routing_key = "q"}, "nacked", nullptr);
  driver.run();
  ch.publish({.routing_key = "nowhere", .mandatory = true}, "returned", nullptr);
  driver.run();

  world.queues["q"];
  client::Consumer consumer;
  ch.consume({.queue = "q", .tag = "ctag"}, [](const client::Delivery&) {}, [&](Result<client::Consumer> r) {
    if (r) consumer = std::move(*r);
  });
  driver.run();
  ASSERT_TRUE(consumer.active());
  broker.cancel_consumer_tag("ctag");
  driver.run();

  c->close(nullptr);
  driver.run();

  EXPECT_EQ(recorder->names(),
            (std::vector<std::string>{"connection.connecting", "connection.connected", "channel.closed",
                                      "connection.blocked", "connection.unblocked", "publish.nacked",
                                      "publish.returned", "consumer.cancelled", "connection.closed"}));
  for (const auto& l : recorder->lines) EXPECT_EQ(l.connection, "fake:5001") << l.name;
  const auto& closed = recorder->last("channel.closed");
  EXPECT_EQ(closed.level, "warning");
  EXPECT_EQ(closed.channel, refused.id());
  EXPECT_NE(closed.cause.find("406"), std::string::npos) << closed.cause;
  EXPECT_NE(closed.cause.find("inequivalent arg 'durable'"), std::string::npos) << closed.cause;
  EXPECT_EQ(recorder->last("connection.blocked").subject, "low on memory");
  EXPECT_EQ(recorder->last("connection.blocked").level, "warning");
  EXPECT_EQ(recorder->last("publish.nacked").channel, ch.id());
  const auto& returned = recorder->last("publish.returned");
  EXPECT_EQ(returned.subject, "nowhere");
  EXPECT_NE(returned.cause.find("NO_ROUTE (the default exchange, routing key \"nowhere\")"), std::string::npos)
      << returned.cause;
  EXPECT_EQ(recorder->last("consumer.cancelled").subject, "ctag");
  EXPECT_EQ(recorder->last("connection.closed").level, "info") << "the application's own close is routine";
}

TEST_F(ObserverTest, a_broker_gone_silent_is_a_missed_heartbeat_then_the_close) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.broker_configs[5001] = FakeBroker::Config{.world = &world, .heartbeat_s = 1};
  auto c = dial("amqp://guest:guest@fake:5001?heartbeat=1");
  ASSERT_EQ(ready, "ok");
  driver.last_broker().go_silent();
  for (int i = 0; i < 4 && c->is_open(); ++i) {
    driver.advance(std::chrono::seconds(1));
    driver.run();
  }
  ASSERT_FALSE(c->is_open());
  const auto names = recorder->names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[names.size() - 2], "connection.heartbeat_missed");
  EXPECT_EQ(names.back(), "connection.closed");
  EXPECT_EQ(recorder->last("connection.heartbeat_missed").level, "error");
  EXPECT_NE(recorder->last("connection.heartbeat_missed").cause.find("no traffic from the broker"), std::string::npos);
  EXPECT_EQ(recorder->last("connection.closed").level, "error");
}

TEST_F(ObserverTest, no_record_carries_the_urls_user_or_password) {
  // The first host refuses the TCP connection, the second the login.
  driver.hosts[5002] = FakeDriver::Host::refuse_login;
  auto c = dial("amqp://app-user:s3cret-pass@fake:5001,fake:5002/prod");
  ASSERT_TRUE(ready.has_value());
  EXPECT_NE(*ready, "ok");
  EXPECT_EQ(recorder->names(), (std::vector<std::string>{"connection.connecting", "connection.dial_failed",
                                                         "connection.connecting", "connection.failed"}));
  EXPECT_EQ(recorder->lines[0].connection, "fake:5001");
  EXPECT_EQ(recorder->lines[2].connection, "fake:5002");
  EXPECT_NE(recorder->last("connection.failed").cause.find("403"), std::string::npos);
  for (const auto& l : recorder->lines) {
    for (const std::string& field : {l.name, l.level, l.connection, l.subject, l.cause}) {
      EXPECT_EQ(field.find("s3cret-pass"), std::string::npos) << l.name << ": " << field;
      EXPECT_EQ(field.find("app-user"), std::string::npos) << l.name << ": " << field;
    }
  }
}

}  // namespace
}  // namespace warren::test

// Issue 24, metrics: what a connection counts (ClientOptions::metrics) under OpenTelemetry's
// names, read as a snapshot and rendered in Prometheus's text format. On the fake driver,
// whose virtual clock gives a confirm, a callback and a block exact durations.
#include <gtest/gtest.h>

#include "client/fake_driver.hpp"
#include "client/open_channel.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/metrics.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using client::MetricLabels;

TEST(MetricsText, prometheus_text_names_units_labels_and_microsecond_buckets) {
  client::Metrics m;
  m.counter({"messaging.client.sent.messages", "{message}", "Messages sent"},
            {{"messaging.destination.name", "or\"ders"}})
      .add(3);
  m.gauge({"warren.connections", "{connection}", "Connections open"}).add(2);
  auto& h = m.histogram({"messaging.client.operation.duration", "s", "Publish to confirm"});
  h.record(200us);
  h.record(3ms, 2);
  m.counter({"warren.connection.io", "By", "Bytes"}, {{"network.io.direction", "receive"}}).add(10);
  m.counter({"messaging.client.sent.messages", "{message}", "Messages sent"}, {{"messaging.destination.name", ""}}).add();

  const std::string bucket = "messaging_client_operation_duration_seconds_bucket";
  EXPECT_EQ(m.prometheus_text(),
            "# HELP messaging_client_sent_messages_total Messages sent\n"
            "# TYPE messaging_client_sent_messages_total counter\n"
            "messaging_client_sent_messages_total{messaging_destination_name=\"or\\\"ders\"} 3\n"
            "messaging_client_sent_messages_total{messaging_destination_name=\"\"} 1\n"
            "# HELP warren_connections Connections open\n"
            "# TYPE warren_connections gauge\n"
            "warren_connections 2\n"
            "# HELP messaging_client_operation_duration_seconds Publish to confirm\n"
            "# TYPE messaging_client_operation_duration_seconds histogram\n" +
                bucket + "{le=\"5e-05\"} 0\n" + bucket + "{le=\"0.0001\"} 0\n" + bucket + "{le=\"0.00025\"} 1\n" +
                bucket + "{le=\"0.0005\"} 1\n" + bucket + "{le=\"0.001\"} 1\n" + bucket + "{le=\"0.0025\"} 1\n" +
                bucket + "{le=\"0.005\"} 3\n" + bucket + "{le=\"0.01\"} 3\n" + bucket + "{le=\"0.025\"} 3\n" +
                bucket + "{le=\"0.05\"} 3\n" + bucket + "{le=\"0.1\"} 3\n" + bucket + "{le=\"0.25\"} 3\n" + bucket +
                "{le=\"0.5\"} 3\n" + bucket + "{le=\"1\"} 3\n" + bucket + "{le=\"2.5\"} 3\n" + bucket +
                "{le=\"5\"} 3\n" + bucket + "{le=\"10\"} 3\n" + bucket + "{le=\"+Inf\"} 3\n" +
                "messaging_client_operation_duration_seconds_sum 0.0062\n"
                "messaging_client_operation_duration_seconds_count 3\n"
                "# HELP warren_connection_io_bytes_total Bytes\n"
                "# TYPE warren_connection_io_bytes_total counter\n"
                "warren_connection_io_bytes_total{network_io_direction=\"receive\"} 10\n");
}

// The format's HELP escapes: a backslash and a line feed (an application's own description may
// hold either); a line feed left raw would end the line and break the exposition.
TEST(MetricsText, help_escapes_backslash_and_line_feed) {
  client::Metrics m;
  m.counter({"app.jobs", "{job}", "Jobs from C:\\queue\nby worker"}).add();
  EXPECT_EQ(m.prometheus_text(),
            "# HELP app_jobs_total Jobs from C:\\\\queue\\nby worker\n"
            "# TYPE app_jobs_total counter\n"
            "app_jobs_total 1\n");
}

TEST(MetricsText, one_name_is_one_kind) {
  client::Metrics m;
  (void)m.counter({"a.b", "{x}", ""});
  EXPECT_THROW((void)m.gauge({"a.b", "{x}", ""}), std::logic_error);
  EXPECT_THROW((void)m.counter({"a.b", "s", ""}, {{"k", "v"}}), std::logic_error);
  EXPECT_EQ(&m.counter({"a.b", "{x}", ""}), &m.counter({"a.b", "{x}", ""})) << "one series per name and labels";
}

class MetricsTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<client::Metrics> metrics = std::make_shared<client::Metrics>();

  std::shared_ptr<client::Connection> dial() {
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    bool ready = false;
    auto c = client::Connection::connect(driver, *url, {.metrics = metrics}, [&](Result<void> r) { ready = r.ok(); });
    driver.run();
    if (!ready) throw std::runtime_error("no connection");
    return c;
  }
  double value(std::string_view name, const MetricLabels& labels = {}) const { return metrics->snapshot().total(name, labels); }
  // A histogram's count of observations at or under `le` seconds (its cumulative bucket).
  std::uint64_t at_or_under(std::string_view name, const MetricLabels& labels, double le) const {
    const auto snap = metrics->snapshot();
    const auto* p = snap.find(name, labels);
    if (!p) throw std::runtime_error("no series " + std::string(name));
    for (std::size_t i = 0; i < client::Histogram::bounds_ns.size(); ++i)
      if (static_cast<double>(client::Histogram::bounds_ns[i]) / 1e9 >= le - 1e-12) return p->cumulative[i];
    return p->cumulative.back();
  }
  std::uint64_t observations(std::string_view name, const MetricLabels& labels = {}) const {
    const auto snap = metrics->snapshot();
    const auto* p = snap.find(name, labels);
    return p ? p->cumulative.back() : 0;
  }
  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
  }
};

const MetricLabels default_exchange{{"messaging.destination.name", ""}, {"messaging.system", "rabbitmq"}};
const MetricLabels queue_q{{"messaging.destination.name", "q"}};

TEST_F(MetricsTest, publishes_count_by_exchange_and_outcome_and_their_confirm_time_in_microsecond_buckets) {
  auto c = dial();
  world.queues["q"];
  auto ch = open_channel_now(driver, *c);
  ch.confirm_select(nullptr);
  driver.run();
  auto& broker = driver.last_broker();
  broker.hold_confirms(true);
  ch.publish({.routing_key = "q"}, "one", nullptr);
  ch.publish({.routing_key = "q"}, "two", nullptr);
  driver.run();
  EXPECT_EQ(value("messaging.client.sent.messages", default_exchange), 2);
  EXPECT_EQ(value("warren.publish.in_flight"), 2);
  EXPECT_EQ(value("warren.publish.settled"), 0);

  driver.advance(2ms);
  broker.hold_confirms(false);
  driver.run();
  EXPECT_EQ(value("warren.publish.in_flight"), 0);
  EXPECT_EQ(value("warren.publish.settled", {{"outcome", "confirmed"}}), 2);
  const MetricLabels publish{{"messaging.operation.name", "publish"}};
  EXPECT_EQ(observations("messaging.client.operation.duration", publish), 2u);
  EXPECT_EQ(at_or_under("messaging.client.operation.duration", publish, 0.001), 0u) << "2 ms is not under 1 ms";
  EXPECT_EQ(at_or_under("messaging.client.operation.duration", publish, 0.0025), 2u);

  broker.nack_next_publish();
  ch.publish({.routing_key = "q"}, "nacked", nullptr);
  ch.publish({.exchange = "amq.direct", .routing_key = "nowhere", .mandatory = true}, "returned", nullptr);
  driver.run();
  EXPECT_EQ(value("warren.publish.settled", {{"outcome", "nacked"}}), 1);
  EXPECT_EQ(value("warren.publish.settled", {{"outcome", "returned"}}), 1);
  EXPECT_EQ(value("messaging.client.sent.messages", {{"messaging.destination.name", "amq.direct"}}), 1);
  EXPECT_EQ(value("messaging.client.sent.messages"), 4);

  // A publish the connection refused before it was queued counts with its error.type.
  const std::string too_long(256, 'k');  // a short string holds 255 bytes
  std::optional<Error> refused;
  ch.publish({.routing_key = too_long}, "refused", [&](Result<engine::PublishOutcome> r) {
    if (!r) refused = r.error();
  });
  driver.run();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(value("messaging.client.sent.messages", {{"error.type", "string_too_long"}}), 1)
      << refused->to_string() << "\n" << metrics->prometheus_text();
  EXPECT_EQ(value("warren.publish.in_flight"), 0);
}

// Publish ids are numbered per connection: one channel's multiple ack covers its own
// publishes only, not the ids another channel's took between them.
TEST_F(MetricsTest, a_range_settled_on_one_channel_counts_its_own_publishes_only) {
  auto c = dial();
  world.queues["q"];
  auto a = open_channel_now(driver, *c);
  auto b = open_channel_now(driver, *c);
  for (auto* ch : {&a, &b}) ch->confirm_select(nullptr);
  driver.run();
  auto& broker = driver.last_broker();
  broker.hold_confirms(true);
  a.publish({.routing_key = "q"}, "a1", nullptr);
  b.publish({.routing_key = "q"}, "b1", nullptr);
  a.publish({.routing_key = "q"}, "a2", nullptr);
  driver.run();
  EXPECT_EQ(value("warren.publish.in_flight"), 3);
  broker.release_confirms_as_multiple();  // channel a: one ack for its ids 1 and 3
  driver.run();
  EXPECT_EQ(value("warren.publish.settled", {{"outcome", "confirmed"}}), 3);
  EXPECT_EQ(value("warren.publish.in_flight"), 0);
  EXPECT_EQ(observations("messaging.client.operation.duration"), 3u);
}

TEST_F(MetricsTest, deliveries_count_by_queue_with_the_callbacks_time_and_each_settle) {
  auto c = dial();
  world.queues["q"];
  auto ch = open_channel_now(driver, *c);
  int handled = 0;
  client::Consumer consumer;
  ch.consume({.queue = "q", .tag = "ctag"},
             [&](const client::Delivery& d) {
               driver.skip(3ms);  // the application's work
               (void)(++handled == 1 ? d.ack() : d.reject({.requeue = false}));
             },
             [&](Result<client::Consumer> r) {
               if (r) consumer = std::move(*r);
             });
  driver.run();
  ASSERT_TRUE(consumer.active());
  ch.publish({.routing_key = "q"}, "one", nullptr);
  ch.publish({.routing_key = "q"}, "two", nullptr);
  driver.run();
  ASSERT_EQ(handled, 2);
  EXPECT_EQ(value("messaging.client.consumed.messages", {{"messaging.destination.name", "q"},
                                                         {"messaging.operation.name", "deliver"},
                                                         {"messaging.system", "rabbitmq"}}),
            2);
  EXPECT_EQ(observations("messaging.process.duration", queue_q), 2u);
  EXPECT_EQ(at_or_under("messaging.process.duration", queue_q, 0.0025), 0u);
  EXPECT_EQ(at_or_under("messaging.process.duration", queue_q, 0.005), 2u);
  EXPECT_EQ(value("warren.delivery.settled", {{"messaging.operation.name", "ack"}}), 1);
  EXPECT_EQ(value("warren.delivery.settled", {{"messaging.operation.name", "reject"}, {"requeue", "false"}}), 1);

  // basic.get counts as a consume too, under its own operation name.
  consumer.cancel(nullptr);
  driver.run();
  ch.publish({.routing_key = "q"}, "three", nullptr);
  driver.run();
  std::optional<client::Message> got;
  ch.get({.queue = "q", .auto_ack = true}, [&](Result<std::optional<client::Message>> r) {
    if (r) got = std::move(*r);
  });
  driver.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(value("messaging.client.consumed.messages", {{"messaging.operation.name", "get"}}), 1);
  EXPECT_EQ(value("messaging.client.consumed.messages"), 3);
}

// Queues the broker named (amq.gen-…: exclusive, per connection, new at every recovery) share
// one series, flagged anonymous with a template: as destination names they would add a series
// per queue that outlives it, without bound in a long-running service.
TEST_F(MetricsTest, queues_the_broker_named_share_one_anonymous_series) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  std::vector<client::Consumer> consumers;
  for (const std::string q : {"amq.gen-1", "amq.gen-2", "named"}) {
    world.queues[q];
    ch.consume({.queue = q}, [](const client::Delivery& d) { (void)d.ack(); },
               [&](Result<client::Consumer> r) {
                 if (r) consumers.push_back(std::move(*r));
               });
    driver.run();
    ch.publish({.routing_key = q}, "m", nullptr);
    driver.run();
  }
  ASSERT_EQ(consumers.size(), 3u);
  const auto snap = metrics->snapshot();
  std::vector<MetricLabels> deliver_series;
  for (const auto& p : snap.points)
    if (p.name == "messaging.client.consumed.messages") deliver_series.push_back(p.labels);
  ASSERT_EQ(deliver_series.size(), 2u) << "one series for the broker-named queues, one for \"named\"";
  const MetricLabels anonymous{{"messaging.destination.anonymous", "true"},
                               {"messaging.destination.template", "amq.gen-*"},
                               {"messaging.operation.name", "deliver"}};
  EXPECT_EQ(snap.total("messaging.client.consumed.messages", anonymous), 2);
  EXPECT_EQ(snap.total("messaging.client.consumed.messages", {{"messaging.destination.name", "named"}}), 1);
  EXPECT_EQ(snap.find("messaging.client.consumed.messages", {{"messaging.destination.name", "amq.gen-1"}}), nullptr);
  EXPECT_EQ(snap.find("messaging.process.duration", {{"messaging.destination.name", "amq.gen-2"}}), nullptr);
  const auto* process = snap.find("messaging.process.duration", {{"messaging.destination.anonymous", "true"}});
  ASSERT_NE(process, nullptr);
  EXPECT_EQ(process->cumulative.back(), 2u) << "both broker-named queues' callbacks, in one histogram";
}

TEST_F(MetricsTest, gauges_follow_connections_channels_and_blocks_and_a_dropped_connection_leaves_none) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  EXPECT_EQ(value("warren.connections"), 1);
  EXPECT_EQ(value("warren.channels"), 1);
  auto other = dial();
  auto other_ch = open_channel_now(driver, *other);
  (void)open_channel_now(driver, *other);
  EXPECT_EQ(value("warren.connections"), 2) << "one Metrics serves both";
  EXPECT_EQ(value("warren.channels"), 3);

  auto& broker = driver.last_broker();
  broker.set_blocked(true);
  driver.run();
  EXPECT_EQ(value("warren.connection.blocked"), 1);
  driver.advance(50ms);
  broker.set_blocked(false);
  driver.run();
  EXPECT_EQ(value("warren.connection.blocked"), 0);
  const auto snap = metrics->snapshot();
  const auto* blocked = snap.find("warren.connection.blocked.duration");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->cumulative.back(), 1u);
  EXPECT_DOUBLE_EQ(blocked->value, 0.05);

  // Blocked again, holding a publish, then dropped without a close: its share goes with it.
  other_ch.confirm_select(nullptr);
  driver.run();
  broker.set_blocked(true);
  driver.run();
  other_ch.publish({.routing_key = "q"}, "held", nullptr);
  driver.run();
  EXPECT_EQ(value("warren.publish.in_flight"), 1);
  other.reset();
  other_ch = {};
  driver.run();
  EXPECT_EQ(value("warren.connections"), 1);
  EXPECT_EQ(value("warren.channels"), 1);
  EXPECT_EQ(value("warren.connection.blocked"), 0);
  EXPECT_EQ(value("warren.publish.in_flight"), 0);

  EXPECT_GT(value("warren.connection.io", {{"network.io.direction", "receive"}}), 0);
  EXPECT_GT(value("warren.connection.io", {{"network.io.direction", "transmit"}}), 0);
  c->close(nullptr);
  driver.run();
  EXPECT_EQ(value("warren.connections"), 0);
  EXPECT_EQ(value("warren.channels"), 0);
}

}  // namespace
}  // namespace warren::test

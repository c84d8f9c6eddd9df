// Limits the broker enforces with a bare 406, named (issue 38), against the real broker on both
// drivers: a delivery held past consumer_timeout closes its channel with errc::ack_timeout and a
// record naming the consumer and the queue, and a Session's recovering consumer subscribes again
// and gets the message flagged redelivered; a message over the broker's max_message_size closes
// the channel with errc::message_too_large, and one over max_body_bytes is refused before it is
// sent, the channel left open. The broker's limits are lowered at run time (rabbitmqctl eval,
// read by a channel when it opens) and put back after each case.
#include <gtest/gtest.h>

#include "integration/client_fixture.hpp"
#include "support/record_lines.hpp"
#include "warren/client/session.hpp"

namespace warren::test {
namespace {

class BrokerLimits : public ClientSuite {
 protected:
  void TearDown() override {
    // 3.10's defaults back (unset, a channel's tick timer would crash its start).
    rabbitmqctl("eval 'application:set_env(rabbit, consumer_timeout, 1800000), application:set_env(rabbit, channel_tick_interval, 60000), "
                "application:set_env(rabbit, max_message_size, 134217728).'");
    ClientSuite::TearDown();
  }
  static void lower_consumer_timeout() {
    // 1.5 s, checked every 0.5 s: a held delivery is timed out within about 2 s.
    rabbitmqctl("eval 'application:set_env(rabbit, consumer_timeout, 1500), application:set_env(rabbit, channel_tick_interval, 500).'");
  }
};

TEST_P(BrokerLimits, a_delivery_held_past_the_consumer_timeout_is_an_ack_timeout_naming_the_consumer) {
  auto records = std::make_shared<RecordLines>();
  client::ClientOptions o;
  o.observer = records;
  auto c = connect("", o);
  auto setup = open(*c);
  const std::string q = temp_queue(setup, {.durable = true, .auto_delete = true});
  ASSERT_EQ(confirm_publish(setup, {.routing_key = q}, text("held")), "written");
  lower_consumer_timeout();
  auto ch = open(*c);
  std::optional<Error> closed;
  c->on_channel_closed = [&](engine::ChannelId id, const Error& e) {
    if (id == ch.id()) closed = e;
  };
  int deliveries = 0;
  auto consumer = wait<client::Consumer>([&](auto done) {
    // Never acked; told the broker's timeout, so warned at three quarters of it first.
    ch.consume({.queue = q, .tag = "held-by-test", .ack_timeout = 1500ms}, [&](const client::Delivery&) { ++deliveries; }, done);
  });
  ASSERT_TRUE(consumer.ok()) << consumer.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return closed.has_value(); }, 15s)) << "the broker never timed the delivery out";
  EXPECT_EQ(deliveries, 1);
  EXPECT_EQ(closed->code, errc::ack_timeout) << closed->to_string();
  EXPECT_EQ(closed->reply_code, 406);
  EXPECT_FALSE(is_permanent(*closed));
  const std::string record = records->find("consumer.ack_timeout");
  EXPECT_NE(record.find("consumer held-by-test on queue " + q + ", delivery tag 1 held longest"), std::string::npos) << record;
  const std::string warned = records->find("consumer.ack_late");
  EXPECT_NE(warned.find("consumer held-by-test on queue " + q + ": delivery tag 1 held for"), std::string::npos) << warned;
  std::size_t warned_at = 0, closed_at = 0;
  for (std::size_t i = 0; i < records->lines.size(); ++i) {
    if (records->lines[i].rfind("consumer.ack_late ", 0) == 0) warned_at = i;
    if (records->lines[i].rfind("consumer.ack_timeout ", 0) == 0) closed_at = i;
  }
  EXPECT_LT(warned_at, closed_at) << "the warning came after the close";
  close(*c);
}

TEST_P(BrokerLimits, a_sessions_consumer_subscribes_again_after_an_ack_timeout_and_gets_the_message_redelivered) {
  lower_consumer_timeout();
  client::SessionOptions so;
  so.backoff = client::Backoff{100ms, 2.0, 500ms};
  auto u = client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f");
  auto session = client::Session::start(loop.driver(), *u, so);
  auto setup = open();
  const std::string q = temp_queue(setup, {.durable = true});
  std::vector<bool> redelivered;
  bool hold = true;  // the first delivery is held past the timeout, the next acked
  std::vector<client::Consumer> consumers;
  auto rc = session->channel([&](client::RecoveringChannel& r, client::Callback<void> done) {
    r.channel().consume({.queue = q}, [&](const client::Delivery& d) {
      redelivered.push_back(d.redelivered());
      if (!hold) (void)d.ack();
      hold = false;
    }, [&, done](Result<client::Consumer> c) {
      if (!c) return done(c.error());
      consumers.push_back(std::move(*c));  // a dropped Consumer handle cancels its subscription
      done({});
    });
  });
  ASSERT_TRUE(loop.run_until([&] { return rc->ready(); }));
  ASSERT_EQ(confirm_publish(setup, {.routing_key = q}, text("m")), "written");
  ASSERT_TRUE(loop.run_until([&] { return redelivered.size() == 2; }, 20s)) << redelivered.size();
  EXPECT_EQ(redelivered, (std::vector<bool>{false, true}));
  ASSERT_TRUE(loop.run_until([&] { return rc->ready(); }));
  std::optional<Result<void>> closed;
  session->close([&](Result<void> r) { closed.emplace(std::move(r)); });
  loop.run_until([&] { return closed.has_value(); });
  (void)wait<std::uint32_t>([&](auto done) { setup.queue_delete({.queue = q}, done); });
}

TEST_P(BrokerLimits, a_message_over_the_brokers_size_closes_the_channel_as_message_too_large) {
  rabbitmqctl("eval 'application:set_env(rabbit, max_message_size, 4096).'");
  auto ch = open();
  ASSERT_TRUE(wait<void>([&](auto done) { ch.confirm_select(done); }).ok());
  const std::string big(5000, 'b');
  auto r = wait<engine::PublishOutcome>([&](auto done) { ch.publish({.routing_key = "nowhere"}, text(big), done); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::message_too_large) << r.error().to_string();
  EXPECT_NE(r.error().detail.find("larger than configured max size 4096"), std::string::npos) << r.error().to_string();
}

TEST_P(BrokerLimits, a_message_over_max_body_bytes_is_refused_before_it_is_sent_and_the_channel_stays_open) {
  client::ClientOptions o;
  o.engine.max_body_bytes = 4096;
  auto c = connect("", o);
  auto ch = open(*c);
  ASSERT_TRUE(wait<void>([&](auto done) { ch.confirm_select(done); }).ok());
  const std::string big(5000, 'b');
  auto r = wait<engine::PublishOutcome>([&](auto done) { ch.publish({.routing_key = "nowhere"}, text(big), done); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::message_too_large);
  EXPECT_EQ(r.error().detail, "a message body of 5000 bytes is over max_body_bytes 4096 (not sent; the channel stays open)");
  EXPECT_EQ(r.error().sent, Sent::no);
  EXPECT_EQ(confirm_publish(ch, {.routing_key = "nowhere"}, text("fits")), "confirmed");
  close(*c);
}

INSTANTIATE_TEST_SUITE_P(Drivers, BrokerLimits, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

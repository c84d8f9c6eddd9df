// The engine against a real RabbitMQ started by the test command (RMQ_PORT, RMQ_CTL): the
// handshake with each mechanism the broker offers over TCP, a refused login, the default
// prefetch as the broker sees it, confirms with a return and a nack, and heartbeats keeping
// an idle connection alive.
#include <gtest/gtest.h>

#include <thread>

#include "engine_pump.hpp"

namespace warren::test {
namespace {

using namespace warren::wire;
using namespace std::chrono_literals;

std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span{s.data(), s.size()}); }

engine::ChannelId open_channel(EnginePump& p) {
  auto ch = p.conn.open_channel(p.now());
  EXPECT_TRUE(ch.ok());
  EXPECT_EQ(p.take("channel-opened"), "channel-opened(ch" + std::to_string(*ch) + ")");
  return *ch;
}

TEST(EngineAgainstBroker, connects_with_plain_and_with_amqplain) {
  for (auto mechanism : {engine::Mechanism::plain, engine::Mechanism::amqplain}) {
    engine::ConnectionOptions o;
    o.mechanism = mechanism;
    o.connection_name = "warren engine test";
    EnginePump p(o);
    auto connected = p.take("connected");
    EXPECT_EQ(connected, "connected(channel_max=2047, frame_max=131072, heartbeat=60)");
    ASSERT_TRUE(p.conn.close(p.now()).ok());
    EXPECT_EQ(p.take("closed"), "closed(connection closed 200: closed by the application)");
    EXPECT_TRUE(p.conn.finished());
  }
}

TEST(EngineAgainstBroker, a_wrong_password_is_403_at_once) {
  engine::ConnectionOptions o;
  o.password = "wrong";
  EnginePump p(o);
  const auto started = std::chrono::steady_clock::now();
  auto closed = p.take("closed");
  EXPECT_EQ(closed.rfind("closed(access refused 403: ACCESS_REFUSED", 0), 0u) << closed;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // not the 3 s socket drop
  EXPECT_EQ(closed.find("wrong"), std::string::npos);
}

TEST(EngineAgainstBroker, a_subscription_without_prefetch_has_250_on_the_broker) {
  EnginePump p({});
  p.take("connected");
  auto ch = open_channel(p);
  auto declared = p.conn.queue_declare(ch, QueueDeclare{"warren-engine-prefetch", false, false, false, true}, p.now());
  ASSERT_TRUE(declared.ok());
  p.take("done(");
  auto consume = p.conn.basic_consume(ch, BasicConsume{"warren-engine-prefetch", "prefetch-probe"}, std::nullopt, p.now());
  ASSERT_TRUE(consume.ok());
  EXPECT_EQ(p.take("done("), "done(ch1 #" + std::to_string(*consume) +
                                 " basic.consume-ok(consumer_tag=\"prefetch-probe\"))");
  auto consumers = rabbitmqctl("list_consumers queue_name consumer_tag prefetch_count");
  EXPECT_NE(consumers.find("warren-engine-prefetch\tprefetch-probe\t250"), std::string::npos) << consumers;
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

TEST(EngineAgainstBroker, publish_consume_ack_with_confirms_return_and_nack) {
  EnginePump p({});
  p.take("connected");
  auto ch = open_channel(p);
  ASSERT_TRUE(p.conn.confirm_select(ch, p.now()).ok());
  FieldTable args;
  args.set("x-max-length", std::int32_t{1}).set("x-overflow", std::string("reject-publish"));
  ASSERT_TRUE(p.conn.queue_declare(ch, QueueDeclare{"warren-engine-full", false, false, true, false, false, args}, p.now()).ok());
  p.take("done(ch1 #1 confirm.select-ok");
  p.take("done(ch1 #2 queue.declare-ok");

  auto kept = p.conn.publish(ch, BasicPublish{"", "warren-engine-full"}, {}, text("kept"), p.now());
  auto refused = p.conn.publish(ch, BasicPublish{"", "warren-engine-full"}, {}, text("refused"), p.now());
  auto unroutable = p.conn.publish(ch, BasicPublish{"amq.direct", "nobody-binds-this", true, false}, {}, text("lost"), p.now());
  ASSERT_TRUE(kept.ok() && refused.ok() && unroutable.ok());
  EXPECT_EQ(p.take("publish(ch1 p" + std::to_string(*kept)), "publish(ch1 p" + std::to_string(*kept) + " confirmed)");
  EXPECT_EQ(p.take("publish(ch1 p" + std::to_string(*refused)),
            "publish(ch1 p" + std::to_string(*refused) + " nacked, precondition failed: the broker nacked the message)");
  EXPECT_EQ(p.take("returned("), "returned(312 \"NO_ROUTE\" ch1 exchange=\"amq.direct\" routing_key=\"nobody-binds-this\" body=\"lost\")");
  EXPECT_EQ(p.take("publish(ch1 p" + std::to_string(*unroutable)),
            "publish(ch1 p" + std::to_string(*unroutable) +
                " returned, not found 312: NO_ROUTE (exchange \"amq.direct\", routing key \"nobody-binds-this\"))");

  std::uint64_t tag = 0;
  p.on_event = [&](const engine::Event& e) {
    if (auto* d = std::get_if<engine::Delivery>(&e)) tag = d->message.delivery_tag;
  };
  ASSERT_TRUE(p.conn.basic_consume(ch, BasicConsume{"warren-engine-full", "c1"}, std::nullopt, p.now()).ok());
  auto delivery = p.take("delivery(");
  EXPECT_EQ(delivery, "delivery(ch1 tag=\"c1\" delivery_tag=1 exchange=\"\" routing_key=\"warren-engine-full\" body=\"kept\")");
  ASSERT_TRUE(p.conn.ack(ch, wire::BasicAck{.delivery_tag = tag}).ok());
  auto del = p.conn.queue_delete(ch, QueueDelete{"warren-engine-full"}, p.now());
  ASSERT_TRUE(del.ok());
  // Deleting the queue under the consumer: the broker cancels it.
  EXPECT_EQ(p.take("cancelled("), "cancelled(ch1 \"c1\" by broker)");
  const std::string done = "done(ch1 #" + std::to_string(*del) + " queue.delete-ok";
  EXPECT_EQ(p.take(done), done + "(message_count=0))");  // the ack took the message
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

// Two mandatory publishes alike in destination and size, the binding removed between them:
// RabbitMQ returns the second and acks it at once, while the first's ack waits for its queue.
// The return is the second's by its message id and body, not the first's by its age.
TEST(EngineAgainstBroker, a_return_before_an_earlier_publishs_ack_settles_its_own_publish) {
  EnginePump p({});
  p.take("connected");
  auto ch = open_channel(p);
  ASSERT_TRUE(p.conn.confirm_select(ch, p.now()).ok());
  ASSERT_TRUE(p.conn.queue_declare(ch, QueueDeclare{"warren-engine-level", false, false, true, false}, p.now()).ok());
  ASSERT_TRUE(p.conn.queue_bind(ch, QueueBind{"warren-engine-level", "amq.direct", "level"}, p.now()).ok());
  p.take("done(ch1 #1 confirm.select-ok");
  p.take("done(ch1 #2 queue.declare-ok");
  p.take("done(ch1 #3 queue.bind-ok");
  // Queued together: the broker reads them in one go.
  auto routed = p.conn.publish(ch, BasicPublish{"amq.direct", "level", true, false}, {.message_id = "p1"}, text("job:p1"), p.now());
  ASSERT_TRUE(p.conn.queue_unbind(ch, QueueUnbind{"warren-engine-level", "amq.direct", "level"}, p.now()).ok());
  auto lost = p.conn.publish(ch, BasicPublish{"amq.direct", "level", true, false}, {.message_id = "p2"}, text("job:p2"), p.now());
  ASSERT_TRUE(routed.ok() && lost.ok());
  EXPECT_EQ(p.take("publish(ch1 p" + std::to_string(*lost)),
            "publish(ch1 p" + std::to_string(*lost) + " returned, not found 312: NO_ROUTE (exchange \"amq.direct\", routing key \"level\"))");
  EXPECT_EQ(p.take("publish(ch1 p" + std::to_string(*routed)), "publish(ch1 p" + std::to_string(*routed) + " confirmed)");
  auto got = p.conn.basic_get(ch, BasicGet{"warren-engine-level", true}, p.now());
  ASSERT_TRUE(got.ok());
  EXPECT_NE(p.take("get-ok(").find("body=\"job:p1\""), std::string::npos) << "the first is in the queue";
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

TEST(EngineAgainstBroker, heartbeats_keep_an_idle_connection_alive_past_three_intervals) {
  engine::ConnectionOptions o;
  o.heartbeat_s = 1;
  EnginePump p(o);
  EXPECT_EQ(p.take("connected"), "connected(channel_max=2047, frame_max=131072, heartbeat=1)");
  EXPECT_FALSE(p.run_until([] { return false; }, 3500ms));  // idle for 3.5 intervals
  EXPECT_TRUE(p.conn.is_open()) << (p.conn.error() ? p.conn.error()->to_string() : "");
  auto ch = open_channel(p);
  EXPECT_EQ(ch, 1);
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

TEST(EngineAgainstBroker, a_channel_error_closes_only_its_channel) {
  EnginePump p({});
  p.take("connected");
  auto ch = open_channel(p);
  ASSERT_TRUE(p.conn.queue_declare(ch, QueueDeclare{"warren-no-such-queue", true}, p.now()).ok());
  auto failed = p.take("failed(");
  EXPECT_NE(failed.find("not found 404: NOT_FOUND - no queue 'warren-no-such-queue'"), std::string::npos) << failed;
  auto closed = p.take("channel-closed(");
  EXPECT_NE(closed.find("not found 404"), std::string::npos) << closed;
  EXPECT_TRUE(p.conn.is_open());
  open_channel(p);
  ASSERT_TRUE(p.conn.close(p.now()).ok());
  p.take("closed");
}

}  // namespace
}  // namespace warren::test

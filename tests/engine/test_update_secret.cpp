// connection.update-secret (RabbitMQ's extension, class 10 methods 70/71) and the limits a
// broker enforces by closing a channel with a 406 whose text says which (ack timeout, message
// size): what the engine sends, how answers pair on channel 0, what each failure is called.
#include "scripted_broker.hpp"
#include "warren/engine/negotiate.hpp"

namespace warren::test {
namespace {

using namespace wire;
using engine::close_error;

TEST(UpdateSecret, is_sent_on_channel_0_with_the_secret_hidden_and_settles_with_its_ok) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    auto r = b.conn.update_secret("a-fresh-token", "refresh", b.now);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    b.expect_sent("ch0 connection.update-secret(new_secret=<hidden>, reason=\"refresh\")");
    b.expect_no_event();
    b.send(0, ConnectionUpdateSecretOk{});
    b.expect_event("done(ch0 #" + std::to_string(*r) + " connection.update-secret-ok())");
    EXPECT_TRUE(b.conn.is_open());
  });
}

TEST(UpdateSecret, answers_pair_in_order_and_channels_go_on_meanwhile) {
  ScriptedBroker b;
  b.connect();
  const auto ch = b.open_channel();
  auto first = b.conn.update_secret("t1", "one", b.now);
  auto second = b.conn.update_secret("t2", "two", b.now);
  ASSERT_TRUE(first.ok() && second.ok());
  b.next_sent();
  b.next_sent();
  auto declare = b.conn.queue_declare(ch, QueueDeclare{"q"}, b.now);
  ASSERT_TRUE(declare.ok());
  b.next_sent();
  b.send(ch, QueueDeclareOk{"q", 0, 0});
  b.expect_event("done(ch1 #" + std::to_string(*declare) + " queue.declare-ok(queue=\"q\", message_count=0, consumer_count=0))");
  b.send(0, ConnectionUpdateSecretOk{});
  b.expect_event("done(ch0 #" + std::to_string(*first) + " connection.update-secret-ok())");
  b.send(0, ConnectionUpdateSecretOk{});
  b.expect_event("done(ch0 #" + std::to_string(*second) + " connection.update-secret-ok())");
}

TEST(UpdateSecret, an_ok_nobody_asked_for_is_a_protocol_error) {
  ScriptedBroker b;
  b.connect();
  b.send(0, ConnectionUpdateSecretOk{});
  auto closed = b.next_event();
  EXPECT_EQ(closed.rfind("closed(protocol error: ", 0), 0u) << closed;
  EXPECT_NE(closed.find("no update-secret was sent"), std::string::npos) << closed;
}

TEST(UpdateSecret, a_refusal_is_the_brokers_connection_close_and_fails_the_request_with_it) {
  ScriptedBroker b;
  b.connect();
  auto r = b.conn.update_secret("expired", "refresh", b.now);
  ASSERT_TRUE(r.ok());
  b.next_sent();
  b.send(0, ConnectionClose{530, "NOT_ALLOWED - New secret was refused by one of the backends", 10, 70});
  b.expect_sent("ch0 connection.close-ok()");
  auto failed = b.next_event();
  EXPECT_EQ(failed, "failed(ch0 #" + std::to_string(*r) +
                        ", connection closed 530: NOT_ALLOWED - New secret was refused by one of the backends)");
  EXPECT_EQ(b.next_event().rfind("closed(connection closed 530", 0), 0u);
}

TEST(UpdateSecret, no_answer_within_the_request_timeout_ends_the_connection) {
  ScriptedBroker b;
  b.connect(0);  // no heartbeats: only the update-secret's deadline is running
  auto r = b.conn.update_secret("t", "refresh", b.now);
  ASSERT_TRUE(r.ok());
  b.next_sent();
  ASSERT_TRUE(b.conn.poll_timeout().has_value());
  EXPECT_EQ(*b.conn.poll_timeout(), b.now + 10000ms);
  b.advance(9999ms);
  b.expect_no_event();
  b.advance(1ms);
  b.expect_event("failed(ch0 #" + std::to_string(*r) +
                 ", timed out: connection.update-secret had no answer within 10000 ms)");
  b.expect_event("closed(timed out: connection.update-secret had no answer within 10000 ms)");
  b.expect_sent("ch0 connection.close(reply_code=200, reply_text=\"connection.update-secret had no answer within 10000 ms\", "
                "class_id=0, method_id=0)");
}

TEST(UpdateSecret, a_secret_that_does_not_fit_in_a_frame_is_refused_before_anything_is_sent) {
  ScriptedBroker b;
  b.connect(60, 2047, 4096);
  auto r = b.conn.update_secret(std::string(5000, 't'), "refresh", b.now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::frame_too_large);
  EXPECT_EQ(r.error().detail, "a new secret of 5000 bytes does not fit in a frame (frame_max 4096)");
  b.expect_nothing_sent();
  EXPECT_FALSE(b.conn.poll_timeout() < b.now + 60s);  // no deadline armed for it: only the heartbeat's
  EXPECT_TRUE(b.conn.update_secret(std::string(4000, 't'), "refresh", b.now).ok());
}

TEST(UpdateSecret, is_refused_before_the_handshake_and_after_a_close) {
  ScriptedBroker b;
  auto early = b.conn.update_secret("t", "r", b.now);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, errc::protocol_error);
  b.connect();
  auto pending = b.conn.update_secret("t", "r", b.now);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(b.conn.close(b.now).ok());
  auto failed = b.next_event();
  EXPECT_EQ(failed, "failed(ch0 #" + std::to_string(*pending) + ", connection closed 200: closed by the application)");
  auto late = b.conn.update_secret("t", "r", b.now);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, errc::connection_closed);
}

TEST(BrokerLimits, an_ack_timeout_is_its_own_error_and_not_permanent) {
  ScriptedBroker b;
  b.connect();
  const auto ch = b.open_channel();
  b.send(ch, ChannelClose{406,
                          "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
                          "1800000 ms. This timeout value can be configured, see consumers doc guide to learn more",
                          0, 0});
  b.expect_sent("ch1 channel.close-ok()");
  auto closed = b.next_event();
  EXPECT_EQ(closed.rfind("channel-closed(ch1, delivery acknowledgement timed out 406: ", 0), 0u) << closed;
  const Error e = close_error(406, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1000 ms.", 0, 0, true);
  EXPECT_EQ(e.code, errc::ack_timeout);
  EXPECT_FALSE(is_permanent(e));  // a new subscription gets the message again
  EXPECT_EQ(scope(e), Scope::channel);
  // Any other 406 stays what it was.
  const Error other = close_error(406, "PRECONDITION_FAILED - inequivalent arg 'durable'", 50, 10, true);
  EXPECT_EQ(other.code, errc::precondition_failed);
  EXPECT_TRUE(is_permanent(other));
}

TEST(BrokerLimits, the_brokers_size_refusal_is_named_and_a_local_one_never_leaves) {
  const Error broker = close_error(406, "PRECONDITION_FAILED - message size 200 is larger than configured max size 100", 60, 40, true);
  EXPECT_EQ(broker.code, errc::message_too_large);
  EXPECT_TRUE(is_permanent(broker));
  EXPECT_EQ(scope(broker), Scope::channel);

  auto options = default_options();
  options.max_body_bytes = 8;
  ScriptedBroker b(std::nullopt, options);
  b.connect();
  const auto ch = b.open_channel();
  const std::string body = "nine byte";
  auto r = b.conn.publish(ch, BasicPublish{"", "q"}, {}, std::as_bytes(std::span{body.data(), body.size()}), b.now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::message_too_large);
  EXPECT_EQ(r.error().detail, "a message body of 9 bytes is over max_body_bytes 8 (not sent; the channel stays open)");
  EXPECT_EQ(r.error().sent, Sent::no);
  EXPECT_EQ(scope(r.error()), Scope::request);
  b.expect_nothing_sent();
  const std::string fits = "eight by";
  EXPECT_TRUE(b.conn.publish(ch, BasicPublish{"", "q"}, {}, std::as_bytes(std::span{fits.data(), fits.size()}), b.now).ok());
}

}  // namespace
}  // namespace warren::test

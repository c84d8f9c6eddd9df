// Channels, request/answer pairing, timeouts, the output queue, and the fatal latch.
#include "scripted_broker.hpp"

namespace warren::test {
namespace {

using namespace warren::wire;

TEST(Channels, channel_open_and_close_both_directions) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    auto ch = b.open_channel();
    auto close = b.conn.close_channel(ch, b.now);
    ASSERT_TRUE(close.ok());
    b.expect_sent("ch1 channel.close(reply_code=200, reply_text=\"\", class_id=0, method_id=0)");
    b.send(1, ChannelCloseOk{});
    b.expect_event("done(ch1 #" + std::to_string(*close) + " channel.close-ok())");
    b.expect_event("channel-closed(ch1, channel closed 200: closed by the application)");
    // The broker closes the next one.
    auto ch2 = b.open_channel();
    EXPECT_EQ(ch2, 1);  // the number was free again
    b.send(1, ChannelClose{406, "PRECONDITION_FAILED - inequivalent arg 'durable'", 50, 10});
    b.expect_sent("ch1 channel.close-ok()");
    b.expect_event("channel-closed(ch1, precondition failed 406: PRECONDITION_FAILED - inequivalent arg 'durable')");
    EXPECT_TRUE(b.conn.is_open());
  });
}

TEST(Channels, channel_numbers_are_allocated_up_to_channel_max) {
  ScriptedBroker b;
  b.connect(60, 2);
  EXPECT_EQ(b.open_channel(), 1);
  EXPECT_EQ(b.open_channel(), 2);
  auto third = b.conn.open_channel(b.now);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, errc::resource_locked);
  EXPECT_EQ(third.error().detail, "all 2 channels are in use (channel_max)");
}

// The channel table grows only to the numbers in use (a connection of one channel holds one
// slot, not channel_max's): a frame for a number far above them is refused like any frame
// for a channel that is not open, and the highest number can still be reached.
TEST(Channels, the_table_grows_with_the_numbers_in_use_and_a_frame_beyond_it_is_refused) {
  every_split([](ScriptedBroker& b) {
    b.connect(60, 2047);
    EXPECT_EQ(b.open_channel(), 1);
    b.send(2000, BasicAck{1, false});
    const std::string closed = b.next_event();
    EXPECT_EQ(closed.rfind("closed(", 0), 0u) << closed;
    EXPECT_NE(closed.find("frame for channel 2000, which is not open"), std::string::npos) << closed;
  });
  ScriptedBroker b;
  b.connect(60, 300);
  for (int n = 1; n <= 300; ++n) ASSERT_EQ(b.open_channel(), n);
  EXPECT_FALSE(b.conn.open_channel(b.now).ok());
}

TEST(Channels, a_channel_error_closes_only_its_channel_and_fails_its_requests) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.open_channel();
    auto r = b.conn.queue_declare(1, QueueDeclare{"missing", true, false, false, false, false, {}}, b.now);
    ASSERT_TRUE(r.ok());
    b.next_sent();
    b.send(1, ChannelClose{404, "NOT_FOUND - no queue 'missing' in vhost '/'", 50, 10});
    b.expect_sent("ch1 channel.close-ok()");
    b.expect_event("failed(ch1 #" + std::to_string(*r) + ", not found 404: NOT_FOUND - no queue 'missing' in vhost '/')");
    b.expect_event("channel-closed(ch1, not found 404: NOT_FOUND - no queue 'missing' in vhost '/')");
    auto other = b.conn.queue_declare(2, QueueDeclare{"q"}, b.now);
    EXPECT_TRUE(other.ok());
    b.next_sent();
    auto dead = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    ASSERT_FALSE(dead.ok());
    EXPECT_EQ(dead.error().code, errc::channel_closed);
    // It names the broker's reply, not only that the channel is not open.
    EXPECT_EQ(dead.error().reply_code, 404);
    EXPECT_EQ(dead.error().detail,
              "channel 1 was closed by the broker: not found (404): NOT_FOUND - no queue 'missing' in vhost '/'");
    // Opened again, the number forgets that cause.
    EXPECT_EQ(b.open_channel(), 1);
  });
}

// RabbitMQ 3.10's channel evaluates consumer timeouts on every tick, closing or not: a
// delivery past its timeout can bring a second channel.close (406) before our close-ok reached
// it (CI saw "frame for channel 3, which is not open" end a connection that way). A second
// close of a channel the broker closed is answered already: it is discarded, and the
// connection lives on.
TEST(Channels, a_second_close_of_a_channel_the_broker_closed_is_discarded) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    const ChannelClose timeout{406, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out", 0, 0};
    b.send(1, timeout);
    b.expect_sent("ch1 channel.close-ok()");
    b.next_event();
    b.send(1, timeout);
    b.expect_no_event();
    EXPECT_FALSE(b.conn.finished());
    EXPECT_EQ(b.open_channel(), 1);
    b.send(1, ChannelClose{406, "PRECONDITION_FAILED - x", 0, 0});  // a close of the new one counts again
    b.expect_sent("ch1 channel.close-ok()");
  });
}

TEST(Pairing, answers_pair_with_requests_in_order_per_channel) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.open_channel();
    auto a = b.conn.queue_declare(1, QueueDeclare{"a"}, b.now);
    auto x = b.conn.queue_declare(2, QueueDeclare{"x"}, b.now);
    auto c = b.conn.queue_declare(1, QueueDeclare{"c"}, b.now);
    ASSERT_TRUE(a.ok() && x.ok() && c.ok());
    b.send(2, QueueDeclareOk{"x", 0, 0});
    b.send(1, QueueDeclareOk{"a", 1, 0});
    b.send(1, QueueDeclareOk{"c", 2, 0});
    b.expect_event("done(ch2 #" + std::to_string(*x) + " queue.declare-ok(queue=\"x\", message_count=0, consumer_count=0))");
    b.expect_event("done(ch1 #" + std::to_string(*a) + " queue.declare-ok(queue=\"a\", message_count=1, consumer_count=0))");
    b.expect_event("done(ch1 #" + std::to_string(*c) + " queue.declare-ok(queue=\"c\", message_count=2, consumer_count=0))");
  });
}

TEST(Pairing, every_request_verb_pairs_with_its_own_answer) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto& c = b.conn;
    const auto t = b.now;
    std::vector<std::pair<Result<engine::RequestId>, Method>> asked;
    asked.emplace_back(c.exchange_declare(1, ExchangeDeclare{"x", "topic"}, t), ExchangeDeclareOk{});
    asked.emplace_back(c.exchange_bind(1, ExchangeBind{"x", "amq.topic", "#"}, t), ExchangeBindOk{});
    asked.emplace_back(c.exchange_unbind(1, ExchangeUnbind{"x", "amq.topic", "#"}, t), ExchangeUnbindOk{});
    asked.emplace_back(c.exchange_delete(1, ExchangeDelete{"x"}, t), ExchangeDeleteOk{});
    asked.emplace_back(c.queue_bind(1, QueueBind{"q", "amq.topic", "#"}, t), QueueBindOk{});
    asked.emplace_back(c.queue_unbind(1, QueueUnbind{"q", "amq.topic", "#"}, t), QueueUnbindOk{});
    asked.emplace_back(c.queue_purge(1, QueuePurge{"q"}, t), QueuePurgeOk{4});
    asked.emplace_back(c.queue_delete(1, QueueDelete{"q"}, t), QueueDeleteOk{0});
    asked.emplace_back(c.basic_recover(1, BasicRecover{.requeue = true}, t), BasicRecoverOk{});
    asked.emplace_back(c.channel_flow(1, ChannelFlow{.active = false}, t), ChannelFlowOk{false});
    for (auto& [r, answer] : asked) {
      ASSERT_TRUE(r.ok());
      b.send(1, answer);
      b.expect_event("done(ch1 #" + std::to_string(*r) + " " + to_string(answer) + ")");
    }
    // no_wait requests return 0: nothing will answer them, and nothing waits.
    auto quiet = c.queue_declare(1, QueueDeclare{"q", false, false, false, false, true}, t);
    ASSERT_TRUE(quiet.ok());
    EXPECT_EQ(*quiet, 0u);
    b.send(1, ChannelFlow{false});
    b.expect_event("flow(ch1 paused)");
    for (int i = 0; i < 10; ++i) b.next_sent();
    b.next_sent();  // the no-wait declare
    b.expect_sent("ch1 channel.flow-ok(active=false)");
  });
}

TEST(Pairing, the_generic_request_pairs_by_the_answer_its_wire_type_names) {
  static_assert(std::is_same_v<QueueDeclare::Ok, QueueDeclareOk>);
  static_assert(std::is_same_v<BasicQos::Ok, BasicQosOk>);
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto r = b.conn.request(1, QueueDeclare{.queue = "q"}, b.now);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(b.next_sent().rfind("ch1 queue.declare(queue=\"q\"", 0), 0u);
    b.send(1, QueueDeclareOk{"q", 3, 0});
    b.expect_event("done(ch1 #" + std::to_string(*r) + " queue.declare-ok(queue=\"q\", message_count=3, consumer_count=0))");
    // A method that names no single answer is not sent on this path, and the channel goes on.
    auto refused = b.conn.request(1, BasicGet{.queue = "q"}, b.now);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, errc::invalid_argument);
    b.expect_nothing_sent();
    auto again = b.conn.request(1, ExchangeDelete{.exchange = "x"}, b.now);
    ASSERT_TRUE(again.ok());
    b.send(1, ExchangeDeleteOk{});
    b.expect_event("done(ch1 #" + std::to_string(*again) + " exchange.delete-ok())");
  });
}

TEST(Pairing, answer_before_write_settles) {
  // The answer is read before the transport reported the request's bytes written: it still
  // settles the request, because the waiter was registered before the frame was queued.
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.hold_output = true;
    auto r = b.conn.exchange_declare(1, ExchangeDeclare{"logs", "fanout"}, b.now);
    ASSERT_TRUE(r.ok());
    EXPECT_GT(b.conn.pending_output().bytes, 0u);
    b.send(1, ExchangeDeclareOk{});
    b.expect_event("done(ch1 #" + std::to_string(*r) + " exchange.declare-ok())");
  });
}

TEST(Pairing, a_mismatched_answer_is_a_protocol_error_not_a_mispairing) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto r = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    ASSERT_TRUE(r.ok());
    b.next_sent();
    b.send(1, QueueBindOk{});
    b.expect_event("failed(ch1 #" + std::to_string(*r) +
                   ", protocol error: queue.bind-ok on channel 1 does not answer the pending queue.declare)");
    b.expect_event("closed(protocol error: queue.bind-ok on channel 1 does not answer the pending queue.declare)");
    b.expect_sent(
        "ch0 connection.close(reply_code=505, reply_text=\"queue.bind-ok on channel 1 does not answer the pending "
        "queue.declare\", class_id=0, method_id=0)");
  });
}

TEST(Pairing, an_answer_to_nothing_is_a_protocol_error) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  b.send(1, BasicQosOk{});
  b.expect_event("closed(protocol error: basic.qos-ok on channel 1 answers no request)");
}

TEST(Timeouts, a_timed_out_request_closes_its_channel_with_the_timeout_as_reason) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto first = b.conn.queue_declare(1, QueueDeclare{"slow"}, b.now);
    b.advance(1s);
    auto second = b.conn.queue_declare(1, QueueDeclare{"next"}, b.now);
    ASSERT_TRUE(first.ok() && second.ok());
    b.next_sent();
    b.next_sent();
    b.advance(9s);
    const std::string cause = "timed out: queue.declare on channel 1 had no answer within 10000 ms";
    b.expect_event("failed(ch1 #" + std::to_string(*first) + ", " + cause + ")");
    b.expect_event("failed(ch1 #" + std::to_string(*second) + ", " + cause + ")");
    b.expect_event("channel-closed(ch1, " + cause + ")");
    b.expect_sent("ch1 channel.close(reply_code=200, reply_text=\"queue.declare on channel 1 had no answer within 10000 ms\", "
                  "class_id=0, method_id=0)");
    // A late answer settles nothing (the second request must not get the first one's queue).
    b.send(1, QueueDeclareOk{"slow", 0, 0});
    b.expect_no_event();
    b.send(1, ChannelCloseOk{});
    b.expect_no_event();
    EXPECT_TRUE(b.conn.is_open());
  });
}

TEST(Timeouts, timed_out_open_keeps_channel_number) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    auto ch = b.conn.open_channel(b.now);
    ASSERT_TRUE(ch.ok());
    b.expect_sent("ch1 channel.open()");
    b.advance(10s);
    b.expect_event("channel-closed(ch1, timed out: channel.open on channel 1 had no answer within 10000 ms)");
    b.expect_sent("ch1 channel.close(reply_code=200, reply_text=\"channel.open on channel 1 had no answer within 10000 ms\", "
                  "class_id=0, method_id=0)");
    // Until the broker answers the close, number 1 stays reserved: a broker that opened it
    // late would refuse a second open on it with 504, a connection error.
    auto next = b.conn.open_channel(b.now);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(*next, 2);
    b.send(1, ChannelOpenOk{});  // the late open-ok
    b.send(1, ChannelCloseOk{});
    b.expect_no_event();
    auto again = b.conn.open_channel(b.now);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, 1);
  });
}

// The engine's next deadline (what the client arms its timer for) follows each channel's own,
// whichever channel gains one, loses it, or is closed and its number opened again: the engine
// keeps the channels that may hold one apart from the idle rest, and must not lose track.
TEST(Timeouts, the_next_deadline_follows_every_channels_own) {
  auto options = default_options();
  options.heartbeat_s = 0;  // no heartbeat deadlines: only the channels' own
  ScriptedBroker b(std::nullopt, options);
  b.connect(/*heartbeat_s=*/0);
  for (int i = 0; i < 3; ++i) b.open_channel();
  const auto settle = [&b] {  // what the broker's answers told, whatever it was
    while (b.next_event() != "<no event>") {
    }
  };
  EXPECT_FALSE(b.conn.poll_timeout().has_value()) << "three open, idle channels hold no deadline";

  b.advance(1s);
  auto on_2 = b.conn.queue_declare(2, QueueDeclare{"a"}, b.now);
  ASSERT_TRUE(on_2.ok());
  b.next_sent();
  EXPECT_EQ(b.conn.poll_timeout(), b.now + 10s) << "a request on channel 2";
  b.advance(2s);
  auto on_3 = b.conn.queue_declare(3, QueueDeclare{"b"}, b.now);
  ASSERT_TRUE(on_3.ok());
  b.next_sent();
  EXPECT_EQ(b.conn.poll_timeout(), b.now - 2s + 10s) << "channel 2's comes first";
  b.send(2, QueueDeclareOk{"a", 0, 0});
  settle();
  EXPECT_EQ(b.conn.poll_timeout(), b.now + 10s) << "channel 2 answered: channel 3's";
  b.send(3, QueueDeclareOk{"b", 0, 0});
  settle();
  EXPECT_FALSE(b.conn.poll_timeout().has_value()) << "both answered";

  // An unconfirmed publish on channel 3 in confirm mode, until the broker's ack.
  ASSERT_TRUE(b.conn.confirm_select(3, b.now).ok());
  b.next_sent();
  b.send(3, ConfirmSelectOk{});
  settle();
  EXPECT_FALSE(b.conn.poll_timeout().has_value()) << "confirm mode answered";
  b.advance(1s);
  const std::string body = "x";
  ASSERT_TRUE(b.conn.publish(3, BasicPublish{.routing_key = "q"}, {}, std::as_bytes(std::span{body}), b.now).ok());
  b.flush();
  EXPECT_EQ(b.conn.poll_timeout(), b.now + 10s) << "an unconfirmed publish on channel 3";
  b.send(3, BasicAck{1, false});
  settle();
  EXPECT_FALSE(b.conn.poll_timeout().has_value()) << "its ack came";

  // A channel closed (its close-ok has a deadline), its number freed and opened again.
  ASSERT_TRUE(b.conn.close_channel(1, b.now).ok());
  b.next_sent();
  EXPECT_EQ(b.conn.poll_timeout(), b.now + 10s) << "channel 1's close";
  b.send(1, ChannelCloseOk{});
  settle();
  // Opened again before the next deadline is asked: the freed channel's entry and the new
  // channel's meet in the list.
  b.advance(1s);
  auto reopened = b.conn.open_channel(b.now);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*reopened, 1);
  b.next_sent();
  EXPECT_EQ(b.conn.poll_timeout(), b.now + 10s) << "channel 1's open, again";
  b.send(1, ChannelOpenOk{});
  settle();
  EXPECT_FALSE(b.conn.poll_timeout().has_value());

  // And the deadline still fires: a request on the reopened channel that is never answered.
  auto late = b.conn.queue_declare(1, QueueDeclare{"c"}, b.now);
  ASSERT_TRUE(late.ok());
  b.next_sent();
  const auto due = b.conn.poll_timeout();
  ASSERT_TRUE(due.has_value());
  b.advance(std::chrono::duration_cast<std::chrono::milliseconds>(*due - b.now));
  b.expect_event("failed(ch1 #" + std::to_string(*late) + ", timed out: queue.declare on channel 1 had no answer within 10000 ms)");
}

TEST(Timeouts, a_close_ok_that_never_comes_fails_the_connection) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  ASSERT_TRUE(b.conn.close_channel(1, b.now).ok());
  b.advance(10s);
  // The application's close_channel is a waiter too: it fails with the cause, then the end.
  b.expect_event("failed(ch1 #1, timed out: channel.close-ok for channel 1 did not arrive within 10000 ms)");
  b.expect_event("closed(timed out: channel.close-ok for channel 1 did not arrive within 10000 ms)");
}

TEST(OutputQueue, one_output_queue_and_a_content_message_is_one_unit) {
  // Two publishes on two channels, bodies over frame_max: their frames never interleave.
  every_split([](ScriptedBroker& b) {
    b.connect(60, 2047, 4096);
    b.open_channel();
    b.open_channel();
    std::string big(5000, 'a');
    std::string other(5000, 'b');
    ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q1"}, {}, as_bytes(big), b.now).ok());
    ASSERT_TRUE(b.conn.publish(2, BasicPublish{"", "q2"}, {}, as_bytes(other), b.now).ok());
    auto starts = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
    for (std::string ch : {"ch1", "ch2"}) {
      for (std::string frame : {" basic.publish(", " header(size=5000", " body(", " body("}) {
        auto sent = b.next_sent();
        EXPECT_TRUE(starts(sent, ch + frame)) << sent << " should start with " << ch + frame;
      }
    }
  });
}

TEST(Latch, a_framing_error_is_latched_and_every_waiter_gets_that_cause) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto r = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    b.next_sent();
    b.hold_output = true;  // the publish is still unwritten when the stream breaks
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("x"), b.now);
    ASSERT_TRUE(r.ok() && p.ok());
    b.send_raw(from_hex("01 0001 00000004 003c000b 41"));
    const std::string cause = "protocol error: frame end byte 0x41 is not 0xCE";
    b.expect_event("failed(ch1 #" + std::to_string(*r) + ", " + cause + ")");
    b.expect_event("publish(ch1 p" + std::to_string(*p) + " failed, " + cause + ")");
    b.expect_event("closed(" + cause + ")");
    auto later = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    ASSERT_FALSE(later.ok());
    EXPECT_EQ(later.error().to_string(), cause);
    EXPECT_FALSE(b.conn.close(b.now).ok());
    b.send(1, QueueDeclareOk{"q", 0, 0});  // nothing more is read
    b.expect_no_event();
  });
}

TEST(Latch, a_lost_stream_is_latched) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  auto r = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
  b.eof();
  b.expect_event("failed(ch1 #" + std::to_string(*r) + ", connection lost: the broker closed the connection)");
  b.expect_event("closed(connection lost: the broker closed the connection)");
  EXPECT_TRUE(b.conn.finished());
}

// The waiters that do not sit in a channel's request queue are settled by the latch too: a
// channel still opening, the application's channel.close awaiting close-ok, and a basic.get
// whose get-ok came but whose content did not.
TEST(Latch, waiters_outside_the_request_queue_are_settled_by_the_latch) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();  // 1: will have a get half in
    b.open_channel();  // 2: will be closing
    auto get = b.conn.basic_get(1, BasicGet{.queue = "q"}, b.now);
    auto close = b.conn.close_channel(2, b.now);
    auto opening = b.conn.open_channel(b.now);  // 3: its open-ok never comes
    ASSERT_TRUE(get.ok() && close.ok() && opening.ok());
    b.send(1, BasicGetOk{7, false, "", "q", 0});  // the content header and body never come
    b.eof();
    const std::string cause = "connection lost: the broker closed the connection";
    b.expect_event("failed(ch1 #" + std::to_string(*get) + ", " + cause + ")");
    b.expect_event("failed(ch2 #" + std::to_string(*close) + ", " + cause + ")");
    b.expect_event("channel-closed(ch" + std::to_string(*opening) + ", " + cause + ")");
    b.expect_event("closed(" + cause + ")");
    b.expect_no_event();
  });
}

// When both sides close a channel at once, the application's close_channel is answered at
// the close deadline (the broker's close-ok never comes: it sent a close instead).
TEST(Latch, a_crossed_channel_close_answers_the_applications_close) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  auto close = b.conn.close_channel(1, b.now);
  ASSERT_TRUE(close.ok());
  b.send(1, ChannelClose{406, "PRECONDITION_FAILED - x", 50, 10});
  b.advance(10s);
  b.expect_event("done(ch1 #" + std::to_string(*close) + " channel.close-ok())");
  b.expect_event("channel-closed(ch1, channel closed 200: closed by the application)");
  EXPECT_TRUE(b.conn.is_open());
}

TEST(Latch, a_connection_error_from_the_broker_closes_the_connection_with_its_cause) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.send(0, ConnectionClose{320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", 0, 0});
    b.expect_sent("ch0 connection.close-ok()");
    b.expect_event("closed(connection closed 320: CONNECTION_FORCED - broker forced connection closure with reason 'shutdown')");
    EXPECT_TRUE(b.conn.finished());
  });
}

TEST(Close, the_application_closes_and_the_broker_confirms) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto r = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    ASSERT_TRUE(b.conn.close(b.now).ok());
    b.expect_event("failed(ch1 #" + std::to_string(*r) + ", connection closed 200: closed by the application)");
    b.next_sent();
    b.expect_sent("ch0 connection.close(reply_code=200, reply_text=\"\", class_id=0, method_id=0)");
    EXPECT_FALSE(b.conn.finished());
    b.send(1, QueueDeclareOk{"q", 0, 0});  // discarded after our close
    b.send(0, ConnectionCloseOk{});
    b.expect_event("closed(connection closed 200: closed by the application)");
    EXPECT_TRUE(b.conn.finished());
  });
}

TEST(Close, close_ok_has_a_deadline) {
  ScriptedBroker b;
  b.connect();
  ASSERT_TRUE(b.conn.close(b.now).ok());
  b.advance(10s);
  b.expect_event("closed(timed out: connection.close-ok did not arrive within 10000 ms)");
  EXPECT_TRUE(b.conn.finished());
}

TEST(Blocked, blocked_and_unblocked_are_events_and_state) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.send(0, ConnectionBlocked{"low on memory"});
    b.expect_event("blocked(\"low on memory\")");
    EXPECT_TRUE(b.conn.is_blocked());
    b.send(0, ConnectionUnblocked{});
    b.expect_event("unblocked");
    EXPECT_FALSE(b.conn.is_blocked());
  });
}

TEST(Backpressure, congestion_is_reported_and_cleared) {
  auto options = default_options();
  options.output_limit_bytes = 1000;
  ScriptedBroker b(std::nullopt, options);
  b.connect();
  b.open_channel();
  std::string body(600, 'x');
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(body), b.now).ok());
  EXPECT_FALSE(b.conn.congested());
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(body), b.now).ok());
  EXPECT_TRUE(b.conn.congested());
  // Congestion paces the publisher, never the reader: what comes in may be what clears it.
  EXPECT_TRUE(b.conn.wants_input());
  b.flush();
  EXPECT_FALSE(b.conn.congested());
  EXPECT_TRUE(b.conn.wants_input());
  b.expect_event("publish(ch1 p1-p2 written)");
  b.expect_event("writable");
}

TEST(Backpressure, blocked_publishes_wait_up_to_twice_the_limit_but_one_large_message_always_may) {
  auto options = default_options();
  options.output_limit_bytes = 1000;
  ScriptedBroker b(std::nullopt, options);
  b.connect();
  b.open_channel();
  b.send(0, ConnectionBlocked{"low on memory"});
  b.expect_event("blocked(\"low on memory\")");
  std::string large(5000, 'x'), small(100, 'x');
  // Alone, a message over twice the limit waits.
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(large), b.now).ok());
  // Behind it, nothing more does: the bound is what already waits.
  auto refused = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(small), b.now);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, errc::resource_locked);
  b.send(0, ConnectionUnblocked{});
  b.expect_event("unblocked");
  b.flush();
  b.expect_event("publish(ch1 p1 written)");
}

// Finding 1: with more than the output limit waiting behind connection.blocked, the engine
// stopped wanting input, so connection.unblocked (and heartbeats, and a close) were never
// read: the publishes timed out on a healthy connection.
TEST(Backpressure, blocked_publishes_over_the_limit_never_stop_reading_the_unblock) {
  auto options = default_options();
  options.output_limit_bytes = 1000;
  ScriptedBroker b(std::nullopt, options);
  b.connect();
  b.open_channel();
  b.send(0, ConnectionBlocked{"low on memory"});
  b.expect_event("blocked(\"low on memory\")");
  std::string body(700, 'x');
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(body), b.now).ok());
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(body), b.now).ok());
  EXPECT_TRUE(b.conn.congested());
  EXPECT_TRUE(b.conn.wants_input());
  b.send_heartbeat();
  b.send(0, ConnectionUnblocked{});
  b.expect_event("unblocked");
  b.flush();
  b.expect_event("publish(ch1 p1-p2 written)");
  b.expect_event("writable");
}

TEST(Latch, nothing_is_reported_after_closed) {
  // Found by the engine fuzzer: output drained after the latch reported "writable".
  auto options = default_options();
  options.output_limit_bytes = 100;
  ScriptedBroker b(std::nullopt, options);
  b.connect();
  b.open_channel();
  b.hold_output = true;
  std::string body(200, 'x');
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes(body), b.now).ok());
  EXPECT_TRUE(b.conn.congested());
  b.send_raw(from_hex("8a 0000 00000000 ce"));
  b.expect_event("publish(ch1 p1 failed, unknown frame type: frame type 0x8A is not 1, 2, 3 or 8)");
  b.expect_event("closed(unknown frame type: frame type 0x8A is not 1, 2, 3 or 8)");
  b.flush();
  b.expect_no_event();
}

}  // namespace
}  // namespace warren::test

// Publishing, confirms, blocked publishes, deliveries, subscriptions and cancel.
#include "scripted_broker.hpp"

namespace warren::test {
namespace {

using namespace warren::wire;

std::string id(std::uint64_t n) { return std::to_string(n); }

void select_confirms(ScriptedBroker& b, engine::ChannelId ch) {
  ASSERT_TRUE(b.conn.confirm_select(ch, b.now).ok());
  b.expect_sent("ch" + id(ch) + " confirm.select(no_wait=false)");
}

// Connected, with channel 1 open and in confirm mode (its confirm.select-ok taken).
void confirming_channel(ScriptedBroker& b) {
  b.connect();
  b.open_channel();
  select_confirms(b, 1);
  b.send(1, ConfirmSelectOk{});
  b.next_event();
}

TEST(Publish, without_confirms_a_publish_completes_when_written) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  BasicProperties props;
  props.delivery_mode = 2;
  auto p = b.conn.publish(1, BasicPublish{"amq.direct", "k", false, false}, props, as_bytes("hello"), b.now);
  ASSERT_TRUE(p.ok());
  b.expect_no_event();
  b.expect_sent("ch1 basic.publish(exchange=\"amq.direct\", routing_key=\"k\", mandatory=false, immediate=false)");
  b.expect_sent("ch1 header(size=5, {delivery_mode=2})");
  b.expect_sent("ch1 body(\"hello\")");
  b.expect_event("publish(ch1 p" + id(*p) + " written)");
}

// A burst of publishes without confirms is tracked as one run (one entry, not one per publish),
// so the run is told written once its last byte is written, in one event.
TEST(Publish, a_burst_without_confirms_is_told_written_as_one_run) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  b.hold_output = true;
  auto p1 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("a"), b.now);
  auto p2 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("b"), b.now);
  ASSERT_TRUE(p1.ok() && p2.ok());
  const std::size_t queued = b.conn.pending_output_bytes();
  b.conn.consume_output(queued - 1);  // all of p1, all of p2 but its frame end
  b.expect_no_event();
  b.conn.consume_output(1);
  b.expect_event("publish(ch1 p" + id(*p1) + "-p" + id(*p2) + " written)");
  b.expect_no_event();
}

TEST(Confirms, confirm_numbering_starts_at_select) {
  // A publish queued between confirm.select and select-ok is already the broker's number 1.
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto select = b.conn.confirm_select(1, b.now);
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("first"), b.now);
    ASSERT_TRUE(select.ok() && p.ok());
    b.send(1, ConfirmSelectOk{});
    b.expect_event("done(ch1 #" + id(*select) + " confirm.select-ok())");
    b.expect_no_event();  // written, but in confirm mode only the broker's answer settles it
    b.send(1, BasicAck{1, false});
    b.expect_event("publish(ch1 p" + id(*p) + " confirmed)");
  });
}

TEST(Confirms, acks_and_nacks_with_multiple) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    std::vector<engine::PublishId> ps;
    for (int i = 0; i < 4; ++i) ps.push_back(*b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now));
    b.send(1, BasicAck{2, true});  // one multiple ack: one event for the range
    b.expect_event("publish(ch1 p" + id(ps[0]) + "-p" + id(ps[1]) + " confirmed)");
    b.send(1, BasicNack{4, false, false});  // out of order: 4 before 3
    b.expect_event("publish(ch1 p" + id(ps[3]) + " nacked, precondition failed: the broker nacked the message)");
    b.send(1, BasicAck{3, false});
    b.expect_event("publish(ch1 p" + id(ps[2]) + " confirmed)");
    b.expect_no_event();
    // A multiple ack over a publish settled earlier (4) does not report it twice.
    auto p5 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now);
    b.send(1, BasicAck{5, true});
    b.expect_event("publish(ch1 p" + id(*p5) + " confirmed)");
    b.expect_no_event();
  });
}

// Issue 25: the depth of the publishers' windows, which the client batches reads by: every
// channel's publishes whose outcome is not known, however they settle (in order or not) or end.
TEST(Confirms, unconfirmed_publishes_is_the_depth_of_the_window) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  b.open_channel();
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now).ok());
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 0u) << "a publish outside confirm mode awaits no confirm";
  b.expect_sent("ch1 basic.publish(exchange=\"\", routing_key=\"q\", mandatory=false, immediate=false)");
  b.expect_sent("ch1 header(size=1, {})");
  b.expect_sent("ch1 body(\"m\")");
  b.expect_event("publish(ch1 p1 written)");
  for (engine::ChannelId ch : {1, 2}) {
    select_confirms(b, ch);
    b.send(ch, ConfirmSelectOk{});
    b.next_event();
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b.conn.publish(2, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now).ok());
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 7u) << "both channels' windows";
  b.send(1, BasicAck{2, true});
  b.next_event();
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 5u);
  b.send(1, BasicNack{5, false, false});  // out of order: settled, though 3 and 4 are not
  b.next_event();
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 4u);
  b.send(1, BasicAck{4, true});
  b.next_event();
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 2u);
  b.send(2, ChannelClose{406, "PRECONDITION_FAILED - x", 60, 40});  // its two publishes fail
  while (b.next_event() != "<no event>") {
  }
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 0u) << "a closed channel's publishes are no longer awaited";
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now).ok());
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 1u);
  b.advance(10s);  // timed out: settled, not awaited
  b.next_event();
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 0u);
  ASSERT_TRUE(b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("m"), b.now).ok());
  b.send(0, ConnectionClose{320, "CONNECTION_FORCED - x", 0, 0});  // the connection ends: nothing awaited
  while (b.next_event() != "<no event>") {
  }
  EXPECT_EQ(b.conn.unconfirmed_publishes(), 0u);
}

TEST(Confirms, a_confirm_for_a_publish_never_made_is_a_protocol_error) {
  ScriptedBroker b;
  confirming_channel(b);
  b.send(1, BasicAck{1, false});
  b.expect_event("closed(protocol error: basic.ack 1 on channel 1 confirms a publish never made (last is 0))");
}

TEST(Confirms, a_mandatory_return_is_reported_with_its_publish) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto p = b.conn.publish(1, BasicPublish{"amq.direct", "nowhere", true, false}, {}, as_bytes("lost"), b.now);
    ASSERT_TRUE(p.ok());
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "amq.direct", "nowhere"}, "lost");
    b.expect_event("returned(312 \"NO_ROUTE\" ch1 exchange=\"amq.direct\" routing_key=\"nowhere\" body=\"lost\")");
    b.send(1, BasicAck{1, false});
    // The detail names where it went, so the error alone says which publish found no queue.
    b.expect_event("publish(ch1 p" + id(*p) + " returned, not found 312: NO_ROUTE (exchange \"amq.direct\", routing key \"nowhere\"))");
  });
}

// Seen against RabbitMQ: the return goes out while the broker routes, the confirms when it
// flushes, so the ack for an earlier publish can come between a return and its own ack.
TEST(Confirms, a_return_settles_its_own_publish_not_the_one_whose_ack_comes_next) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto kept = b.conn.publish(1, BasicPublish{"", "q", true, false}, {}, as_bytes("kept"), b.now);
    auto other = b.conn.publish(1, BasicPublish{"amq.direct", "nowhere", true, false}, {}, as_bytes("fine"), b.now);
    auto lost = b.conn.publish(1, BasicPublish{"amq.direct", "nowhere", true, false}, {}, as_bytes("lost"), b.now);
    ASSERT_TRUE(kept.ok() && other.ok() && lost.ok());
    // Same destination as `other`, but "lost" is 4 bytes like "fine": the oldest unclaimed
    // match is `other`, the one the broker routed first. A second return claims `lost`.
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "amq.direct", "nowhere"}, "fine");
    b.next_event();
    b.send(1, BasicAck{1, false});
    b.expect_event("publish(ch1 p" + id(*kept) + " confirmed)");
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "amq.direct", "nowhere"}, "lost");
    b.next_event();
    b.send(1, BasicAck{3, true});
    b.expect_event("publish(ch1 p" + id(*other) + " returned, not found 312: NO_ROUTE (exchange \"amq.direct\", routing key \"nowhere\"))");
    b.expect_event("publish(ch1 p" + id(*lost) + " returned, not found 312: NO_ROUTE (exchange \"amq.direct\", routing key \"nowhere\"))");
    b.expect_no_event();
  });
}

TEST(Confirms, a_return_for_a_body_of_another_size_claims_the_publish_that_matches) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto routed = b.conn.publish(1, BasicPublish{"x", "k", true, false}, {}, as_bytes("routed"), b.now);
    auto lost = b.conn.publish(1, BasicPublish{"x", "k", true, false}, {}, as_bytes("lost"), b.now);
    ASSERT_TRUE(routed.ok() && lost.ok());
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "x", "k"}, "lost");
    b.next_event();
    b.send(1, BasicAck{2, true});
    b.expect_event("publish(ch1 p" + id(*lost) + " returned, not found 312: NO_ROUTE (exchange \"x\", routing key \"k\"))");
    b.expect_event("publish(ch1 p" + id(*routed) + " confirmed)");
    b.expect_no_event();
  });
}

// Found by the layer simulation: two retries of different messages to the same level, alike
// in size; the broker routed the first and returned the second (its queue's node went down
// between them), and the first's ack came after the return. Matching by destination and size
// alone gave the return to the first: the second counted as confirmed, and its original was
// acked with no copy anywhere. The message id and the body's ends tell them apart.
TEST(Confirms, a_return_claims_the_publish_whose_message_id_and_body_it_carries) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto routed = b.conn.publish(1, BasicPublish{"x", "level", true, false}, {.message_id = "p1"}, as_bytes("job:p1"), b.now);
    auto lost = b.conn.publish(1, BasicPublish{"x", "level", true, false}, {.message_id = "p2"}, as_bytes("job:p2"), b.now);
    auto same_id = b.conn.publish(1, BasicPublish{"x", "level", true, false}, {.message_id = "p3"}, as_bytes("job:ab"), b.now);
    auto lost_too = b.conn.publish(1, BasicPublish{"x", "level", true, false}, {.message_id = "p3"}, as_bytes("job:cd"), b.now);
    ASSERT_TRUE(routed.ok() && lost.ok() && same_id.ok() && lost_too.ok());
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "x", "level"}, "job:p2", {.message_id = "p2"});
    b.next_event();
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "x", "level"}, "job:cd", {.message_id = "p3"});
    b.next_event();
    b.send(1, BasicAck{2, false});
    b.expect_event("publish(ch1 p" + id(*lost) + " returned, not found 312: NO_ROUTE (exchange \"x\", routing key \"level\"))");
    b.send(1, BasicAck{4, false});
    b.expect_event("publish(ch1 p" + id(*lost_too) + " returned, not found 312: NO_ROUTE (exchange \"x\", routing key \"level\"))");
    b.send(1, BasicAck{3, true});
    b.expect_event("publish(ch1 p" + id(*routed) + " confirmed)");
    b.expect_event("publish(ch1 p" + id(*same_id) + " confirmed)");
    b.expect_no_event();
  });
}

// A return alike in destination and size but in nothing else (a broker that changed what it
// sent back) still settles a publish as returned: never none, which would count it confirmed.
TEST(Confirms, a_return_alike_only_in_destination_and_size_still_claims_a_publish) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto p = b.conn.publish(1, BasicPublish{"x", "k", true, false}, {.message_id = "m1"}, as_bytes("body"), b.now);
    ASSERT_TRUE(p.ok());
    b.send_content(1, BasicReturn{312, "NO_ROUTE", "x", "k"}, "BODY");
    b.next_event();
    b.send(1, BasicAck{1, false});
    b.expect_event("publish(ch1 p" + id(*p) + " returned, not found 312: NO_ROUTE (exchange \"x\", routing key \"k\"))");
    b.expect_no_event();
  });
}

TEST(Blocked, a_publish_made_while_blocked_waits_and_takes_its_number_when_queued) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    b.send(0, ConnectionBlocked{"low on memory"});
    b.next_event();
    auto waiting = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("waits"), b.now);
    ASSERT_TRUE(waiting.ok());
    b.expect_nothing_sent();
    b.send(0, ConnectionUnblocked{});
    b.expect_event("unblocked");
    b.expect_sent("ch1 basic.publish(exchange=\"\", routing_key=\"q\", mandatory=false, immediate=false)");
    b.next_sent();
    b.expect_sent("ch1 body(\"waits\")");
    b.send(1, BasicAck{1, false});
    b.expect_event("publish(ch1 p" + id(*waiting) + " confirmed)");
  });
}

TEST(Blocked, one_deadline_covers_the_wait) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.send(0, ConnectionBlocked{"disk"});
    b.next_event();
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("x"), b.now);
    ASSERT_TRUE(p.ok());
    b.advance(10s);
    b.expect_event("publish(ch1 p" + id(*p) +
                   " timed_out, timed out: the connection stayed blocked for 10000 ms; the message was not sent)");
    b.send(0, ConnectionUnblocked{});
    b.expect_event("unblocked");
    b.expect_nothing_sent();  // a timed-out publish is never sent later, nor retried
  });
}

// A program deciding whether a resend can duplicate needs the fact, not the text: behind
// connection.blocked a publish written before the block may be delivered (sent: maybe), one
// held behind it never left (sent: no). Both are errc::timeout.
TEST(Blocked, a_timeout_says_whether_the_publish_left_the_client) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto written = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("x"), b.now);
    ASSERT_TRUE(written.ok());
    b.send(0, ConnectionBlocked{"memory"});
    b.next_event();
    auto held = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("y"), b.now);
    ASSERT_TRUE(held.ok());
    b.advance(10s);
    ASSERT_EQ(b.publish_done.size(), 2u);
    for (const auto& done : b.publish_done) {
      EXPECT_EQ(done.outcome, engine::PublishOutcome::timed_out);
      EXPECT_EQ(done.cause.code, make_error_code(errc::timeout));
      EXPECT_EQ(done.cause.sent, done.first == *written ? Sent::maybe : Sent::no) << done.cause.to_string();
    }
  });
}

TEST(Confirms, one_deadline_covers_the_confirm) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("x"), b.now);
    b.advance(10s);
    b.expect_event("publish(ch1 p" + id(*p) +
                   " timed_out, timed out: no confirm within 10000 ms; the broker may or may not have the message)");
    b.send(1, BasicAck{1, false});  // late: settles nothing, mispairs nothing
    b.expect_no_event();
    EXPECT_TRUE(b.conn.is_open());
  });
}

TEST(Deliveries, a_delivery_is_reassembled_and_a_single_frame_body_is_not_copied) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto c = b.conn.basic_consume(1, BasicConsume{"q", "ctag"}, std::nullopt, b.now);
    ASSERT_TRUE(c.ok());
    b.send(1, BasicQosOk{});
    b.send(1, BasicConsumeOk{"ctag"});
    b.expect_event("done(ch1 #" + id(*c) + " basic.consume-ok(consumer_tag=\"ctag\"))");
    BasicProperties props;
    props.correlation_id = "r1";
    b.send_content(1, BasicDeliver{"ctag", 1, false, "ex", "rk"}, "payload", props);
    b.expect_event(
        "delivery(ch1 tag=\"ctag\" delivery_tag=1 exchange=\"ex\" routing_key=\"rk\" properties={correlation_id=\"r1\"} "
        "body=\"payload\")");
  });
}

TEST(Deliveries, the_single_frame_body_view_points_into_the_read_bytes) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  ASSERT_TRUE(b.conn.basic_consume(1, BasicConsume{"q", "ctag"}, std::uint16_t{10}, b.now).ok());
  b.send(1, BasicQosOk{});
  b.send(1, BasicConsumeOk{"ctag"});
  b.next_event();
  OutputQueue q;
  ASSERT_TRUE(write_content(q, 1, BasicDeliver{"ctag", 1, false, "", "q"}, {}, as_bytes("zero-copy"), 131072).ok());
  auto bytes = q.to_vector();
  b.conn.handle_bytes(bytes, b.now);
  auto e = b.conn.poll_event();
  ASSERT_TRUE(e.has_value());
  auto* d = std::get_if<engine::Delivery>(&*e);
  ASSERT_NE(d, nullptr);
  EXPECT_GE(d->message.body.data(), bytes.data());
  EXPECT_LT(d->message.body.data(), bytes.data() + bytes.size());
}

TEST(Deliveries, a_body_over_many_frames_is_reassembled) {
  every_split([](ScriptedBroker& b) {
    b.connect(60, 2047, 4096);
    b.open_channel();
    b.subscribe(1, "ctag");
    // Three body frames (4,088 + 4,088 + 24 bytes at frame_max 4,096): a full middle frame and a
    // short last one, every cut of each. Just over two frames, not more: every_split's cost
    // grows with the square of the stream (22 s for 10,000 bytes under ASan).
    std::string body(8200, 'x');
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
    b.send_content(1, BasicDeliver{"ctag", 1, false, "", "q"}, body, {}, 4096);
    auto e = b.next_event();
    EXPECT_NE(e.find("body=\"" + body + "\""), std::string::npos) << e.substr(0, 200);
  });
}

TEST(Deliveries, the_ack_counter_is_separate_from_the_confirm_counter) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    b.subscribe(1, "ctag");
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("out"), b.now);
    b.send_content(1, BasicDeliver{"ctag", 1, false, "", "q"}, "in");
    b.next_event();
    // Our ack of delivery 1 goes to the broker; the broker's ack 1 confirms publish 1.
    ASSERT_TRUE(b.conn.ack(1, wire::BasicAck{.delivery_tag = 1}).ok());
    b.next_sent();
    b.next_sent();
    b.next_sent();
    b.expect_sent("ch1 basic.ack(delivery_tag=1, multiple=false)");
    b.expect_no_event();
    b.send(1, BasicAck{1, false});
    b.expect_event("publish(ch1 p" + id(*p) + " confirmed)");
  });
}

TEST(Deliveries, acking_a_tag_never_delivered_is_refused_before_it_reaches_the_broker) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  auto r = b.conn.ack(1, wire::BasicAck{.delivery_tag = 7});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "delivery tag 7 was never delivered on channel 1");
  b.expect_nothing_sent();
  EXPECT_TRUE(b.conn.ack(1, wire::BasicAck{.delivery_tag = 0, .multiple = true}).ok());  // "everything so far" is always valid
}

TEST(Deliveries, get_ok_and_get_empty) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto g1 = b.conn.basic_get(1, BasicGet{"q", false}, b.now);
    auto g2 = b.conn.basic_get(1, BasicGet{"q", false}, b.now);
    ASSERT_TRUE(g1.ok() && g2.ok());
    b.send_content(1, BasicGetOk{1, false, "", "q", 0}, "got");
    b.expect_event("get-ok(#" + id(*g1) + " left=0 ch1 delivery_tag=1 exchange=\"\" routing_key=\"q\" body=\"got\")");
    b.send(1, BasicGetEmpty{});
    b.expect_event("done(ch1 #" + id(*g2) + " basic.get-empty())");
  });
}

TEST(Deliveries, a_method_in_the_middle_of_content_is_a_protocol_error) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  b.subscribe(1, "ctag");
  b.send(1, BasicDeliver{"ctag", 1, false, "", "q"});
  b.send(1, BasicAck{1, false});
  b.expect_event("closed(protocol error: basic.ack on channel 1 arrived in the middle of a message's content)");
}

TEST(Subscriptions, without_a_prefetch_a_subscription_gets_250_sent_with_its_consume) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    auto c = b.conn.basic_consume(1, BasicConsume{"q"}, std::nullopt, b.now);
    ASSERT_TRUE(c.ok());
    b.expect_sent("ch1 basic.qos(prefetch_size=0, prefetch_count=250, global=false)");
    b.expect_sent("ch1 basic.consume(queue=\"q\", consumer_tag=\"\", no_local=false, no_ack=false, exclusive=false, "
                  "no_wait=false, arguments={})");
    b.send(1, BasicQosOk{});
    b.expect_no_event();  // the engine's own qos settles silently
    b.send(1, BasicConsumeOk{"amq.ctag-1"});
    b.expect_event("done(ch1 #" + id(*c) + " basic.consume-ok(consumer_tag=\"amq.ctag-1\"))");
  });
}

TEST(Subscriptions, an_explicit_prefetch_is_sent_and_zero_means_unlimited) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  ASSERT_TRUE(b.conn.basic_consume(1, BasicConsume{"q", "a"}, std::uint16_t{10}, b.now).ok());
  b.expect_sent("ch1 basic.qos(prefetch_size=0, prefetch_count=10, global=false)");
  b.next_sent();
  ASSERT_TRUE(b.conn.basic_consume(1, BasicConsume{"q", "b"}, std::uint16_t{0}, b.now).ok());
  b.expect_sent("ch1 basic.qos(prefetch_size=0, prefetch_count=0, global=false)");
  b.next_sent();
}

TEST(Subscriptions, an_applications_qos_is_left_alone) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  ASSERT_TRUE(b.conn.basic_qos(1, BasicQos{0, 5, false}, b.now).ok());
  b.expect_sent("ch1 basic.qos(prefetch_size=0, prefetch_count=5, global=false)");
  ASSERT_TRUE(b.conn.basic_consume(1, BasicConsume{"q", "c"}, std::nullopt, b.now).ok());
  b.expect_sent("ch1 basic.consume(queue=\"q\", consumer_tag=\"c\", no_local=false, no_ack=false, exclusive=false, "
                "no_wait=false, arguments={})");
  b.expect_nothing_sent();
}

TEST(Subscriptions, a_delivery_that_races_the_cancel_is_handed_back) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.subscribe(1, "ctag");
    auto cancel = b.conn.basic_cancel(1, "ctag", b.now);
    ASSERT_TRUE(cancel.ok());
    b.expect_sent("ch1 basic.cancel(consumer_tag=\"ctag\", no_wait=false)");
    // The broker had already sent these: the tag is still routed, so they are seen and
    // rejected back to the queue, not left unacknowledged on the channel.
    b.send_content(1, BasicDeliver{"ctag", 7, false, "", "q"}, "raced");
    b.send_content(1, BasicDeliver{"ctag", 8, false, "", "q"}, "raced too");
    b.expect_no_event();
    b.expect_sent("ch1 basic.reject(delivery_tag=7, requeue=true)");
    b.expect_sent("ch1 basic.reject(delivery_tag=8, requeue=true)");
    b.send(1, BasicCancelOk{"ctag"});
    b.expect_event("cancelled(ch1 \"ctag\")");
    b.expect_event("done(ch1 #" + id(*cancel) + " basic.cancel-ok(consumer_tag=\"ctag\"))");
  });
}

// RabbitMQ 3.10-3.12 closes the whole connection (540) for a reject of a stream delivery:
// a stream subscription's raced deliveries are left to the channel, never rejected.
TEST(Subscriptions, a_stream_subscriptions_delivery_that_races_the_cancel_is_not_rejected) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    wire::FieldTable offset{{"x-stream-offset", "first"}};
    auto r = b.conn.basic_consume(1, BasicConsume{.queue = "log", .consumer_tag = "reader", .arguments = offset},
                                  std::uint16_t{10}, b.now);
    ASSERT_TRUE(r.ok());
    b.next_sent();  // basic.qos
    b.next_sent();  // basic.consume
    b.send(1, BasicQosOk{});
    b.send(1, BasicConsumeOk{"reader"});
    b.expect_event("done(ch1 #" + id(*r) + " basic.consume-ok(consumer_tag=\"reader\"))");
    auto cancel = b.conn.basic_cancel(1, "reader", b.now);
    ASSERT_TRUE(cancel.ok());
    b.expect_sent("ch1 basic.cancel(consumer_tag=\"reader\", no_wait=false)");
    b.send_content(1, BasicDeliver{"reader", 7, false, "", "log"}, "raced");
    b.expect_no_event();
    b.expect_nothing_sent();
    b.send(1, BasicCancelOk{"reader"});
    b.expect_event("cancelled(ch1 \"reader\")");
  });
}

TEST(Subscriptions, a_no_ack_subscription_has_nothing_to_hand_back) {
  ScriptedBroker b;
  b.connect();
  b.open_channel();
  b.subscribe(1, "ctag", true);
  ASSERT_TRUE(b.conn.basic_cancel(1, "ctag", b.now).ok());
  b.next_sent();
  b.send_content(1, BasicDeliver{"ctag", 3, false, "", "q"}, "mine");
  b.expect_event("delivery(ch1 tag=\"ctag\" delivery_tag=3 exchange=\"\" routing_key=\"q\" body=\"mine\")");
  b.expect_nothing_sent();
}

TEST(Subscriptions, a_broker_cancel_ends_the_subscription) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.subscribe(1, "ctag");
    b.send(1, BasicCancel{"ctag", true});
    b.expect_event("cancelled(ch1 \"ctag\" by broker)");
    auto again = b.conn.basic_cancel(1, "ctag", b.now);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code, errc::not_found);
  });
}

// ---- finding 11: a publish's deadline is its own, or its channel's, not only the connection's

TEST(Deadlines, a_channel_timeout_bounds_its_requests_and_publishes) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.open_channel();
    ASSERT_TRUE(b.conn.set_channel_timeout(1, 2s).ok());
    select_confirms(b, 1);
    b.send(1, ConfirmSelectOk{});
    b.next_event();
    auto p = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("x"), b.now);
    ASSERT_TRUE(p.ok());
    b.advance(1999ms);
    b.expect_no_event();  // channel 2's timeout is still the connection's
    b.advance(1ms);
    b.expect_event("publish(ch1 p" + id(*p) +
                   " timed_out, timed out: no confirm within 2000 ms; the broker may or may not have the message)");
    auto q = b.conn.queue_declare(1, QueueDeclare{"q"}, b.now);
    ASSERT_TRUE(q.ok());
    b.advance(1999ms);
    b.expect_no_event();
    b.advance(1ms);
    b.expect_event("failed(ch1 #" + std::to_string(*q) + ", timed out: queue.declare on channel 1 had no answer within 2000 ms)");
  });
}

// A shorter deadline behind a longer one is not late, and the range that later confirms the
// longer one does not name the one that timed out.
TEST(Deadlines, a_short_publish_timeout_behind_a_long_one_fires_on_time) {
  every_split([](ScriptedBroker& b) {
    confirming_channel(b);
    auto p1 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("a"), b.now);
    auto p2 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("b"), b.now, engine::PublishOptions{.timeout = 1s});
    auto p3 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("c"), b.now);
    ASSERT_TRUE(p1.ok() && p2.ok() && p3.ok());
    b.advance(1s);
    b.expect_event("publish(ch1 p" + id(*p2) +
                   " timed_out, timed out: no confirm within 1000 ms; the broker may or may not have the message)");
    b.send(1, BasicAck{3, true});
    b.expect_event("publish(ch1 p" + id(*p1) + " confirmed)");
    b.expect_event("publish(ch1 p" + id(*p3) + " confirmed)");
    b.expect_no_event();
  });
}

TEST(Deadlines, a_short_timeout_while_blocked_or_unwritten_fires_on_time) {
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.hold_output = true;  // nothing is written yet
    auto slow = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("a"), b.now);
    auto quick = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("b"), b.now, engine::PublishOptions{.timeout = 1s});
    ASSERT_TRUE(slow.ok() && quick.ok());
    b.advance(1s);
    b.expect_event("publish(ch1 p" + id(*quick) + " timed_out, timed out: not written within 1000 ms)");
    b.flush();
    b.expect_event("publish(ch1 p" + id(*slow) + " written)");
    b.expect_no_event();
    // Blocked: the same for publishes waiting on connection.unblocked.
    b.send(0, ConnectionBlocked{"disk"});
    b.next_event();
    auto waits = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("c"), b.now);
    auto gives_up = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("d"), b.now, engine::PublishOptions{.timeout = 1s});
    ASSERT_TRUE(waits.ok() && gives_up.ok());
    b.advance(1s);
    b.expect_event("publish(ch1 p" + id(*gives_up) +
                   " timed_out, timed out: the connection stayed blocked for 1000 ms; the message was not sent)");
    b.send(0, ConnectionUnblocked{});
    b.expect_event("unblocked");
    b.flush();
    b.expect_event("publish(ch1 p" + id(*waits) + " written)");
    b.expect_no_event();
  });
}

// A run of unwritten publishes times out as one, at its last publish's deadline: its first is
// told at most the run's span (1 ms) late, never early. A publish 1 ms or more after a run's
// first starts a run of its own, with a deadline of its own.
TEST(Deadlines, a_run_of_unwritten_publishes_is_told_never_early_and_at_most_1ms_late) {
  using namespace std::chrono_literals;
  every_split([](ScriptedBroker& b) {
    b.connect();
    b.open_channel();
    b.hold_output = true;
    const engine::PublishOptions one_second{.timeout = 1s};
    const auto t0 = b.now;
    auto p1 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("a"), b.now, one_second);
    b.now = t0 + 600us;
    auto p2 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("b"), b.now, one_second);
    b.now = t0 + 1200us;
    auto p3 = b.conn.publish(1, BasicPublish{"", "q"}, {}, as_bytes("c"), b.now, one_second);
    ASSERT_TRUE(p1.ok() && p2.ok() && p3.ok());
    b.now = t0 + 1s - 1us;  // p1's deadline not yet
    b.advance(0ms);
    b.expect_no_event();
    b.now = t0 + 1s + 1ms;  // p1's at most 1 ms ago, p2's passed, p3's not yet
    b.advance(0ms);
    b.expect_event("publish(ch1 p" + id(*p1) + "-p" + id(*p2) + " timed_out, timed out: not written within 1000 ms)");
    b.expect_no_event();
    b.now = t0 + 1s + 1200us;
    b.advance(0ms);
    b.expect_event("publish(ch1 p" + id(*p3) + " timed_out, timed out: not written within 1000 ms)");
    b.flush();
    b.expect_no_event();  // written later, and told already
  });
}

}  // namespace
}  // namespace warren::test

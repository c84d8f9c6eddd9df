// The client API users touch (Channel, Consumer, Message) against the real broker, on each
// driver: every verb with options by name and typed replies, publish outcomes, owned messages
// settled on the message (also from another thread), handles that outlive their channel,
// the stream consumer's hand-back on cancel counted on the broker, and a consumer that reads
// slower than the broker sends keeping its buffer within the prefetch.
#include <sstream>
#include <thread>

#include "client_fixture.hpp"
#include "support/nested_headers.hpp"
#include "warren/client/channel.hpp"

namespace warren::test {
namespace {

using namespace warren::client;

class ChannelApi : public ClientSuite {
 protected:
  // "ready unacked" for one queue, as the broker counts them.
  static std::string counts(const std::string& queue) {
    std::istringstream lines(rabbitmqctl("list_queues name messages_ready messages_unacknowledged"));
    std::string name, ready, unacked;
    while (lines >> name >> ready >> unacked)
      if (name == queue) return ready + " " + unacked;
    return "<no queue " + queue + ">";
  }
  // Waits for the broker's counts (they trail the client by a moment).
  bool counts_become(const std::string& queue, const std::string& want) {
    for (int i = 0; i < 50; ++i) {
      if (counts(queue) == want) return true;
      loop.run_until([] { return false; }, 100ms);
    }
    return false;
  }
};

TEST_P(ChannelApi, every_verb_with_options_by_name_and_typed_replies) {
  auto ch = open();
  ASSERT_TRUE(wait<void>([&](auto d) { ch.exchange_declare({.name = "warren-api-x", .type = "topic"}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.exchange_declare({.name = "warren-api-y", .type = "fanout", .auto_delete = true}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) {
                ch.exchange_bind({.destination = "warren-api-y", .source = "warren-api-x", .routing_key = "a.#"}, d);
              }).ok());
  auto declared = wait<QueueDeclared>([&](auto d) {
    ch.queue_declare({.exclusive = true, .auto_delete = true, .arguments = {{"x-max-length", 100}, {"x-queue-mode", "default"}}}, d);
  });
  ASSERT_TRUE(declared.ok()) << declared.error().to_string();
  EXPECT_EQ(declared->name.rfind("amq.gen-", 0), 0u);  // server-named
  EXPECT_EQ(declared->message_count, 0u);
  const auto q = declared->name;
  ASSERT_TRUE(wait<void>([&](auto d) { ch.queue_bind({.queue = q, .exchange = "warren-api-y"}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  for (int i = 0; i < 3; ++i) {
    auto o = wait<engine::PublishOutcome>([&](auto d) { ch.publish({.exchange = "warren-api-x", .routing_key = "a.b"}, as_bytes("routed"), d); });
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(*o, engine::PublishOutcome::confirmed);
  }
  auto again = wait<QueueDeclared>([&](auto d) { ch.queue_declare({.name = q, .passive = true}, d); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->message_count, 3u);
  EXPECT_EQ(wait<std::uint32_t>([&](auto d) { ch.queue_purge({.queue = q}, d); }).value(), 3u);
  ASSERT_TRUE(wait<void>([&](auto d) { ch.qos({.prefetch_count = 5}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.recover({}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.queue_unbind({.queue = q, .exchange = "warren-api-y"}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) {
                ch.exchange_unbind({.destination = "warren-api-y", .source = "warren-api-x", .routing_key = "a.#"}, d);
              }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.exchange_delete({.name = "warren-api-y"}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.exchange_delete({.name = "warren-api-x", .if_unused = true}, d); }).ok());
  EXPECT_EQ(wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = q}, d); }).value(), 0u);
  ASSERT_TRUE(wait<void>([&](auto d) { ch.close(d); }).ok());
  EXPECT_FALSE(ch.is_open());
}

TEST_P(ChannelApi, get_hands_out_an_owned_message_that_settles_itself) {
  auto ch = open();
  auto q = temp_queue(ch);
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  FieldTable headers{{"attempt", 2}, {"origin", "test"}};
  for (const char* body : {"one", "two"})
    ASSERT_TRUE(wait<engine::PublishOutcome>([&](auto d) {
                  ch.publish({.routing_key = q,
                              .properties = {.content_type = "text/plain", .headers = headers, .delivery_mode = persistent,
                                             .correlation_id = "c-1"}},
                             as_bytes(body), d);
                }).ok());
  auto first = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q}, d); });
  ASSERT_TRUE(first.ok() && first->has_value());
  Message m = std::move(**first);
  EXPECT_EQ(m.body_text(), "one");
  EXPECT_EQ(m.message_count(), 1u);
  EXPECT_EQ(m.properties().content_type.value_or(""), "text/plain");
  EXPECT_EQ(m.properties().correlation_id.value_or(""), "c-1");
  EXPECT_EQ(m.properties().delivery_mode.value_or(0), persistent);
  auto h = m.headers();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, headers);
  ASSERT_TRUE(m.nack({.requeue = true}).ok());  // back to the head of the queue
  EXPECT_FALSE(m.ack().ok()) << "a message settles once";
  auto redelivered = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q}, d); });
  ASSERT_TRUE(redelivered.ok() && redelivered->has_value());
  EXPECT_EQ((*redelivered)->body_text(), "one");
  EXPECT_TRUE((*redelivered)->redelivered());
  ASSERT_TRUE((*redelivered)->reject({.requeue = false}).ok());
  auto second = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q}, d); });
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->body_text(), "two");
  ASSERT_TRUE((*second)->ack().ok());
  auto empty = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q}, d); });
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST_P(ChannelApi, publish_outcomes_reach_the_caller_with_the_brokers_words) {
  auto ch = open();
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  auto unroutable = wait<engine::PublishOutcome>([&](auto d) {
    ch.publish({.routing_key = "warren-api-nowhere", .mandatory = true}, as_bytes("x"), d);
  });
  ASSERT_FALSE(unroutable.ok());
  EXPECT_EQ(unroutable.error().code, make_error_code(errc::unroutable));
  EXPECT_EQ(unroutable.error().reply_code, 312);
  EXPECT_EQ(unroutable.error().detail, "NO_ROUTE (the default exchange, routing key \"warren-api-nowhere\")");
  EXPECT_EQ(scope(unroutable.error()), Scope::request);

  // A full queue that refuses new messages nacks them.
  auto q = temp_queue(ch, {.exclusive = true, .auto_delete = true,
                           .arguments = {{"x-max-length", 1}, {"x-overflow", "reject-publish"}}});
  ASSERT_TRUE(wait<engine::PublishOutcome>([&](auto d) { ch.publish({.routing_key = q}, as_bytes("fits"), d); }).ok());
  auto nacked = wait<engine::PublishOutcome>([&](auto d) { ch.publish({.routing_key = q}, as_bytes("over"), d); });
  ASSERT_FALSE(nacked.ok());
  EXPECT_EQ(nacked.error().code, make_error_code(errc::nacked));
  EXPECT_FALSE(is_permanent(nacked.error()));
  EXPECT_TRUE(ch.is_open());
}

// A poison message: headers nested 100 deep, past what the decoder goes (64). RabbitMQ takes
// and delivers them. The consumer gets the message, its headers alone are refused as too
// deep, and the connection stays open for the next one; before, the frame was refused and the
// connection closed, and the broker handed the same message to the next consumer, forever.
TEST_P(ChannelApi, a_message_whose_headers_nest_too_deep_is_delivered_and_only_its_headers_refused) {
  const std::vector<std::byte> deep = test::nested_headers(100);
  auto ch = open();
  auto q = temp_queue(ch);
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  EXPECT_EQ(confirm_publish(ch, {.routing_key = q, .properties = {.headers = wire::TableRef::validated(deep)}}, as_bytes("poison")),
            "confirmed");
  EXPECT_EQ(confirm_publish(ch, {.routing_key = q}, as_bytes("fine")), "confirmed");
  std::vector<std::string> seen;
  auto consumer = wait<Consumer>([&](auto d) {
    ch.consume({.queue = q, .prefetch = 10}, [&](const Delivery& dl) {
      std::string headers = "none";
      if (dl.properties().headers) {
        auto t = dl.properties().headers->to_table();
        headers = t.ok() ? "decoded" : t.error().to_string();
      }
      seen.push_back(std::string(dl.body_text()) + ": " + headers);
      EXPECT_TRUE(dl.ack().ok());
    }, d);
  });
  ASSERT_TRUE(consumer.ok()) << consumer.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return seen.size() == 2 || !conn->is_open(); }));
  EXPECT_TRUE(conn->is_open());
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "poison: field table nested too deep: field tables nested deeper than 64", "fine: none"}));
  EXPECT_TRUE(counts_become(q, "0 0"));
}

TEST_P(ChannelApi, a_return_reaches_on_returned_without_confirm_mode) {
  auto ch = open();
  std::optional<std::string> returned;
  conn->on_returned = [&](const Delivery& m, const Error& why) {
    returned = std::string(m.routing_key()) + " " + std::string(m.body_text()) + " " + why.to_string();
  };
  ASSERT_TRUE(ch.publish({.routing_key = "warren-api-nowhere", .mandatory = true}, as_bytes("lost")).ok());
  ASSERT_TRUE(loop.run_until([&] { return returned.has_value(); }));
  EXPECT_EQ(*returned, "warren-api-nowhere lost unroutable (312): NO_ROUTE (the default exchange, routing key \"warren-api-nowhere\")");
}

TEST_P(ChannelApi, errors_say_what_they_put_out_of_use) {
  auto ch = open();
  auto local = wait<QueueDeclared>([&](auto d) { ch.queue_declare({.name = std::string(300, 'q')}, d); });
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(scope(local.error()), Scope::request) << local.error().to_string();
  EXPECT_TRUE(is_permanent(local.error()));
  EXPECT_TRUE(ch.is_open());
  auto refused = wait<QueueDeclared>([&](auto d) { ch.queue_declare({.name = "amq.reserved-by-the-broker"}, d); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reply_code, 403);
  EXPECT_EQ(scope(refused.error()), Scope::channel);
  EXPECT_TRUE(is_permanent(refused.error()));
  std::optional<Error> lost;
  conn->on_closed = [&](const Error& e) { lost = e; };
  ch = open();
  ch.qos({.prefetch_count = 1, .prefetch_size = 4096}, nullptr);  // 540: RabbitMQ has no byte prefetch
  ASSERT_TRUE(loop.run_until([&] { return lost.has_value(); }));
  EXPECT_EQ(scope(*lost), Scope::connection);
  auto after = wait<QueueDeclared>([&](auto d) { ch.queue_declare({}, d); });
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(scope(after.error()), Scope::connection) << after.error().to_string();
}

TEST_P(ChannelApi, a_handle_to_a_closed_channel_fails_with_its_cause_and_never_reaches_a_reused_number) {
  auto ch = open();
  // A passive declare of a missing queue: the broker closes the channel with 404.
  auto missing = wait<QueueDeclared>([&](auto d) { ch.queue_declare({.name = "warren-api-missing", .passive = true}, d); });
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().reply_code, 404);
  EXPECT_EQ(scope(missing.error()), Scope::channel);
  ASSERT_TRUE(loop.run_until([&] { return !ch.is_open(); }));
  ASSERT_TRUE(ch.closed_cause().has_value());
  EXPECT_EQ(ch.closed_cause()->reply_code, 404);

  auto reused = open();
  EXPECT_EQ(reused.id(), ch.id()) << "the broker's freed number is taken again";
  auto stale = wait<QueueDeclared>([&](auto d) { ch.queue_declare({.exclusive = true}, d); });
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().reply_code, 404) << stale.error().to_string();
  auto stale_publish = ch.publish({.routing_key = "x"}, as_bytes("x"));
  ASSERT_FALSE(stale_publish.ok());
  EXPECT_EQ(stale_publish.error().reply_code, 404);
  EXPECT_TRUE(reused.is_open());
  EXPECT_TRUE(wait<QueueDeclared>([&](auto d) { reused.queue_declare({.exclusive = true}, d); }).ok());
}

TEST_P(ChannelApi, a_message_of_a_dead_channel_sends_nothing_and_says_so) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});
  ASSERT_TRUE(wait<engine::PublishOutcome>([&](auto d) { ch.publish({.routing_key = q}, as_bytes("kept"), d); }).ok());
  auto got = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q}, d); });
  ASSERT_TRUE(got.ok() && got->has_value());
  ASSERT_TRUE(wait<void>([&](auto d) { ch.close(d); }).ok());
  auto r = (*got)->ack();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, make_error_code(errc::channel_closed));
  // The broker took it back with the channel; a new channel gets it again.
  auto other = open();
  auto again = wait<std::optional<Message>>([&](auto d) { other.get({.queue = q, .auto_ack = true}, d); });
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->body_text(), "kept");
  EXPECT_TRUE((*again)->redelivered());
}

TEST_P(ChannelApi, a_push_consumer_reads_views_and_acks_them) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});  // outlives the cancel, to be counted
  std::vector<std::string> seen;
  auto consumer = wait<Consumer>([&](auto d) {
    ch.consume({.queue = q, .prefetch = 10}, [&](const Delivery& m) {
      seen.emplace_back(m.body_text());
      EXPECT_TRUE(m.ack().ok());
    }, d);
  });
  ASSERT_TRUE(consumer.ok()) << consumer.error().to_string();
  EXPECT_FALSE(consumer->tag().empty());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(ch.publish({.routing_key = q}, as_bytes("m" + std::to_string(i))).ok());
  ASSERT_TRUE(loop.run_until([&] { return seen.size() == 20; }));
  EXPECT_EQ(seen.front(), "m0");
  EXPECT_EQ(seen.back(), "m19");
  std::optional<Error> ended;
  consumer->on_ended([&](const Error& e) { ended = e; });
  ASSERT_TRUE(wait<void>([&](auto d) { consumer->cancel(d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return ended.has_value(); }));
  EXPECT_EQ(ended->code, make_error_code(errc::consumer_cancelled));
  EXPECT_EQ(ended->reply_code, 200) << "our own cancel";
  EXPECT_TRUE(counts_become(q, "0 0"));
}

TEST_P(ChannelApi, cancelling_a_stream_consumer_hands_back_what_it_never_read) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});  // not exclusive: rabbitmqctl lists it either way
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(wait<engine::PublishOutcome>([&](auto d) { ch.publish({.routing_key = q}, as_bytes(std::to_string(i)), d); }).ok());
  auto consumer = wait<Consumer>([&](auto d) { ch.consume({.queue = q, .prefetch = 10}, d); });
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(loop.run_until([&] { return consumer->buffered() == 10; }));
  std::vector<Message> read;
  for (int i = 0; i < 2; ++i) {
    auto m = wait<Message>([&](auto d) { consumer->receive(d); });
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->body_text(), std::to_string(i));
    read.push_back(std::move(*m));
  }
  ASSERT_TRUE(counts_become(q, "0 10"));
  ASSERT_TRUE(wait<void>([&](auto d) { consumer->cancel(d); }).ok());
  // The 8 never read are back in the queue now; the 2 read are still the application's.
  EXPECT_TRUE(counts_become(q, "8 2")) << counts(q);
  auto end = wait<Message>([&](auto d) { consumer->receive(d); });
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.error().code, make_error_code(errc::consumer_cancelled));
  for (auto& m : read) ASSERT_TRUE(m.ack().ok());
  EXPECT_TRUE(counts_become(q, "8 0")) << counts(q);
}

TEST_P(ChannelApi, dropping_a_stream_consumer_cancels_it_and_hands_back_its_buffer) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ch.publish({.routing_key = q}, as_bytes("x")).ok());
  {
    auto consumer = wait<Consumer>([&](auto d) { ch.consume({.queue = q, .prefetch = 5}, d); });
    ASSERT_TRUE(consumer.ok());
    ASSERT_TRUE(loop.run_until([&] { return consumer->buffered() == 5; }));
  }
  EXPECT_TRUE(counts_become(q, "5 0")) << counts(q);
  EXPECT_TRUE(ch.is_open());
}

TEST_P(ChannelApi, a_slow_reader_holds_no_more_than_its_prefetch) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(ch.publish({.routing_key = q}, as_bytes(std::string(1024, 'x'))).ok());
  auto consumer = wait<Consumer>([&](auto d) { ch.consume({.queue = q, .prefetch = 20}, d); });
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(loop.run_until([&] { return consumer->buffered() == 20; }));
  loop.run_until([] { return false; }, 300ms);  // the broker has had time to send more, if it would
  EXPECT_EQ(consumer->buffered(), 20u);
  EXPECT_TRUE(counts_become(q, "480 20")) << counts(q);
  // Reading and acking one at a time keeps the buffer at the prefetch until the end.
  std::size_t most = 0;
  for (int i = 0; i < 500; ++i) {
    auto m = wait<Message>([&](auto d) { consumer->receive(d); });
    ASSERT_TRUE(m.ok()) << i << ": " << m.error().to_string();
    ASSERT_TRUE(m->ack().ok());
    most = std::max(most, consumer->buffered());
  }
  EXPECT_LE(most, 20u);
  EXPECT_TRUE(counts_become(q, "0 0"));
}

TEST_P(ChannelApi, an_auto_ack_stream_without_a_bound_stops_reading_instead_of_growing) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});
  auto filler = open();
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(filler.publish({.routing_key = q}, as_bytes("y")).ok());
  ASSERT_TRUE(counts_become(q, "2000 0"));
  auto consumer = wait<Consumer>([&](auto d) { ch.consume({.queue = q, .auto_ack = true, .prefetch = 50}, d); });
  ASSERT_TRUE(consumer.ok());
  loop.run_until([] { return false; }, 500ms);
  // Auto-ack ignores the prefetch; the connection stops reading once 50 are buffered. What the
  // broker already wrote into the socket is read no further.
  EXPECT_GE(consumer->buffered(), 50u);
  EXPECT_LT(consumer->buffered(), 2000u);
  std::size_t received = 0;
  while (received < 2000) {
    auto m = wait<Message>([&](auto d) { consumer->receive(d); });
    ASSERT_TRUE(m.ok()) << received << ": " << m.error().to_string();
    ++received;
  }
  EXPECT_EQ(consumer->buffered(), 0u);
}

// F8: a full buffer pauses reading, but never long enough to hide the broker: with a 1 s
// heartbeat, an application that does not receive for 4 s keeps a healthy connection (the
// client used to take its own pause for a dead peer after 2 s and close it).
TEST_P(ChannelApi, a_stream_consumer_that_is_not_read_for_a_while_does_not_kill_its_connection) {
  auto filler = open();
  auto q = temp_queue(filler, {.durable = false});
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(filler.publish({.routing_key = q}, as_bytes("z")).ok());
  ASSERT_TRUE(counts_become(q, "2000 0"));
  // Connected only now: rabbitmqctl above blocks this thread's loop for longer than a 1 s
  // heartbeat survives.
  auto c = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f?heartbeat=1");
  auto ch = wait<Channel>([&](auto d) { c->open_channel(d); });
  ASSERT_TRUE(ch.ok());
  auto consumer = wait<Consumer>([&](auto d) { ch->consume({.queue = q, .auto_ack = true, .prefetch = 50}, d); });
  ASSERT_TRUE(consumer.ok());
  loop.run_until([] { return false; }, 4s);
  ASSERT_TRUE(c->is_open()) << "a paused read is not a dead broker";
  EXPECT_TRUE(consumer->active());
  std::size_t received = 0;
  while (received < 2000) {
    auto m = wait<Message>([&](auto d) { consumer->receive(d); });
    ASSERT_TRUE(m.ok()) << received << ": " << m.error().to_string();
    ++received;
  }
  close(*c);
  (void)wait<std::uint32_t>([&](auto d) { filler.queue_delete({.queue = q}, d); });
}

TEST_P(ChannelApi, a_message_moved_to_another_thread_is_acked_from_there) {
  auto ch = open();
  auto q = temp_queue(ch, {.durable = false});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(ch.publish({.routing_key = q}, as_bytes("w")).ok());
  std::mutex mutex;
  std::vector<Message> inbox;
  std::atomic<int> acked{0};
  auto consumer = wait<Consumer>([&](auto d) {
    ch.consume({.queue = q, .prefetch = 50}, [&](const Delivery& d) {
      std::lock_guard lock(mutex);
      inbox.push_back(d.take());
    }, d);
  });
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(loop.run_until([&] {
    std::lock_guard lock(mutex);
    return inbox.size() == 50;
  }));
  std::thread worker([&] {
    std::vector<Message> mine;
    {
      std::lock_guard lock(mutex);
      mine = std::move(inbox);
    }
    for (auto& m : mine)
      if (m.ack().ok()) ++acked;
  });
  worker.join();
  EXPECT_EQ(acked.load(), 50);
  EXPECT_TRUE(counts_become(q, "0 0")) << counts(q);
}

TEST_P(ChannelApi, the_connection_reports_the_negotiated_frame_max) {
  EXPECT_EQ(conn->frame_max_bytes(), 131072u);  // the broker's default and ours
  auto small = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f?frame_max=8192");
  EXPECT_EQ(small->frame_max_bytes(), 8192u);
  close(*small);
}

TEST_P(ChannelApi, a_channel_opened_in_the_close_callback_of_another_stays_open) {
  auto ch = open();
  const auto old_id = ch.id();
  std::optional<Result<Channel>> reopened;
  ch.close([&](Result<void> closed) {
    EXPECT_TRUE(closed.ok());
    // The number is free again: the new channel takes it, and the old close must not end it.
    conn->open_channel([&](Result<Channel> c) { reopened.emplace(std::move(c)); });
  });
  ASSERT_TRUE(loop.run_until([&] { return reopened.has_value(); }));
  ASSERT_TRUE(reopened->ok()) << reopened->error().to_string();
  EXPECT_EQ((*reopened)->id(), old_id);
  auto q = wait<QueueDeclared>([&](auto d) { (*reopened)->queue_declare({.exclusive = true}, d); });
  EXPECT_TRUE(q.ok()) << q.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(Drivers, ChannelApi, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);


// Issue 24, traces, through the real broker: the context a publish carries is a traceparent
// and a tracestate long-string header as pika (an independent peer) reads them, beside the
// application's own headers, and warren reads it back from a delivery.
TEST_P(ChannelApi, a_publishs_trace_context_crosses_the_broker_as_headers_a_peer_reads) {
  auto ch = open();
  const auto q = temp_queue(ch, {.auto_delete = false});
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  const auto sent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE").value();
  FieldTable headers{{"x-app", "kept"}, {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}};
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(confirm_publish(ch, {.routing_key = q, .properties = {.headers = headers}, .trace = sent}, as_bytes("traced")),
              "confirmed");
  auto got = wait<std::optional<Message>>([&](auto d) { ch.get({.queue = q, .auto_ack = true}, d); });
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->trace(), sent);
  // pika takes the other one and prints its headers.
  const std::string script =
      "import pika, json, sys\n"
      "c = pika.BlockingConnection(pika.ConnectionParameters('127.0.0.1', int(sys.argv[1])))\n"
      "m, p, b = c.channel().basic_get(sys.argv[2], auto_ack=True)\n"
      "print(json.dumps({k: (v.decode() if isinstance(v, bytes) else v) for k, v in p.headers.items()}, sort_keys=True))\n";
  const std::string command = "/usr/bin/python3 -c \"" + script + "\" " + std::to_string(broker_port()) + " " + q;
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  EXPECT_EQ(out,
            "{\"traceparent\": \"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\", \"tracestate\": "
            "\"congo=t61rcWkgMzE\", \"x-app\": \"kept\"}\n");
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = q}, d); });
}

}  // namespace
}  // namespace warren::test

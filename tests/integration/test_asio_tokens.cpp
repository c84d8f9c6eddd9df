// Completion tokens on the Asio driver against the real broker (RMQ_PORT, RMQ_CTL): every
// verb through `co_await ... asio::use_awaitable` yielding a Result with the broker's reply
// code and text; publish outcomes; a deferred token launched after its strings are gone;
// use_future from another thread; a plain callback completing on the loop thread; a
// consumer read with `co_await receive` to its end, a push consumer, a receive on another
// executor, and the cancel hand-back counted on the broker; Pool borrow, Session close and
// Rpc call through tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "asio_coroutines.hpp"
#include "support/broker_env.hpp"
#include "warren/asio/async.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;
using asio_driver::AsioDriver;

// The coroutines below name their option structs (written when options owned strings and GCC
// 12 crashed on them inline); tests/install/asio_inline_forms.cpp writes every verb inline.

// Runs a coroutine on a fresh loop until it and every connection it opened are done.
void run(const std::function<asio::awaitable<void>(AsioDriver&)>& body) { run_coroutine(body, 60s); }

// Waits on the loop without blocking it.
asio::awaitable<void> sleep_for(std::chrono::milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(use_awaitable);
}

std::string body_of(const client::Message& m) { return std::string(m.body_text()); }

// messages_ready and messages_unacknowledged of one queue, as rabbitmqctl reports them.
std::string broker_counts(const std::string& queue) {
  auto table = rabbitmqctl("list_queues name messages_ready messages_unacknowledged");
  auto at = table.find(queue + "\t");
  if (at == std::string::npos) return "<no queue " + queue + ">";
  auto line = table.substr(at + queue.size() + 1, table.find('\n', at) - at - queue.size() - 1);
  return line;
}

TEST(AsioTokens, every_verb_through_use_awaitable) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto q = co_await ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(q);
    EXPECT_EQ(q->name.rfind("amq.gen-", 0), 0u) << q->name;
    EXPECT_EQ(q->message_count, 0u);
    const client::ExchangeDeclareOptions direct{.name = "warren-asio-x", .auto_delete = true};
    CO_ASSERT_OK(co_await ch->exchange_declare(direct, use_awaitable));
    const client::ExchangeDeclareOptions fanout{.name = "warren-asio-fan", .type = "fanout", .auto_delete = true};
    CO_ASSERT_OK(co_await ch->exchange_declare(fanout, use_awaitable));
    const client::ExchangeBindOptions x_to_fan{.destination = "warren-asio-fan", .source = "warren-asio-x", .routing_key = "k"};
    CO_ASSERT_OK(co_await ch->exchange_bind(x_to_fan, use_awaitable));
    const client::QueueBindOptions fan_to_q{.queue = q->name, .exchange = "warren-asio-fan"};
    CO_ASSERT_OK(co_await ch->queue_bind(fan_to_q, use_awaitable));
    CO_ASSERT_OK(co_await ch->qos({.prefetch_count = 10}, use_awaitable));
    CO_ASSERT_OK(co_await ch->flow({.active = true}, use_awaitable));
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    // Through both exchanges to the queue, confirmed.
    for (const char* text : {"one", "two", "three"}) {
      auto sent = co_await ch->publish({.exchange = "warren-asio-x", .routing_key = "k"}, client::as_bytes(text), use_awaitable);
      CO_ASSERT_OK(sent);
      EXPECT_EQ(*sent, engine::PublishOutcome::confirmed);
    }
    const client::GetOptions get_one{.queue = q->name};
    auto got = co_await ch->get(get_one, use_awaitable);
    CO_ASSERT_OK(got);
    if (!got->has_value()) {
      ADD_FAILURE() << "the queue was empty";
      co_return;
    }
    EXPECT_EQ(body_of(**got), "one");
    EXPECT_EQ((*got)->message_count(), 2u);
    CO_ASSERT_OK((*got)->ack());
    auto unacked = co_await ch->get(get_one, use_awaitable);
    CO_ASSERT_OK(unacked);
    EXPECT_TRUE(unacked->has_value());
    CO_ASSERT_OK(co_await ch->recover({.requeue = true}, use_awaitable));  // "two" goes back
    CO_ASSERT_OK(co_await ch->exchange_unbind(x_to_fan, use_awaitable));
    CO_ASSERT_OK(co_await ch->queue_unbind(fan_to_q, use_awaitable));
    const client::QueuePurgeOptions purge{.queue = q->name};
    auto purged = co_await ch->queue_purge(purge, use_awaitable);
    CO_ASSERT_OK(purged);
    EXPECT_EQ(*purged, 2u);
    const client::GetOptions get_auto_acked{.queue = q->name, .auto_ack = true};
    auto empty = co_await ch->get(get_auto_acked, use_awaitable);
    CO_ASSERT_OK(empty);
    EXPECT_FALSE(empty->has_value());
    const client::ExchangeDeleteOptions delete_fanout{.name = "warren-asio-fan"}, delete_direct{.name = "warren-asio-x"};
    CO_ASSERT_OK(co_await ch->exchange_delete(delete_fanout, use_awaitable));
    CO_ASSERT_OK(co_await ch->exchange_delete(delete_direct, use_awaitable));
    const client::QueueDeleteOptions delete_q{.queue = q->name};
    auto deleted = co_await ch->queue_delete(delete_q, use_awaitable);
    CO_ASSERT_OK(deleted);
    EXPECT_EQ(*deleted, 0u);

    // A refusal reaches the coroutine whole: code, reply code and the broker's text.
    const client::QueueDeclareOptions check_missing{.name = "warren-asio-no-such-queue", .passive = true};
    auto missing = co_await ch->queue_declare(check_missing, use_awaitable);
    EXPECT_FALSE(missing.ok());
    if (!missing) {
      EXPECT_EQ(missing.error().code, errc::not_found);
      EXPECT_EQ(missing.error().reply_code, 404);
      EXPECT_NE(missing.error().detail.find("warren-asio-no-such-queue"), std::string::npos) << missing.error().detail;
    }
    // The 404 closed that channel: its handle says so, and a fresh one works.
    EXPECT_FALSE(ch->is_open());
    auto after = co_await ch->qos({.prefetch_count = 1}, use_awaitable);
    EXPECT_FALSE(after.ok());
    auto ch2 = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch2);
    CO_ASSERT_OK(co_await ch2->close(use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

TEST(AsioTokens, a_refused_login_reaches_the_coroutine_with_its_reply_code) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(
        driver, *client::parse_url("amqp://guest:wrong@127.0.0.1:" + env("RMQ_PORT") + "/%2f"), use_awaitable);
    EXPECT_FALSE(conn.ok());
    if (conn) co_return;
    EXPECT_EQ(conn.error().code, errc::access_refused);
    EXPECT_EQ(conn.error().reply_code, 403);
  });
}

// A queue that holds one message and nacks the next.
client::QueueDeclareOptions overflowing_queue() {
  return {.exclusive = true, .arguments = {{"x-max-length", std::int32_t{1}}, {"x-overflow", "reject-publish"}}};
}

TEST(AsioTokens, publish_outcomes_confirmed_unroutable_and_nacked) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    // One message fits; the next one overflows and the broker nacks it.
    auto q = co_await ch->queue_declare(overflowing_queue(), use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    auto fits = co_await ch->publish({.routing_key = q->name}, client::as_bytes("fits"), use_awaitable);
    CO_ASSERT_OK(fits);
    EXPECT_EQ(*fits, engine::PublishOutcome::confirmed);
    auto overflows = co_await ch->publish({.routing_key = q->name}, client::as_bytes("overflows"), use_awaitable);
    EXPECT_FALSE(overflows.ok());
    if (!overflows) {
      EXPECT_EQ(overflows.error().code, errc::nacked) << overflows.error().to_string();
    }
    auto lost = co_await ch->publish({.exchange = "amq.direct", .routing_key = "nobody-binds-this", .mandatory = true},
                                     client::as_bytes("lost"), use_awaitable);
    EXPECT_FALSE(lost.ok());
    if (!lost) {
      EXPECT_EQ(lost.error().code, errc::unroutable);
      EXPECT_EQ(lost.error().reply_code, 312);
      EXPECT_NE(lost.error().detail.find("NO_ROUTE"), std::string::npos) << lost.error().detail;
    }
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// Issue 23, item 7: many publishes awaited together. 500 bodies go out at once and the
// coroutine wakes once, when every confirm came; each outcome sits in its body's place.
TEST(AsioTokens, publish_all_awaits_every_confirm_together) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions temporary{.exclusive = true};
    auto q = co_await ch->queue_declare(temporary, use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    std::vector<std::string> texts;
    for (int i = 0; i < 500; ++i) texts.push_back("m" + std::to_string(i));
    std::vector<std::span<const std::byte>> bodies;
    for (const auto& t : texts) bodies.push_back(client::as_bytes(t));
    auto outcomes = co_await ch->publish_all({.routing_key = q->name}, bodies, use_awaitable);
    texts.clear();  // the bodies were copied when it started
    CO_ASSERT_OK(outcomes);
    EXPECT_EQ(outcomes->size(), 500u);
    for (const auto& o : *outcomes) {
      EXPECT_TRUE(o.ok()) << o.error().to_string();
      if (o) {
        EXPECT_EQ(*o, engine::PublishOutcome::confirmed);
      }
    }
    const client::QueueDeclareOptions passive{.name = q->name, .passive = true};
    auto declared = co_await ch->queue_declare(passive, use_awaitable);
    CO_ASSERT_OK(declared);
    EXPECT_EQ(declared->message_count, 500u);
    // An unroutable mandatory one fails in its own place; the others are confirmed.
    std::vector<std::span<const std::byte>> two{client::as_bytes("a"), client::as_bytes("b")};
    auto lost = co_await ch->publish_all({.exchange = "amq.direct", .routing_key = "nobody-binds-this", .mandatory = true},
                                         two, use_awaitable);
    CO_ASSERT_OK(lost);
    EXPECT_EQ(lost->size(), 2u);
    for (const auto& o : *lost) EXPECT_EQ(o.ok() ? std::error_code() : o.error().code, make_error_code(errc::unroutable));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// A deferred operation runs when it is launched, not when it is written: by then the strings
// its options and its publish were made from are gone.
TEST(AsioTokens, a_deferred_token_launched_after_its_strings_are_gone) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    auto make_ops = [&ch] {
      auto name = std::make_unique<std::string>("warren-asio-deferred-" + std::to_string(::getpid()));
      auto body = std::make_unique<std::string>("written before the launch");
      auto declare = ch->queue_declare({.name = *name, .exclusive = true}, asio::experimental::deferred);
      auto publish = ch->publish({.routing_key = *name, .properties = {.content_type = std::string_view("text/plain")}},
                                 client::as_bytes(*body), asio::experimental::deferred);
      name->assign(name->size(), '#');  // scribbled over, then freed
      body->assign(body->size(), '#');
      return std::make_pair(std::move(declare), std::move(publish));
    };
    auto [declare, publish] = make_ops();
    auto q = co_await std::move(declare)(use_awaitable);
    CO_ASSERT_OK(q);
    EXPECT_EQ(q->name, "warren-asio-deferred-" + std::to_string(::getpid()));
    auto sent = co_await std::move(publish)(use_awaitable);
    CO_ASSERT_OK(sent);
    const client::GetOptions get_one{.queue = q->name, .auto_ack = true};
    auto got = co_await ch->get(get_one, use_awaitable);
    CO_ASSERT_OK(got);
    if (!got->has_value()) {
      ADD_FAILURE() << "the deferred publish did not arrive";
      co_return;
    }
    EXPECT_EQ(body_of(**got), "written before the launch");
    EXPECT_EQ((*got)->properties().content_type.value_or("<none>"), "text/plain");
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// A plain callback has no executor of its own: it completes on the connection's loop, so it
// may call the client again (finding 6: it ran on Asio's system executor, another thread).
TEST(AsioTokens, a_plain_callback_completes_on_the_loop_thread) {
  asio::io_context io;
  AsioDriver driver(io);
  std::vector<std::thread::id> seen;
  std::shared_ptr<client::Connection> conn;
  asio_driver::async_connect(driver, url(), {}, [&](Result<std::shared_ptr<client::Connection>> c) {
    seen.push_back(std::this_thread::get_id());
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    conn = *c;
    asio_driver::async_open_channel(*conn, [&](Result<asio_driver::Channel> ch) {
      seen.push_back(std::this_thread::get_id());
      EXPECT_TRUE(ch.ok());
      asio_driver::async_close(*conn, [&](Result<void>) { seen.push_back(std::this_thread::get_id()); });
    });
  });
  io.run();
  ASSERT_EQ(seen.size(), 3u);
  for (auto id : seen) EXPECT_EQ(id, std::this_thread::get_id());
}

// Another thread calls the token forms directly: each starts on the loop thread.
TEST(AsioTokens, use_future_from_another_thread) {
  asio::io_context io;
  AsioDriver driver(io);
  auto guard = asio::make_work_guard(io);
  std::thread loop([&] { io.run(); });
  auto conn = asio_driver::async_connect(driver, url(), {}, asio::use_future).get();
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  auto ch = asio_driver::async_open_channel(*conn, asio::use_future).get();
  ASSERT_TRUE(ch.ok()) << ch.error().to_string();
  auto q = ch->queue_declare({.exclusive = true}, asio::use_future).get();
  ASSERT_TRUE(q.ok()) << q.error().to_string();
  EXPECT_EQ(q->name.rfind("amq.gen-", 0), 0u);
  ASSERT_TRUE(ch->confirm_select(asio::use_future).get().ok());
  std::string body = "from another thread";
  auto sending = ch->publish({.routing_key = q->name}, client::as_bytes(body), asio::use_future);
  body.assign(body.size(), '#');  // the publish has its own copy
  auto sent = sending.get();
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  EXPECT_EQ(*sent, engine::PublishOutcome::confirmed);
  auto got = ch->get({.queue = q->name, .auto_ack = true}, asio::use_future).get();
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(body_of(**got), "from another thread");
  EXPECT_TRUE(asio_driver::async_close(*conn, asio::use_future).get().ok());
  guard.reset();
  // The last references go on the loop thread, where the connection lives.
  asio::post(io, [conn = std::move(*conn), ch = std::move(*ch)]() mutable {});
  loop.join();
}

TEST(AsioTokens, receive_reads_a_stream_and_ends_with_consumer_cancelled_after_cancel) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto q = co_await ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    for (int i = 0; i < 3; ++i)
      CO_ASSERT_OK(co_await ch->publish({.routing_key = q->name}, client::as_bytes("m" + std::to_string(i)), use_awaitable));
    const client::ConsumeOptions subscription{.queue = q->name, .tag = "asio-stream"};
    auto consumer = co_await ch->consume(subscription, use_awaitable);
    CO_ASSERT_OK(consumer);
    EXPECT_EQ(consumer->tag(), "asio-stream");
    for (int i = 0; i < 3; ++i) {
      auto m = co_await consumer->receive(use_awaitable);
      CO_ASSERT_OK(m);
      EXPECT_EQ(body_of(*m), "m" + std::to_string(i));
      EXPECT_EQ(m->consumer_tag(), "asio-stream");
      CO_ASSERT_OK(m->ack());
    }
    // A receive waits (a plain callback on the loop); a second one at the same time is refused.
    std::optional<Result<client::Message>> waiting, second;
    consumer->receive([&](Result<client::Message> r) { waiting = std::move(r); });
    consumer->receive([&](Result<client::Message> r) { second = std::move(r); });
    co_await sleep_for(50ms);
    EXPECT_FALSE(waiting.has_value());
    if (second && !*second) {
      EXPECT_EQ(second->error().code, errc::invalid_argument);
    } else {
      ADD_FAILURE() << "a second receive at once was not refused";
    }
    CO_ASSERT_OK(co_await consumer->cancel(use_awaitable));
    for (int i = 0; i < 100 && !waiting; ++i) co_await sleep_for(10ms);
    EXPECT_TRUE(waiting.has_value() && !waiting->ok() && waiting->error().code == errc::consumer_cancelled);
    // Once ended, every later receive says so at once.
    auto after = co_await consumer->receive(use_awaitable);
    EXPECT_FALSE(after.ok());
    if (!after) {
      EXPECT_EQ(after.error().code, errc::consumer_cancelled);
    }
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// The push form through a token: each delivery reaches the callback as a view, acked there;
// such a consumer is not a stream (receive says so) and cancels through its token.
TEST(AsioTokens, a_push_consumer_through_a_token) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto q = co_await ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(q);
    std::vector<std::string> seen;
    const client::ConsumeOptions subscription{.queue = q->name};
    auto consumer = co_await ch->consume(
        subscription,
        [&](const client::Delivery& d) {
          seen.emplace_back(d.body_text());
          EXPECT_TRUE(d.ack().ok());
        },
        use_awaitable);
    CO_ASSERT_OK(consumer);
    for (const char* text : {"a", "b", "c"}) {
      auto id = ch->publish({.routing_key = q->name}, client::as_bytes(text));  // the fast path
      CO_ASSERT_OK(id);
    }
    for (int i = 0; i < 200 && seen.size() < 3; ++i) co_await sleep_for(5ms);
    EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c"}));
    auto not_a_stream = co_await consumer->receive(use_awaitable);
    EXPECT_FALSE(not_a_stream.ok());
    if (!not_a_stream) {
      EXPECT_EQ(not_a_stream.error().code, errc::invalid_argument);
    }
    CO_ASSERT_OK(co_await consumer->cancel(use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// A receive completes on its handler's own executor (here another io_context's thread), and
// a callback that takes the message by reference may receive again before reading it.
TEST(AsioTokens, receive_completes_on_the_handlers_executor_and_a_callback_may_receive_again_at_once) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto q = co_await ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    for (int i = 0; i < 6; ++i)
      CO_ASSERT_OK(co_await ch->publish({.routing_key = q->name}, client::as_bytes("m" + std::to_string(i)), use_awaitable));
    const client::ConsumeOptions auto_acked{.queue = q->name, .auto_ack = true};
    auto consumer = co_await ch->consume(auto_acked, use_awaitable);
    CO_ASSERT_OK(consumer);

    asio::io_context other;
    auto other_work = asio::make_work_guard(other);
    std::thread other_thread([&] { other.run(); });
    std::promise<std::pair<std::thread::id, std::string>> first;
    auto arrived = first.get_future();
    consumer->receive(asio::bind_executor(other, [&](Result<client::Message> r) {
      first.set_value({std::this_thread::get_id(), r ? body_of(*r) : r.error().to_string()});
    }));
    while (arrived.wait_for(0s) != std::future_status::ready) co_await sleep_for(5ms);
    auto [where, body] = arrived.get();
    EXPECT_EQ(where, other_thread.get_id());
    EXPECT_EQ(body, "m0");
    other_work.reset();
    other_thread.join();

    std::vector<std::string> seen;
    std::function<void()> next = [&] {
      consumer->receive([&](const Result<client::Message>& r) {
        if (!r) return;
        if (seen.size() < 4) next();  // before reading this one: it must stay intact
        seen.push_back(body_of(*r));
      });
    };
    next();
    for (int i = 0; i < 200 && seen.size() < 5; ++i) co_await sleep_for(5ms);
    EXPECT_EQ(seen, (std::vector<std::string>{"m1", "m2", "m3", "m4", "m5"}));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// Publish 10, subscribe with prefetch 10, read 2 without acking them, cancel: the 8 that
// reached the consumer's buffer unread are handed back at once (ready again on the broker),
// the 2 read stay unacknowledged until acked.
TEST(AsioTokens, cancel_hands_back_the_unread_deliveries) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    // Not auto-delete: cancelling its only consumer must not delete it.
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto q = co_await ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    for (int i = 0; i < 10; ++i)
      CO_ASSERT_OK(co_await ch->publish({.routing_key = q->name}, client::as_bytes("m" + std::to_string(i)), use_awaitable));
    const client::ConsumeOptions prefetch_10{.queue = q->name, .prefetch = 10};
    auto consumer = co_await ch->consume(prefetch_10, use_awaitable);
    CO_ASSERT_OK(consumer);
    auto first = co_await consumer->receive(use_awaitable);
    CO_ASSERT_OK(first);
    auto second = co_await consumer->receive(use_awaitable);
    CO_ASSERT_OK(second);
    for (int i = 0; i < 200 && consumer->buffered() < 8; ++i) co_await sleep_for(10ms);
    EXPECT_EQ(consumer->buffered(), 8u);
    CO_ASSERT_OK(co_await consumer->cancel(use_awaitable));
    EXPECT_EQ(consumer->buffered(), 0u);
    std::string counts;
    for (int i = 0; i < 50 && (counts = broker_counts(q->name)) != "8\t2"; ++i) co_await sleep_for(100ms);
    EXPECT_EQ(counts, "8\t2") << "ready, unacknowledged";
    CO_ASSERT_OK(first->ack());
    CO_ASSERT_OK(second->ack());
    // Counted on another channel too: a passive declare's message count.
    auto other = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(other);
    std::optional<Result<client::QueueDeclared>> passive;
    for (int i = 0; i < 50; ++i) {
      const client::QueueDeclareOptions check{.name = q->name, .passive = true};
      passive = co_await other->queue_declare(check, use_awaitable);
      if (!*passive || (*passive)->message_count == 8) break;
      co_await sleep_for(50ms);
    }
    CO_ASSERT_OK(*passive);
    EXPECT_EQ((*passive)->message_count, 8u);
    for (int i = 0; i < 50 && (counts = broker_counts(q->name)) != "8\t0"; ++i) co_await sleep_for(100ms);
    EXPECT_EQ(counts, "8\t0") << "ready, unacknowledged";
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// Issue 23, item 10: a plain channel on a Session's connection through a token, used as any
// asio_driver::Channel (a declare and a confirmed publish).
TEST(AsioTokens, a_sessions_plain_channel_through_a_token) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto session = client::Session::start(driver, url(), {});
    auto ch = co_await asio_driver::async_open_channel(session, use_awaitable);
    CO_ASSERT_OK(ch);
    const client::QueueDeclareOptions temporary{.exclusive = true};
    auto q = co_await ch->queue_declare(temporary, use_awaitable);
    CO_ASSERT_OK(q);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));
    auto sent = co_await ch->publish({.routing_key = q->name}, client::as_bytes("via the session"), use_awaitable);
    CO_ASSERT_OK(sent);
    EXPECT_EQ(*sent, engine::PublishOutcome::confirmed);
    CO_ASSERT_OK(co_await asio_driver::async_close(session, use_awaitable));
  });
}

// Issue 23, item 10: a recovering channel's setup written as a coroutine, with the channel's
// verbs as tokens and options inline. It runs before the first publish leaves (the publish
// waits for it), and a refusal it throws from value() is the Error it carries: reported once
// through on_setup_refused, and with retry_refused_setup off the channel stops there.
TEST(AsioTokens, a_recovering_channels_setup_is_a_coroutine) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    const std::string queue = "warren-asio-setup-" + std::to_string(::getpid());
    auto session = client::Session::start(driver, url(), {});
    int setups = 0;
    auto orders = asio_driver::recovering_channel(*session, [&](asio_driver::Channel ch) -> asio::awaitable<Result<void>> {
      ++setups;
      (co_await ch.queue_declare({.name = queue, .arguments = {{"x-expires", 60000}}}, use_awaitable)).value();
      co_return co_await ch.queue_bind({.queue = queue, .exchange = "amq.topic", .routing_key = "setup.#"}, use_awaitable);
    });
    auto sent = co_await asio_driver::async_publish(
        orders, {.exchange = "amq.topic", .routing_key = "setup.1", .mandatory = true}, "routed by the setup's binding",
        use_awaitable);
    CO_ASSERT_OK(sent);
    EXPECT_EQ(*sent, engine::PublishOutcome::confirmed);
    EXPECT_EQ(setups, 1);
    auto plain = co_await asio_driver::async_open_channel(session, use_awaitable);
    CO_ASSERT_OK(plain);
    auto got = co_await plain->get({.queue = queue, .auto_ack = true}, use_awaitable);
    CO_ASSERT_OK(got);
    EXPECT_TRUE(got->has_value() && (*got)->body_text() == "routed by the setup's binding");

    // The same queue redeclared durable: 406, thrown by value() inside the setup.
    std::vector<std::string> refusals;
    client::SessionOptions strict{.on_setup_refused = [&](const Error& e) { refusals.push_back(e.to_string()); },
                                  .retry_refused_setup = false};
    auto other = client::Session::start(driver, url(), std::move(strict));
    auto refused = asio_driver::recovering_channel(*other, [&](asio_driver::Channel ch) -> asio::awaitable<Result<void>> {
      (co_await ch.queue_declare({.name = queue, .durable = true}, use_awaitable)).value();
      co_return Result<void>{};
    });
    auto not_sent = co_await asio_driver::async_publish(refused, {.routing_key = queue}, "never", use_awaitable);
    EXPECT_FALSE(not_sent.ok());
    if (!not_sent) {
      EXPECT_EQ(not_sent.error().reply_code, 406) << not_sent.error().to_string();
    }
    EXPECT_EQ(refused->status().state, client::RecoveringChannel::State::failed);
    EXPECT_EQ(refusals.size(), 1u);
    EXPECT_NE(refusals.empty() ? std::string::npos : refusals[0].find("inequivalent arg 'durable'"), std::string::npos);
    CO_ASSERT_OK(co_await plain->queue_delete({.queue = queue}, use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(other, use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(session, use_awaitable));
  });
}

TEST(AsioTokens, pool_borrow_session_publish_and_close_and_rpc_call) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto pool = asio_driver::Pool::create(driver, url(), {.size = 1});
    auto lease = co_await pool.borrow(use_awaitable);
    CO_ASSERT_OK(lease);
    EXPECT_TRUE((*lease)->is_open());
    lease->release();
    CO_ASSERT_OK(co_await pool.close(use_awaitable));

    auto session = client::Session::start(driver, url(), {});
    // A recovering channel's publish through a token: taken before the channel is ready
    // (it waits), confirmed once it is; then an unroutable mandatory one comes back as 312.
    auto recovering = session->channel([](client::RecoveringChannel&, client::Callback<void> done) { done({}); });
    auto confirmed = co_await asio_driver::async_publish(recovering, {.routing_key = "warren-asio-unrouted"},
                                                         client::as_bytes("kept"), use_awaitable);
    CO_ASSERT_OK(confirmed);
    EXPECT_EQ(*confirmed, engine::PublishOutcome::confirmed);
    EXPECT_TRUE(recovering->ready());
    auto returned = co_await asio_driver::async_publish(
        recovering, {.routing_key = "warren-asio-no-such-queue", .mandatory = true}, client::as_bytes("lost?"),
        use_awaitable);
    EXPECT_FALSE(returned.ok());
    if (!returned) {
      EXPECT_EQ(returned.error().reply_code, 312) << returned.error().to_string();
    }
    EXPECT_EQ(session->status().state, client::Session::State::connected);
    CO_ASSERT_OK(co_await asio_driver::async_close(session, use_awaitable));

    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto server_ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(server_ch);
    const client::QueueDeclareOptions server_named{.exclusive = true};
    auto requests = co_await server_ch->queue_declare(server_named, use_awaitable);
    CO_ASSERT_OK(requests);
    std::optional<std::string> serving;
    auto server = client::RpcServer::start(
        server_ch->raw(), requests->name, [](const client::Delivery& m) { return "re:" + std::string(m.body_text()); },
        [&](Result<void> r) { serving = r ? "ok" : r.error().to_string(); });
    for (int i = 0; i < 200 && !serving; ++i) co_await sleep_for(10ms);
    EXPECT_EQ(serving.value_or("<none>"), "ok");
    auto client_ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(client_ch);
    auto rpc = co_await asio_driver::RpcClient::async_start(*conn, *client_ch, use_awaitable);
    CO_ASSERT_OK(rpc);
    // With the caller's trace context (issue 24): the reply continues the trace.
    const auto traced = client::TraceContext::new_root();
    auto reply = co_await rpc->call({.routing_key = requests->name, .trace = traced}, client::as_bytes("ping"), use_awaitable);
    CO_ASSERT_OK(reply);
    EXPECT_EQ(body_of(*reply), "re:ping");
    const auto back = reply->trace();
    EXPECT_TRUE(back && back->trace_id == traced.trace_id && back->span_id != traced.span_id);
    auto nobody = co_await rpc->call({.routing_key = "warren-asio-nobody-serves-this", .timeout = 5s},
                                     client::as_bytes("hello?"), use_awaitable);
    EXPECT_FALSE(nobody.ok());
    if (!nobody) {
      EXPECT_EQ(nobody.error().reply_code, 312) << nobody.error().to_string();
    }
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

}  // namespace
}  // namespace warren::test

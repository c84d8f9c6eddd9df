// The messaging layer's Asio forms (warren/messaging/asio.hpp) against the real broker
// (RMQ_PORT, RMQ_CTL), in coroutines on an AsioDriver with use_awaitable: a work queue put
// reaching a worker that retries it once, acks it, and dead-letters another; a direct send to
// an inbox; a send to nobody delivered as errc::unroutable, then answered by a group member; a
// log's appends answering offsets, its tip, a page and a live tail; a backplane's join,
// publish and leave. Then use_future from another thread, and deferred operations launched
// after the strings they were written with are gone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "asio_coroutines.hpp"
#include "support/broker_env.hpp"
#include "warren/asio/channel.hpp"
#include "warren/asio/connection.hpp"
#include "warren/messaging/asio.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;
using asio_driver::AsioDriver;
namespace msg = warren::messaging;

// GCC 12 copies a braced temporary owning a std::string bitwise inside a co_await expression
// (see warren/asio/connection.hpp): every such option, and every std::function, is named first.

// A prefix of the test's own, so its queues are its own.
std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return "wasio" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

std::shared_ptr<msg::Messaging> make_layer(std::shared_ptr<client::Connection> conn) {
  // Classic queues: these tests are about the forms, and a quorum declare is slower.
  const msg::Options options{.prefix = fresh_prefix(), .queue_type = "classic"};
  auto layer = msg::Messaging::create(std::move(conn), options);
  if (!layer) throw std::runtime_error(layer.error().to_string());
  return *layer;
}

// Runs a coroutine on a fresh loop until it and every connection it opened are done.
void run(const std::function<asio::awaitable<void>(AsioDriver&)>& body) { run_coroutine(body, 30s); }

// Polls `done` on the loop (the callbacks that make it true run there) for up to `limit`.
template <class Predicate>
asio::awaitable<bool> wait_until(Predicate done, std::chrono::milliseconds limit = 5000ms) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    timer.expires_after(5ms);
    co_await timer.async_wait(use_awaitable);
  }
  co_return true;
}

// The ready messages of `queue`, by a passive declare.
asio::awaitable<std::uint32_t> depth(const asio_driver::Channel& ch, std::string queue) {
  const client::QueueDeclareOptions passive{.name = std::move(queue), .passive = true};
  auto q = co_await ch.queue_declare(passive, use_awaitable);
  if (!q) throw std::runtime_error("passive declare: " + q.error().to_string());
  co_return q->message_count;
}

// Deletes what a test left on the broker: `queues`, then the layer's exchanges (nothing is
// bound to them by then).
asio::awaitable<void> drop(const asio_driver::Channel& ch, const msg::Messaging& layer, std::vector<std::string> queues) {
  for (auto& name : queues) {
    const client::QueueDeleteOptions o{.queue = std::move(name)};
    (void)co_await ch.queue_delete(o, use_awaitable);
  }
  for (auto name : {layer.direct_exchange(), layer.backplane_exchange()}) {
    const client::ExchangeDeleteOptions o{.name = std::move(name)};
    (void)co_await ch.exchange_delete(o, use_awaitable);
  }
}

std::shared_ptr<msg::WorkQueue> make_queue(const std::shared_ptr<msg::Messaging>& layer, msg::WorkQueueOptions options) {
  auto queue = msg::WorkQueue::create(layer, std::move(options));
  if (!queue) throw std::runtime_error(queue.error().to_string());
  return *queue;
}

std::vector<std::string> queues_of(const msg::WorkQueue& q) {
  std::vector<std::string> names{q.queue(), q.dead_letter_queue()};
  for (auto level : msg::delay_levels(q.options().backoff)) names.push_back(q.retry_queue(level));
  return names;
}

std::string header_text(const client::Message& m, std::string_view key) {
  auto headers = m.headers();
  if (!headers) return "<bad headers>";
  const auto* v = headers->find(key);
  if (!v) return "<none>";
  if (const auto* s = std::get_if<std::string>(&v->value)) return *s;
  return "<not text>";
}

TEST(MessagingAsio, a_put_reaches_a_worker_that_retries_it_then_acks_and_a_dead_letter_lands_in_the_dlq) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    auto layer = make_layer(*conn);
    auto queue = make_queue(layer, {.name = "jobs", .attempts = 3, .backoff = {.base = 50ms, .max = 50ms}});
    CO_ASSERT_OK(co_await msg::async_declare(queue, use_awaitable));

    std::deque<msg::WorkItem> items;
    const std::function<void(msg::WorkItem)> on_item = [&items](msg::WorkItem item) { items.push_back(std::move(item)); };
    auto worker = co_await msg::async_consume(queue, {.prefetch = 1}, on_item, use_awaitable);
    CO_ASSERT_OK(worker);
    EXPECT_TRUE((*worker)->healthy());

    const msg::PutOptions job{.body = "job-1", .message_id = "id-1"};
    CO_ASSERT_OK(co_await msg::async_put(queue, job, use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return items.size() == 1; }));
    auto first = std::move(items.front());
    items.pop_front();
    EXPECT_EQ(first.attempt(), 1u);
    EXPECT_EQ(first.body(), "job-1");
    EXPECT_EQ(first.message_id(), "id-1");

    // A retry completes with where it went: the one 50 ms level, then back to the worker.
    const msg::RetryOptions failed{.error = "boom"};
    auto retried = co_await msg::async_retry(std::move(first), failed, use_awaitable);
    CO_ASSERT_OK(retried);
    EXPECT_FALSE(retried->dead_lettered);
    EXPECT_EQ(retried->delay, 50ms);
    CO_ASSERT_TRUE(co_await wait_until([&] { return items.size() == 1; }));
    auto second = std::move(items.front());
    items.pop_front();
    EXPECT_EQ(second.attempt(), 2u);
    EXPECT_EQ(second.message_id(), "id-1");
    EXPECT_TRUE(second.done().ok());  // the ack

    const msg::PutOptions bad{.body = "job-2", .message_id = "id-2"};
    CO_ASSERT_OK(co_await msg::async_put(queue, bad, use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return items.size() == 1; }));
    auto doomed = std::move(items.front());
    items.pop_front();
    EXPECT_EQ(doomed.message_id(), "id-2");
    const std::string reason = "bad input";
    const msg::RetryOptions no_more{};
    CO_ASSERT_OK(co_await msg::async_dead_letter(std::move(doomed), reason, no_more, use_awaitable));

    // The cancel closes the worker's channel: an unacked message would be back in the queue.
    CO_ASSERT_OK(co_await msg::async_cancel(*worker, use_awaitable));
    EXPECT_TRUE((*worker)->over());
    const auto ready = co_await depth(*ch, queue->queue());
    const auto dead_letters = co_await depth(*ch, queue->dead_letter_queue());
    EXPECT_EQ(ready, 0u);
    EXPECT_EQ(dead_letters, 1u);
    const client::GetOptions get_dead{.queue = queue->dead_letter_queue(), .auto_ack = true};
    auto dead = co_await ch->get(get_dead, use_awaitable);
    CO_ASSERT_OK(dead);
    CO_ASSERT_TRUE(dead->has_value());
    EXPECT_EQ((*dead)->body_text(), "job-2");
    EXPECT_EQ(header_text(**dead, msg::reason_header), "bad input");

    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    const auto left = queues_of(*queue);
    co_await drop(*ch, *layer, left);
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

TEST(MessagingAsio, a_send_reaches_an_inbox_with_its_reply_to_and_correlation_id) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto layer = make_layer(*conn);
    std::vector<std::string> got;
    const msg::OnDirect on_message = [&got](const client::Delivery& d) {
      const auto& p = d.properties();
      got.push_back(std::string(d.body_text()) + "|" + std::string(p.reply_to.value_or("-")) + "|" +
                    std::string(p.correlation_id.value_or("-")));
    };
    auto inbox = co_await msg::async_open_inbox(layer, {.prefetch = 5}, on_message, use_awaitable);
    CO_ASSERT_OK(inbox);
    EXPECT_TRUE((*inbox)->healthy());
    const std::string address = (*inbox)->address();
    const msg::SendOptions hello{.address = address, .body = "hello", .reply_to = address, .correlation_id = "c-1"};
    CO_ASSERT_OK(co_await msg::async_send(layer, hello, use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return !got.empty(); }));
    EXPECT_EQ(got, (std::vector<std::string>{"hello|" + address + "|c-1"}));
    CO_ASSERT_OK(co_await msg::async_close(*inbox, use_awaitable));
    EXPECT_FALSE((*inbox)->healthy());
    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    co_await drop(*ch, *layer, std::vector<std::string>());
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// The broker's refusal arrives as the Result, code and reply code, not as an exception.
TEST(MessagingAsio, a_send_to_nobody_completes_with_unroutable_until_a_group_member_listens) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto layer = make_layer(*conn);
    const msg::SendOptions to_nobody{.address = "billing", .body = "anyone?"};
    auto refused = co_await msg::async_send(layer, to_nobody, use_awaitable);
    CO_ASSERT_TRUE(!refused.ok());
    EXPECT_EQ(refused.error().code, make_error_code(errc::unroutable)) << refused.error().to_string();
    EXPECT_EQ(refused.error().reply_code, 312) << refused.error().to_string();

    std::vector<std::string> got;
    const msg::OnDirect on_message = [&got](const client::Delivery& d) { got.emplace_back(d.body_text()); };
    const msg::GroupOptions billing{.address = "billing"};
    auto member = co_await msg::async_join_group(layer, billing, on_message, use_awaitable);
    CO_ASSERT_OK(member);
    const msg::SendOptions to_billing{.address = "billing", .body = "invoice"};
    CO_ASSERT_OK(co_await msg::async_send(layer, to_billing, use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return !got.empty(); }));
    EXPECT_EQ(got, (std::vector<std::string>{"invoice"}));
    CO_ASSERT_OK(co_await msg::async_cancel(*member, use_awaitable));
    EXPECT_TRUE((*member)->over());

    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const std::vector<std::string> left{layer->name("group.billing")};
    co_await drop(*ch, *layer, left);
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

TEST(MessagingAsio, appends_answer_offsets_a_read_pages_them_and_a_tail_follows) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto layer = make_layer(*conn);
    auto created = msg::Log::create(layer, {.name = "events", .idle = 300ms, .empty_wait = 300ms});
    CO_ASSERT_OK(created);
    auto log = *created;
    CO_ASSERT_OK(co_await msg::async_declare(log, use_awaitable));
    auto empty = co_await msg::async_tip(log, use_awaitable);
    CO_ASSERT_OK(empty);
    EXPECT_FALSE(empty->has_value());

    std::vector<std::uint64_t> offsets;
    for (const std::string body : {"a", "b", "c"}) {
      auto offset = co_await msg::async_append(log, body, use_awaitable);
      CO_ASSERT_OK(offset);
      offsets.push_back(*offset);
    }
    EXPECT_LT(offsets[0], offsets[1]);
    EXPECT_LT(offsets[1], offsets[2]);
    auto tip = co_await msg::async_tip(log, use_awaitable);
    CO_ASSERT_OK(tip);
    EXPECT_EQ(tip->value_or(0), offsets[2]);

    const msg::ReadOptions from_first{.from = {.position = "first"}};
    auto page = co_await msg::async_read(log, from_first, use_awaitable);
    CO_ASSERT_OK(page);
    EXPECT_TRUE(page->complete);
    EXPECT_EQ(page->tip.value_or(0), offsets[2]);
    std::vector<std::string> entries;
    for (const auto& e : page->entries) entries.push_back(std::string(e.message.body_text()) + "@" + std::to_string(e.offset));
    EXPECT_EQ(entries, (std::vector<std::string>{"a@" + std::to_string(offsets[0]), "b@" + std::to_string(offsets[1]),
                                                 "c@" + std::to_string(offsets[2])}));

    // A tail from the second entry sees it, the third, and what is appended after it began.
    std::vector<std::string> followed;
    bool ended = false;
    const std::function<void(const client::Delivery&, std::uint64_t)> on_entry =
        [&followed](const client::Delivery& d, std::uint64_t offset) {
          followed.push_back(std::string(d.body_text()) + "@" + std::to_string(offset));
        };
    const std::function<void(const Error&)> on_end = [&ended](const Error&) { ended = true; };
    const msg::From from_b{.offset = offsets[1]};
    auto tail = co_await msg::async_follow(log, from_b, on_entry, on_end, use_awaitable);
    CO_ASSERT_OK(tail);
    CO_ASSERT_TRUE(co_await wait_until([&] { return followed.size() == 2; }));
    const std::string d = "d";
    auto d_offset = co_await msg::async_append(log, d, use_awaitable);
    CO_ASSERT_OK(d_offset);
    CO_ASSERT_TRUE(co_await wait_until([&] { return followed.size() == 3; }));
    EXPECT_EQ(followed, (std::vector<std::string>{"b@" + std::to_string(offsets[1]), "c@" + std::to_string(offsets[2]),
                                                  "d@" + std::to_string(*d_offset)}));
    CO_ASSERT_OK(co_await msg::async_close(*tail, use_awaitable));
    EXPECT_FALSE((*tail)->active());

    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const std::vector<std::string> left{log->queue()};
    co_await drop(*ch, *layer, left);
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

TEST(MessagingAsio, a_backplane_joins_publishes_and_leaves_rooms) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto layer = make_layer(*conn);
    std::vector<std::string> events;
    const msg::OnRoomEvent on_event = [&events](std::string_view room, const client::Delivery& d) {
      events.push_back(std::string(room) + ":" + std::string(d.body_text()));
    };
    auto bp = co_await msg::async_start_backplane(layer, {.prefetch = 10}, on_event, use_awaitable);
    CO_ASSERT_OK(bp);
    EXPECT_TRUE((*bp)->healthy());
    const std::string lobby = "lobby", hall = "hall";
    CO_ASSERT_OK(co_await msg::async_join(*bp, lobby, use_awaitable));
    EXPECT_EQ((*bp)->rooms(), (std::set<std::string>{"lobby"}));
    CO_ASSERT_OK(co_await msg::async_publish(*bp, lobby, "hello", use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return events.size() == 1; }));

    CO_ASSERT_OK(co_await msg::async_leave(*bp, lobby, use_awaitable));
    EXPECT_TRUE((*bp)->rooms().empty());
    // Published after the leave: it goes nowhere, without an error. The marker, published
    // after it on the same channel to the same queue, proves it is not merely late.
    CO_ASSERT_OK(co_await msg::async_publish(*bp, lobby, "after leaving", use_awaitable));
    CO_ASSERT_OK(co_await msg::async_join(*bp, hall, use_awaitable));
    CO_ASSERT_OK(co_await msg::async_publish(*bp, hall, "marker", use_awaitable));
    CO_ASSERT_TRUE(co_await wait_until([&] { return events.size() >= 2; }));
    EXPECT_EQ(events, (std::vector<std::string>{"lobby:hello", "hall:marker"}));
    CO_ASSERT_OK(co_await msg::async_close(*bp, use_awaitable));
    EXPECT_FALSE((*bp)->healthy());

    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    const std::vector<std::string> left{(*bp)->queue()};
    co_await drop(*ch, *layer, left);
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

// Another thread calls the forms: each starts on the loop thread, and so do the handlers.
TEST(MessagingAsio, use_future_from_another_thread) {
  asio::io_context io;
  AsioDriver driver(io);
  auto guard = asio::make_work_guard(io);
  std::thread loop([&] { io.run(); });
  auto conn = asio_driver::async_connect(driver, url(), {}, asio::use_future).get();
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  auto layer = make_layer(*conn);

  std::promise<std::string> received;
  std::atomic<bool> on_loop_thread{false};
  const msg::OnDirect on_message = [&](const client::Delivery& d) {
    on_loop_thread = std::this_thread::get_id() == loop.get_id();
    received.set_value(std::string(d.body_text()));
  };
  auto inbox = msg::async_open_inbox(layer, {}, on_message, asio::use_future).get();
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  std::string body = "from another thread";
  const msg::SendOptions send{.address = (*inbox)->address(), .body = body};
  auto sending = msg::async_send(layer, send, asio::use_future);
  body.assign(body.size(), '#');  // the send has its own copy
  auto sent = sending.get();
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  auto arrived = received.get_future();
  ASSERT_EQ(arrived.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(arrived.get(), "from another thread");
  EXPECT_TRUE(on_loop_thread);

  EXPECT_TRUE(msg::async_close(*inbox, asio::use_future).get().ok());
  EXPECT_TRUE(msg::async_close(layer, asio::use_future).get().ok());
  auto ch = asio_driver::async_open_channel(*conn, asio::use_future).get();
  ASSERT_TRUE(ch.ok()) << ch.error().to_string();
  for (const auto& name : {layer->direct_exchange(), layer->backplane_exchange()})
    (void)ch->exchange_delete({.name = name}, asio::use_future).get();
  EXPECT_TRUE(asio_driver::async_close(*conn, asio::use_future).get().ok());
  // The last references go on the loop thread, where the connection lives: posted while the
  // guard still holds the loop, or run() could return first and leave them to ~io_context,
  // after the driver is gone.
  asio::post(io, [conn = std::move(*conn), layer = std::move(layer), inbox = std::move(*inbox), ch = std::move(*ch)]() mutable {});
  guard.reset();
  loop.join();
}

// A deferred operation runs when it is launched, not when it is written: by then the strings
// its options were made from are scribbled over and freed.
TEST(MessagingAsio, deferred_operations_launched_after_their_strings_are_gone) {
  run([](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    auto layer = make_layer(*conn);
    auto queue = make_queue(layer, {.name = "deferred"});
    std::vector<std::string> direct, room_events;
    const msg::OnDirect on_message = [&direct](const client::Delivery& d) {
      direct.push_back(std::string(d.body_text()) + "|" + std::string(d.properties().correlation_id.value_or("-")));
    };
    auto inbox = co_await msg::async_open_inbox(layer, {}, on_message, use_awaitable);
    CO_ASSERT_OK(inbox);
    const msg::OnRoomEvent on_event = [&room_events](std::string_view room, const client::Delivery& d) {
      room_events.push_back(std::string(room) + ":" + std::string(d.body_text()));
    };
    auto bp = co_await msg::async_start_backplane(layer, {}, on_event, use_awaitable);
    CO_ASSERT_OK(bp);
    const std::string room = "deferred-room";
    CO_ASSERT_OK(co_await msg::async_join(*bp, room, use_awaitable));

    auto make_ops = [&] {
      auto body = std::make_unique<std::string>("written before the launch");
      auto id = std::make_unique<std::string>("deferred-id");
      auto address = std::make_unique<std::string>((*inbox)->address());
      auto room_name = std::make_unique<std::string>(room);
      auto put = msg::async_put(queue, {.body = *body, .message_id = *id}, asio::experimental::deferred);
      auto send = msg::async_send(layer, {.address = *address, .body = *body, .correlation_id = *id},
                                  asio::experimental::deferred);
      auto publish = msg::async_publish(*bp, *room_name, *body, asio::experimental::deferred);
      for (auto* s : {body.get(), id.get(), address.get(), room_name.get()}) s->assign(s->size(), '#');
      return std::make_tuple(std::move(put), std::move(send), std::move(publish));
    };
    auto [put, send, publish] = make_ops();
    CO_ASSERT_OK(co_await std::move(put)(use_awaitable));
    CO_ASSERT_OK(co_await std::move(send)(use_awaitable));
    CO_ASSERT_OK(co_await std::move(publish)(use_awaitable));

    const client::GetOptions get_job{.queue = queue->queue(), .auto_ack = true};
    auto job = co_await ch->get(get_job, use_awaitable);
    CO_ASSERT_OK(job);
    CO_ASSERT_TRUE(job->has_value());
    EXPECT_EQ((*job)->body_text(), "written before the launch");
    EXPECT_EQ((*job)->properties().message_id.value_or("<none>"), "deferred-id");
    CO_ASSERT_TRUE(co_await wait_until([&] { return !direct.empty() && !room_events.empty(); }));
    EXPECT_EQ(direct, (std::vector<std::string>{"written before the launch|deferred-id"}));
    EXPECT_EQ(room_events, (std::vector<std::string>{"deferred-room:written before the launch"}));

    CO_ASSERT_OK(co_await msg::async_close(layer, use_awaitable));
    const auto left = queues_of(*queue);
    co_await drop(*ch, *layer, left);
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  });
}

}  // namespace
}  // namespace warren::test

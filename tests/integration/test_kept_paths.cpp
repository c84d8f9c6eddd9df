// Every path that starts a verb later than the call that wrote it, against the broker: Asio
// tokens launched with experimental::deferred after the caller's storage is gone — the
// connect's options, every channel verb, a publish, and the messaging layer's forms — with the
// names on the heap and the arguments and headers in each form a caller writes (empty and
// non-empty, inline and borrowed). The storage is overwritten, then freed, before the launch:
// a view that escaped reads '#' (seen as a wrong name in any build) or freed memory (a
// heap-use-after-free: scripts/test.sh runs this suite under AddressSanitizer too).
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/experimental/deferred.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <deque>
#include <memory>
#include <string>

#include "asio_coroutines.hpp"
#include "warren/asio/async.hpp"
#include "warren/messaging/asio.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using asio::experimental::deferred;
using asio::use_awaitable;
using asio_driver::AsioDriver;

enum class Form { empty_inline, inline_list, empty_borrowed, borrowed };
const char* name(Form f) {
  switch (f) {
    case Form::empty_inline: return "empty-inline";
    case Form::inline_list: return "inline";
    case Form::empty_borrowed: return "empty-borrowed";
    default: return "borrowed";
  }
}

// What a caller builds its options from, dropped right after the calls: texts on the heap
// (longer than a small string), a table to borrow, a value for an inline entry.
class Storage {
 public:
  explicit Storage(Form form) : form_(form) {
    if (form == Form::borrowed) table_->set("x-kept", std::string("a-borrowed-value-longer-than-sso"));
  }
  std::string_view text(const std::string& value) { return *texts_.emplace_back(std::make_unique<std::string>(value)); }
  // The arguments or headers in this storage's form; `key` and an int value when there is one.
  client::Arguments arguments(const char* key, std::int32_t value) {
    switch (form_) {
      case Form::empty_inline: return {};
      case Form::inline_list: return {{key, value}};
      case Form::empty_borrowed:
      case Form::borrowed:
        if (form_ == Form::borrowed && !table_->find(key)) table_->set(key, value);
        return *table_;
    }
    return {};
  }
  // Overwritten, then freed.
  void die() {
    for (auto& t : texts_) t->assign(t->size(), '#');
    table_->set("x-written-after-the-call", 1);
    texts_.clear();
    table_.reset();
  }

 private:
  Form form_;
  std::deque<std::unique_ptr<std::string>> texts_;
  std::unique_ptr<wire::FieldTable> table_ = std::make_unique<wire::FieldTable>();
};

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(use_awaitable);
}

class KeptPaths : public ::testing::TestWithParam<Form> {};

TEST_P(KeptPaths, the_connect_and_every_channel_verb_launched_after_their_storage_is_gone) {
  const Form form = GetParam();
  const std::string p = "warren-kept-" + std::string(name(form)) + "-" + std::to_string(::getpid());
  run_coroutine([&](AsioDriver& driver) -> asio::awaitable<void> {
    auto connect = [&] {
      Storage s(form);
      auto op = asio_driver::async_connect(
          driver, url(), {.engine = {.connection_name = s.text(p + "-connection"), .client_properties = s.arguments("x-app", 1)}},
          deferred);
      s.die();
      return op;
    }();
    auto conn = co_await std::move(connect)(use_awaitable);
    CO_ASSERT_OK(conn);
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    CO_ASSERT_OK(co_await ch->confirm_select(use_awaitable));

    // Written now, launched below: every name and table dies in between.
    Storage s(form);
    auto x_declare = ch->exchange_declare({.name = s.text(p + ".x"), .type = s.text("fanout"), .auto_delete = true,
                                           .arguments = s.arguments("x-unused", 1)}, deferred);
    auto q_declare = ch->queue_declare({.name = s.text(p + ".q"), .exclusive = true,
                                        .arguments = s.arguments("x-max-length", 100)}, deferred);
    auto bind = ch->queue_bind({.queue = s.text(p + ".q"), .exchange = s.text(p + ".x"), .routing_key = s.text("rk"),
                                .arguments = s.arguments("x-unused", 1)}, deferred);
    const wire::FieldTable headers{{"x-header", std::string("a-header-value-longer-than-sso")}};
    auto publish = ch->publish({.exchange = s.text(p + ".x"), .routing_key = s.text("rk"),
                                .properties = {.headers = wire::TableRef(headers), .message_id = s.text(p + "-id")}},
                               client::as_bytes(s.text(p + "-body")), deferred);
    auto consume = ch->consume({.queue = s.text(p + ".q"), .tag = s.text(p + "-tag"), .arguments = s.arguments("x-priority", 3)},
                               deferred);
    s.die();

    CO_ASSERT_OK(co_await std::move(x_declare)(use_awaitable));
    auto q = co_await std::move(q_declare)(use_awaitable);
    CO_ASSERT_OK(q);
    EXPECT_EQ(q->name, p + ".q");
    CO_ASSERT_OK(co_await std::move(bind)(use_awaitable));
    CO_ASSERT_OK(co_await std::move(publish)(use_awaitable));
    auto consumer = co_await std::move(consume)(use_awaitable);
    CO_ASSERT_OK(consumer);
    EXPECT_EQ(consumer->tag(), p + "-tag");
    auto m = co_await consumer->receive(use_awaitable);
    CO_ASSERT_OK(m);
    EXPECT_EQ(m->body_text(), p + "-body");
    EXPECT_EQ(m->properties().message_id.value_or(""), p + "-id");
    CO_ASSERT_OK(m->ack());

    Storage t(form);
    auto unbind = ch->queue_unbind({.queue = t.text(p + ".q"), .exchange = t.text(p + ".x"), .routing_key = t.text("rk"),
                                    .arguments = t.arguments("x-unused", 1)}, deferred);
    auto purge = ch->queue_purge({.queue = t.text(p + ".q")}, deferred);
    auto get = ch->get({.queue = t.text(p + ".q")}, deferred);
    auto q_delete = ch->queue_delete({.queue = t.text(p + ".q")}, deferred);
    auto x_delete = ch->exchange_delete({.name = t.text(p + ".x")}, deferred);
    t.die();
    CO_ASSERT_OK(co_await consumer->cancel(use_awaitable));
    CO_ASSERT_OK(co_await std::move(unbind)(use_awaitable));
    auto purged = co_await std::move(purge)(use_awaitable);
    CO_ASSERT_OK(purged);
    EXPECT_EQ(*purged, 0u);
    auto got = co_await std::move(get)(use_awaitable);
    CO_ASSERT_OK(got);
    EXPECT_FALSE(got->has_value());
    CO_ASSERT_OK(co_await std::move(q_delete)(use_awaitable));
    CO_ASSERT_OK(co_await std::move(x_delete)(use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  }, 60s);
}

TEST_P(KeptPaths, the_messaging_layers_forms_launched_after_their_storage_is_gone) {
  const Form form = GetParam();
  const std::string p = "warren-kept-" + std::string(name(form)) + "-" + std::to_string(::getpid());
  run_coroutine([&](AsioDriver& driver) -> asio::awaitable<void> {
    auto conn = co_await asio_driver::async_connect(driver, url(), use_awaitable);
    CO_ASSERT_OK(conn);
    auto layer = messaging::Messaging::create(*conn, {.prefix = p});
    CO_ASSERT_OK(layer);
    auto jobs = messaging::WorkQueue::create(*layer, {.name = "jobs", .attempts = 2, .backoff = {.base = 100ms, .max = 100ms}});
    CO_ASSERT_OK(jobs);
    auto log = messaging::Log::create(*layer, {.name = "events"});
    CO_ASSERT_OK(log);
    std::deque<messaging::WorkItem> items;
    std::deque<std::string> members, tail;

    Storage s(form);
    auto put = messaging::async_put(*jobs, {.body = s.text(p + "-job"), .headers = s.arguments("x-put", 1),
                                            .message_id = s.text(p + "-job-id")}, deferred);
    auto join = messaging::async_join_group(*layer, {.address = s.text(p + "-billing")},
                                            [&](const client::Delivery& d) { members.emplace_back(d.body_text()); }, deferred);
    auto send = messaging::async_send(*layer, {.address = s.text(p + "-billing"), .body = s.text(p + "-sent"),
                                               .correlation_id = s.text(p + "-correlation"), .headers = s.arguments("x-sent", 1)},
                                      deferred);
    auto append = messaging::async_append(*log, s.text(p + "-entry"), deferred);
    auto read = messaging::async_read(*log, {.from = {.position = s.text("first")}, .max_entries = 10}, deferred);
    auto follow = messaging::async_follow(*log, {.position = s.text("first")},
                                          [&](const client::Delivery& d, std::uint64_t) { tail.emplace_back(d.body_text()); },
                                          nullptr, deferred);
    s.die();

    CO_ASSERT_OK(co_await std::move(put)(use_awaitable));
    auto worker = co_await messaging::async_consume(*jobs, {.prefetch = 1},
                                                    [&](messaging::WorkItem item) { items.push_back(std::move(item)); },
                                                    use_awaitable);
    CO_ASSERT_OK(worker);
    for (int i = 0; i < 500 && items.empty(); ++i) co_await sleep_for(10ms);
    CO_ASSERT_TRUE(!items.empty());
    EXPECT_EQ(items.front().message_id(), p + "-job-id");
    EXPECT_EQ(items.front().body(), p + "-job");

    Storage r(form);
    auto retry = messaging::async_retry(std::move(items.front()), {.error = r.text(p + "-error"), .headers = r.arguments("x-retry", 1)},
                                        deferred);
    items.pop_front();
    r.die();
    auto retried = co_await std::move(retry)(use_awaitable);
    CO_ASSERT_OK(retried);
    for (int i = 0; i < 500 && items.empty(); ++i) co_await sleep_for(10ms);
    CO_ASSERT_TRUE(!items.empty());
    EXPECT_EQ(items.front().attempt(), 2u);
    EXPECT_EQ(items.front().message_id(), p + "-job-id");
    CO_ASSERT_OK(items.front().done());

    auto member = co_await std::move(join)(use_awaitable);
    CO_ASSERT_OK(member);
    CO_ASSERT_OK(co_await std::move(send)(use_awaitable));
    auto offset = co_await std::move(append)(use_awaitable);
    CO_ASSERT_OK(offset);
    auto page = co_await std::move(read)(use_awaitable);
    CO_ASSERT_OK(page);
    CO_ASSERT_TRUE(!page->entries.empty());
    EXPECT_EQ(page->entries.back().message.body_text(), p + "-entry");
    auto tailing = co_await std::move(follow)(use_awaitable);
    CO_ASSERT_OK(tailing);
    for (int i = 0; i < 500 && (members.empty() || tail.empty()); ++i) co_await sleep_for(10ms);
    EXPECT_EQ(members, std::deque<std::string>{p + "-sent"});
    EXPECT_EQ(tail, std::deque<std::string>{p + "-entry"});

    CO_ASSERT_OK(co_await messaging::async_close(*tailing, use_awaitable));
    CO_ASSERT_OK(co_await messaging::async_cancel(*member, use_awaitable));
    CO_ASSERT_OK(co_await messaging::async_cancel(*worker, use_awaitable));
    auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
    CO_ASSERT_OK(ch);
    for (const std::string& q : {std::string(".jobs"), std::string(".jobs.dlq"), std::string(".jobs.retry.100"),
                                std::string(".log.events"), ".group." + p + "-billing"})
      (void)co_await ch->queue_delete({.queue = p + q}, use_awaitable);
    CO_ASSERT_OK(co_await messaging::async_close(*layer, use_awaitable));
    CO_ASSERT_OK(co_await asio_driver::async_close(*conn, use_awaitable));
  }, 60s);
}

INSTANTIATE_TEST_SUITE_P(Forms, KeptPaths,
                         ::testing::Values(Form::empty_inline, Form::inline_list, Form::empty_borrowed, Form::borrowed),
                         [](const auto& info) {
                           std::string n = name(info.param);
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace warren::test

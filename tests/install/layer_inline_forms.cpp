// The layers with their options written inline, as docs/client.md, docs/messaging.md and
// docs/pipeline.md write them: `Pool::create(driver, url, {.size = 2})`, `WorkQueue::create(layer,
// {.name = "orders", .attempts = 5})`, and every Asio form of the messaging layer with its
// options braced inside the `co_await`, ClientOptions in `async_connect` too. GCC 12 warned
// (-Wmissing-field-initializers) on the first kind, and copied the second kind bitwise and
// destroyed it twice when it owned memory (the program aborted in free()). scripts/test.sh builds
// this against the installed package with g++ and clang++-14 (-Wall -Wextra -Werror) and runs it
// against the broker; it says what failed and exits 1 on any step that does not do what it
// should. Usage: layer_inline_forms URL
#include <asio/co_spawn.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <exception>
#include <stdexcept>
#include <string>

#include <warren/asio/async.hpp>
#include <warren/client/pool.hpp>
#include <warren/client/session.hpp>
#include <warren/messaging/asio.hpp>
#include <warren/pipeline/queue_pipeline.hpp>

using namespace warren;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

void expect(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("unexpected: ") + what);
}

// Runs the loop's other work until `ready()`, for at most 10 s.
template <class Ready>
asio::awaitable<void> until(Ready ready, const char* what) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < 1000 && !ready(); ++i) {
    timer.expires_after(10ms);
    co_await timer.async_wait(use_awaitable);
  }
  expect(ready(), what);
}

asio::awaitable<void> all_inline(asio_driver::AsioDriver& driver, client::ConnectionUrl url) {
  const std::string prefix = "warren-layers-" + std::to_string(std::rand() % 100000) + "-a-prefix-longer-than-sso";
  const std::string origin = prefix + "-origin";  // a header's text value is named: a view of it is kept
  // ClientOptions inline in the co_await, with strings it owns.
  auto conn = (co_await asio_driver::async_connect(
                   driver, url, {.engine = {.connection_name = prefix + "-connection", .heartbeat_s = 30}}, use_awaitable))
                  .value();

  // The layers' options inline, as the docs write them.
  auto pool = client::Pool::create(driver, url, {.size = 2});
  auto session = client::Session::start(driver, url, {.max_waiting_publishes = 100});
  auto layer = messaging::Messaging::create(session, {.prefix = prefix, .queue_type = "quorum"}).value();
  auto orders = messaging::WorkQueue::create(layer, {.name = "orders", .attempts = 5}).value();
  auto audit = messaging::Log::create(layer, {.name = "audit"}).value();

  // The work queue: a put, a worker, a retry, each with options braced in the co_await.
  (co_await messaging::async_put(orders, {.body = "job-1", .headers = {{"x-origin", origin}},
                                          .message_id = prefix + "-job-1"},
                                 use_awaitable))
      .value();
  std::deque<messaging::WorkItem> items;
  auto worker = (co_await messaging::async_consume(orders, {.prefetch = 2},
                                                   [&](messaging::WorkItem item) { items.push_back(std::move(item)); },
                                                   use_awaitable))
                    .value();
  co_await until([&] { return !items.empty(); }, "the worker is handed the put");
  expect(items.front().message_id() == prefix + "-job-1", "the put's message_id");
  auto retried = (co_await messaging::async_retry(std::move(items.front()),
                                                  {.error = prefix + "-an-error-longer-than-sso",
                                                   .headers = {{"x-why", origin}}},
                                                  use_awaitable))
                     .value();
  items.pop_front();
  expect(!retried.dead_lettered, "a first retry waits in a level");

  // Direct: an inbox, a group and a send with its headers braced inline.
  std::deque<std::string> inbox_got, group_got;
  auto inbox = (co_await messaging::async_open_inbox(
                    layer, {.prefetch = 5}, [&](const client::Delivery& d) { inbox_got.emplace_back(d.body_text()); },
                    use_awaitable))
                   .value();
  auto member = (co_await messaging::async_join_group(
                     layer, {.address = prefix + "-billing", .prefetch = 2},
                     [&](const client::Delivery& d) { group_got.emplace_back(d.body_text()); }, use_awaitable))
                    .value();
  (co_await messaging::async_send(layer, {.address = inbox->address(), .body = "to-inbox", .headers = {{"x-k", origin}}},
                                  use_awaitable))
      .value();
  (co_await messaging::async_send(layer, {.address = prefix + "-billing", .body = "to-group"}, use_awaitable)).value();
  co_await until([&] { return !inbox_got.empty() && !group_got.empty(); }, "the inbox and the group receive");

  // The log: an append and a read from a position braced inline.
  const auto offset = (co_await messaging::async_append(audit, prefix + "-entry", use_awaitable)).value();
  auto page = (co_await messaging::async_read(audit, {.from = {.position = "first"}, .max_entries = 10}, use_awaitable)).value();
  expect(!page.entries.empty() && page.entries.back().offset == offset, "the read ends at the append");

  // The pipeline, as docs/pipeline.md starts one (on a plain connection).
  auto ch = (co_await asio_driver::async_open_channel(*conn, use_awaitable)).value();
  (co_await ch.queue_declare({.name = prefix + ".in", .exclusive = true}, use_awaitable)).value();
  (co_await ch.queue_declare({.name = prefix + ".out", .exclusive = true}, use_awaitable)).value();
  bool ready = false, stopped = false;
  auto pipe = pipeline::QueuePipeline::start(
      conn,
      {.core = {.name = prefix + "-pipe", .concurrency = 2},
       .source = {.queue = prefix + ".in"},
       .destination = pipeline::DestinationOptions{.routing_key = prefix + ".out"},
       .on_stopped = [&](const std::optional<std::string>&) { stopped = true; }},
      {pipeline::Stage::sync([](pipeline::Record& r) { r.body += "!"; })}, [&](Result<void> r) { ready = r.ok(); });
  co_await until([&] { return ready; }, "the pipeline starts");
  (co_await ch.publish({.routing_key = prefix + ".in"}, "record", use_awaitable)).value();
  std::optional<client::Message> out;
  co_await until([&] {
    if (!out) ch.raw().get({.queue = prefix + ".out", .auto_ack = true}, [&](Result<std::optional<client::Message>> r) {
      if (r && *r) out = std::move(**r);
    });
    return out.has_value();
  }, "the pipeline's output arrives");
  expect(out->body_text() == "record!", "the stage's output");
  pipe->drain(5s, [](Result<void>) {});
  co_await until([&] { return stopped; }, "the pipeline drains");

  (co_await messaging::async_cancel(member, use_awaitable)).value();
  (co_await messaging::async_close(inbox, use_awaitable)).value();
  (co_await messaging::async_cancel(worker, use_awaitable)).value();
  for (const char* q : {".orders", ".orders.dlq"}) (void)co_await ch.queue_delete({.queue = prefix + q}, use_awaitable);
  (void)co_await ch.queue_delete({.queue = prefix + ".group." + prefix + "-billing"}, use_awaitable);
  (void)co_await ch.queue_delete({.queue = prefix + ".log.audit"}, use_awaitable);
  (co_await messaging::async_close(layer, use_awaitable)).value();
  session->close([](Result<void>) {});
  pool->close([](Result<void>) {});
  (co_await asio_driver::async_close(*conn, use_awaitable)).value();
  std::printf("every layer with inline options: ok\n");
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) return std::fprintf(stderr, "usage: layer_inline_forms URL\n"), 2;
  std::srand(static_cast<unsigned>(std::time(nullptr)));
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  auto url = client::parse_url(argv[1]).value();
  asio::co_spawn(io, all_inline(driver, url), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
} catch (const std::exception& e) {
  return std::fprintf(stderr, "layer_inline_forms: %s\n", e.what()), 1;
}

// The messaging layer's rates against one broker, on the libuv driver (bench/messaging.sh runs
// it against a fresh broker and prints the table):
// - work queue: MESSAGES put (confirmed, 500 in flight), then consumed to done() by 1 worker
//   and, after another put, by 4 workers (each a subscription on a channel of its own, prefetch
//   50, on one connection); a quorum queue, as the layer declares it by default;
// - log: APPENDS appends one after another (each a confirm plus the read-back of its offset),
//   then the whole log read from "first" in pages of 1,000.
// One line per measure: "<what> <count> <seconds> <per second>".
//   messaging-bench PORT [MESSAGES] [APPENDS]
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "warren/messaging/log.hpp"
#include "warren/messaging/work_queue.hpp"
#include "warren/uv/uv_driver.hpp"

using namespace warren;
using Clock = std::chrono::steady_clock;

namespace {

bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = std::chrono::seconds(300)) {
  const auto give_up = Clock::now() + limit;
  while (!done() && Clock::now() < give_up) uv_run(uv_default_loop(), UV_RUN_ONCE);
  return done();
}

void report(const char* what, std::uint64_t count, Clock::time_point started) {
  const double s = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("%s %llu %.3f %.0f\n", what, static_cast<unsigned long long>(count), s, static_cast<double>(count) / s);
  std::fflush(stdout);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "messaging-bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s PORT [MESSAGES] [APPENDS]\n", argv[0]), 2;
  const std::string port = argv[1];
  const std::uint64_t messages = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20000;
  const std::uint64_t appends = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1000;
  auto url = client::parse_url("amqp://guest:guest@127.0.0.1:" + port + "/%2f");
  if (!url) die(url.error().to_string());
  uv::UvDriver driver(uv_default_loop());
  std::optional<Result<void>> ready;
  auto conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { ready.emplace(std::move(r)); });
  if (!run_until([&] { return ready.has_value(); }) || !*ready) die("cannot connect");
  auto layer = messaging::Messaging::create(conn, {.prefix = "warren-bench"});
  if (!layer) die(layer.error().to_string());
  auto queue = messaging::WorkQueue::create(*layer, {.name = "jobs"});
  if (!queue) die(queue.error().to_string());
  auto q = *queue;
  const std::string body(64, 'x');

  auto put_all = [&] {
    std::uint64_t sent = 0, confirmed = 0;
    const auto started = Clock::now();
    std::function<void()> more = [&] {
      while (sent < messages && sent - confirmed < 500) {
        ++sent;
        q->put({.body = body}, [&](Result<void> r) {
          if (!r) die("put: " + r.error().to_string());
          ++confirmed;
          more();
        });
      }
    };
    more();
    if (!run_until([&] { return confirmed == messages; })) die("put did not finish");
    report("work-put", messages, started);
  };
  auto work_all = [&](int workers, const char* what) {
    std::uint64_t done = 0;
    std::vector<std::shared_ptr<messaging::Subscription>> subs;
    const auto started = Clock::now();
    for (int w = 0; w < workers; ++w)
      q->consume({.prefetch = 50},
                 [&](messaging::WorkItem item) {
                   if (auto ok = item.done(); !ok) die("done: " + ok.error().to_string());
                   ++done;
                 },
                 [&](Result<std::shared_ptr<messaging::Subscription>> s) {
                   if (!s) die("consume: " + s.error().to_string());
                   subs.push_back(*s);
                 });
    if (!run_until([&] { return done >= messages; })) die("work did not finish");
    report(what, messages, started);
    std::uint64_t cancelled = 0;
    for (auto& s : subs) s->cancel([&](Result<void>) { ++cancelled; });
    run_until([&] { return cancelled == subs.size(); });
  };
  put_all();
  work_all(1, "work-1-worker");
  put_all();
  work_all(4, "work-4-workers");

  auto created = messaging::Log::create(*layer, {.name = "bench"});
  if (!created) die(created.error().to_string());
  auto log = *created;
  {
    std::uint64_t appended = 0;
    const auto started = Clock::now();
    std::function<void()> next = [&] {
      log->append(body, [&](Result<std::uint64_t> r) {
        if (!r) die("append: " + r.error().to_string());
        if (++appended < appends) next();
      });
    };
    next();
    if (!run_until([&] { return appended == appends; })) die("append did not finish");
    report("log-append", appends, started);
  }
  {
    std::uint64_t read = 0;
    bool complete = false;
    const auto started = Clock::now();
    std::function<void(std::optional<std::uint64_t>)> page = [&](std::optional<std::uint64_t> from) {
      messaging::ReadOptions o{.from = from ? messaging::From{.offset = *from} : messaging::From{.position = "first"}};
      log->read(o, [&](Result<messaging::Page> p) {
        if (!p) die("read: " + p.error().to_string());
        read += p->entries.size();
        if (p->complete || p->entries.empty()) return (void)(complete = true);
        page(p->entries.back().offset + 1);
      });
    };
    page(std::nullopt);
    if (!run_until([&] { return complete; })) die("read did not finish");
    report("log-read", read, started);
  }
  // Leave nothing behind on the broker.
  std::optional<Result<client::Channel>> ch;
  conn->open_channel([&](Result<client::Channel> c) { ch.emplace(std::move(c)); });
  run_until([&] { return ch.has_value(); });
  if (*ch) {
    std::vector<std::string> names{q->queue(), q->dead_letter_queue(), log->queue()};
    for (auto level : messaging::delay_levels(q->options().backoff)) names.push_back(q->retry_queue(level));
    std::size_t deleted = 0;
    for (const auto& n : names) (**ch).queue_delete({.queue = n}, [&](Result<std::uint32_t>) { ++deleted; });
    run_until([&] { return deleted == names.size(); });
  }
  bool closed = false;
  conn->close([&](Result<void>) { closed = true; });
  run_until([&] { return closed; });
  return 0;
}

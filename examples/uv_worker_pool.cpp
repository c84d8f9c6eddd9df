// A worker pool: the loop thread takes each delivery as an owned Message (Delivery::take) and
// queues it; four std::threads process messages and ack them from their own threads
// (Message::ack hands the ack to the loop). The prefetch (10) bounds what the broker leaves
// unacked, so all 200 messages arrive only if the workers' acks reach it.
// Usage: uv_worker_pool [URL]   (else $WARREN_URL, else amqp://guest:guest@127.0.0.1:5672/%2f)
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <warren/client/connection.hpp>
#include <warren/uv/uv_driver.hpp>

using namespace warren;

namespace {

constexpr int total = 200;
constexpr int worker_count = 4;

// Messages from the loop thread to the workers. pop() waits, and returns nothing once the
// queue is closed and empty.
class WorkQueue {
 public:
  void push(client::Message m) {
    {
      std::lock_guard lock(mutex_);
      messages_.push_back(std::move(m));
    }
    ready_.notify_one();
  }
  std::optional<client::Message> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !messages_.empty(); });
    if (messages_.empty()) return std::nullopt;
    auto m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<client::Message> messages_;
  bool closed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const char* text = argc > 1 ? argv[1] : std::getenv("WARREN_URL");
  auto url = client::parse_url(text ? text : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;

  uv::UvDriver driver(uv_default_loop());
  std::shared_ptr<client::Connection> conn;
  client::Consumer consumer;
  WorkQueue work;
  int confirmed = 0;
  std::atomic<int> acked{0};
  std::atomic<bool> failed{false};
  // On the loop thread only: report the first failure and close, which ends the loop.
  auto fail = [&](const Error& e) {
    if (!failed.exchange(true)) std::fprintf(stderr, "uv_worker_pool: %s\n", e.to_string().c_str());
    if (conn) conn->close({});
  };
  // On the loop thread: every publish confirmed and every message acked.
  auto maybe_done = [&] {
    if (confirmed == total && acked == total) conn->close({});
  };

  std::vector<std::thread> workers;
  for (int w = 0; w < worker_count; ++w)
    workers.emplace_back([&, w] {
      while (auto m = work.pop()) {
        // The work: here, check the body is what was published.
        const bool expected = m->body_text().rfind("job ", 0) == 0;
        auto r = expected ? m->ack() : m->nack({.requeue = false});
        if (!r || !expected) {
          Error e = r ? make_error(errc::invalid_argument, "worker " + std::to_string(w) + ": unexpected body") : r.error();
          driver.post([&fail, e] { fail(e); });  // the connection is the loop's: fail there
          continue;
        }
        // Every ack was handed to the loop before this post, so they go out before the close.
        if (++acked == total) driver.post(maybe_done);
      }
    });

  // Not done within 30 s: a failure.
  auto watchdog = driver.timer([&] { fail(make_error(errc::timeout, "not done within 30 s")); });
  watchdog->arm(driver.now() + std::chrono::seconds(30));

  conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) {
    if (!r) return fail(r.error());
    conn->open_channel([&](Result<client::Channel> ch) {
      if (!ch) return fail(ch.error());
      ch->confirm_select([&](Result<void> r) {
        if (!r) fail(r.error());
      });
      ch->queue_declare({.exclusive = true}, [&, ch = *ch](Result<client::QueueDeclared> q) {
        if (!q) return fail(q.error());
        for (int i = 0; i < total; ++i)
          ch.publish({.routing_key = q->name}, "job " + std::to_string(i),
                     [&](Result<engine::PublishOutcome> r) {
                       if (!r) return fail(r.error());
                       ++confirmed;
                       maybe_done();
                     });
        ch.consume(
            {.queue = q->name, .prefetch = 10},
            [&](const client::Delivery& d) { work.push(d.take()); },  // an owned copy, for another thread
            [&](Result<client::Consumer> c) {
              if (!c) return fail(c.error());
              consumer = std::move(*c);
            });
      });
    });
  });
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);  // returns once the connection is closed

  work.close();
  for (auto& t : workers) t.join();
  std::printf("%d confirmed, %d processed and acked by %d worker threads\n", confirmed, acked.load(), worker_count);
  return !failed && confirmed == total && acked == total ? 0 : 1;
}

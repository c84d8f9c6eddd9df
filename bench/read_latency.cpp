// One message at a time, where read batching must cost nothing (issue 37): bench/compare.sh's
// latency-by-size section runs it with --batching both on each driver.
//   bench-read-latency --port P --queue Q --mode rpc|prefetch1|get|stream --size B --count N
//                      [--driver uv|asio] [--batching default|off|both] [--rate R]
// rpc:       N calls one after another over direct reply-to to `warren rpc serve --queue Q`
//            (its reply is the request upper-cased: B bytes each way); each call's round trip.
// prefetch1: N messages already in Q, consumed with a prefetch of 1 and an ack each: the
//            next is sent only after the ack, so every one is one read.
// get:       N messages already in Q, taken with basic.get one after another.
// stream:    a paced stream of N messages to each consumer, R a second (default 200), from a
//            producer connection of the same process, the send time in each body's first 8
//            bytes; a message's latency is its publish to its delivery callback. Each consumer
//            has a connection and an exclusive queue of its own (Q is not used), prefetch 500
//            and a multiple ack every 100, as `warren perf -q 500 -A 100`.
// both:      a connection at default settings and one with batching off take turns, 100 at a
//            time, until each has done N (prefetch1: Q holds 2N). A stream's two consumers run
//            at the same time instead, their messages half a period apart: each is paced, so
//            neither waits behind the other's.
// Prints one line of JSON per connection:
//   {"mode","batching","size","count","seconds","rate","latency_us":{"p50","p99"}}
// (latency: a call's round trip, the time from asking to a get's answer, or from one delivery
// to the next within a turn; rate: 1 / the mean of those).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>
#include <string>

#include "histogram.hpp"
#include "warren/asio/asio_driver.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/rpc.hpp"
#include "warren/client/url.hpp"
#include "warren/uv/uv_driver.hpp"

namespace {

using namespace warren;
using Clock = std::chrono::steady_clock;

struct Args {
  int port = 5672;
  std::string queue, mode, driver = "uv", batching = "default";
  std::size_t size = 64;
  std::uint64_t count = 0;
  double rate = 200;  // stream: messages a second to each consumer
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench-read-latency: %s\n", why.c_str());
  std::exit(1);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--port") a.port = std::atoi(v.c_str());
    else if (k == "--queue") a.queue = v;
    else if (k == "--mode") a.mode = v;
    else if (k == "--size") a.size = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--count") a.count = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--driver") a.driver = v;
    else if (k == "--batching") a.batching = v;
    else if (k == "--rate") a.rate = std::strtod(v.c_str(), nullptr);
    else die("unknown option " + k);
  }
  if (a.queue.empty() || a.count == 0 || (a.mode != "rpc" && a.mode != "prefetch1" && a.mode != "get" && a.mode != "stream") ||
      (a.driver != "uv" && a.driver != "asio") || (a.batching != "default" && a.batching != "off" && a.batching != "both") ||
      !(a.rate > 0) || (a.mode == "stream" && a.size < 8))
    die("usage: --port P --queue Q --mode rpc|prefetch1|get|stream --size B --count N [--driver uv|asio] "
        "[--batching default|off|both] [--rate R] (stream: B of 8 or more)");
  return a;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

client::ConnectionUrl broker_url(const Args& a) {
  auto url = client::parse_url("amqp://guest:guest@127.0.0.1:" + std::to_string(a.port) + "/%2f");
  if (!url) die("url: " + url.error().to_string());
  return *url;
}

// One connection's line of JSON (the header's format).
void print_line(const Args& a, bool batching_off, std::uint64_t count, double seconds, double rate,
                const cli::Histogram& latency) {
  std::printf("{\"mode\":\"%s\",\"batching\":\"%s\",\"size\":%zu,\"count\":%llu,\"seconds\":%.6f,\"rate\":%.1f,"
              "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f}}\n",
              a.mode.c_str(), batching_off ? "off" : "default", a.size, static_cast<unsigned long long>(count), seconds, rate,
              static_cast<double>(latency.quantile_ns(0.5)) / 1000.0, static_cast<double>(latency.quantile_ns(0.99)) / 1000.0);
}

// The connections --batching asks for: default, off, or both in that order.
template <class T>
std::vector<T*> chosen(const Args& a, T& with_default, T& with_off) {
  std::vector<T*> out;
  if (a.batching != "off") out.push_back(&with_default);
  if (a.batching != "default") out.push_back(&with_off);
  return out;
}

// Connects with read batching at default or off, opens a channel and hands it to `then`; any
// error ends the program. `conn` is the caller's member: it holds the connection.
void connect_channel(client::Driver& driver, const Args& a, bool batching_off, std::shared_ptr<client::Connection>& conn,
                     std::function<void(client::Channel)> then) {
  client::ClientOptions o;
  if (batching_off) o.read_batching = {};
  conn = client::Connection::connect(driver, broker_url(a), o, [&conn, then = std::move(then)](Result<void> r) {
    if (!r) die("connect: " + r.error().to_string());
    conn->open_channel([then](Result<client::Channel> ch) {
      if (!ch) die("channel: " + ch.error().to_string());
      then(*ch);
    });
  });
}

// One connection's side of the run: connects, then does blocks of N one at a time when told,
// recording each, and closes at the end. Two of them (default and batching off) take turns in
// one process with --batching both, so both see the same machine: this 2-core host places the
// broker's and the client's threads differently from one process to the next, and one
// process's rate moved by 25% between runs, more than batching may cost.
class Run {
 public:
  Run(client::Driver& driver, const Args& a, bool batching_off) : driver_(driver), a_(a), off_(batching_off) {}

  void start(std::function<void()> ready) {
    ready_ = std::move(ready);
    connect_channel(driver_, a_, off_, conn_, [this](client::Channel ch) {
      ch_ = ch;
      if (a_.mode != "rpc") return ready_();
      rpc_ = client::RpcClient::start(ch_, [this](Result<void> r) {
        if (!r) die("rpc: " + r.error().to_string());
        body_.assign(a_.size, 'r');
        ready_();
      });
    });
  }
  // N more, then `done`.
  void block(std::uint64_t n, std::function<void()> done) {
    block_end_ = done_ + n;
    in_block_ = 0;
    block_done_ = std::move(done);
    if (a_.mode == "rpc") return call();
    if (a_.mode == "prefetch1") return consume();
    next_get();
  }
  void close() {
    rpc_.reset();
    conn_->close([](Result<void>) {});
  }
  void print() const {
    const double seconds = static_cast<double>(busy_ns_) / 1e9;
    print_line(a_, off_, done_, seconds, static_cast<double>(latency_.total()) / seconds, latency_);
  }
  std::uint64_t done() const { return done_; }

 private:
  void call() {
    const auto sent = Clock::now();
    rpc_->call({.routing_key = a_.queue, .timeout = std::chrono::seconds(10)}, body_, [this, sent](Result<client::Message> reply) {
      if (!reply) die("call: " + reply.error().to_string());
      if (reply->body().size() != a_.size) die("a reply of " + std::to_string(reply->body().size()) + " bytes");
      record(Clock::now() - sent);
      ++done_;
      if (done_ < block_end_) return call();
      end_block();
    });
  }
  // A prefetch of 1: the next is sent only after the ack. The block's last message is kept
  // unacked until the cancel is confirmed, so nothing is in flight to this consumer when the
  // other connection takes its turn; the first of each block waits for the subscription and is
  // not counted as an interval.
  void consume() {
    ch_.consume({.queue = a_.queue, .prefetch = 1},
                [this](const client::Delivery& d) {
                  const auto now = Clock::now();
                  if (in_block_++ > 0) record(now - last_);
                  last_ = now;
                  ++done_;
                  if (done_ < block_end_) {
                    (void)d.ack();
                    return;
                  }
                  held_ = d.take();
                  consumer_.cancel([this](Result<void>) {
                    consumer_ = client::Consumer{};
                    (void)held_.ack();
                    held_ = client::Message{};
                    end_block();
                  });
                },
                [this](Result<client::Consumer> c) {
                  if (!c) die("consume: " + c.error().to_string());
                  consumer_ = std::move(*c);
                });
  }
  void next_get() {
    const auto asked = Clock::now();
    ch_.get({.queue = a_.queue, .auto_ack = true}, [this, asked](Result<std::optional<client::Message>> m) {
      if (!m) die("get: " + m.error().to_string());
      if (!*m) die("the queue ran out after " + std::to_string(done_));
      record(Clock::now() - asked);
      ++done_;
      if (done_ < block_end_) return next_get();
      end_block();
    });
  }
  void record(Clock::duration d) {
    const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    latency_.record(ns);
    busy_ns_ += ns;
  }
  void end_block() {
    auto done = std::move(block_done_);
    done();
  }

  client::Driver& driver_;
  const Args& a_;
  const bool off_;
  std::function<void()> ready_, block_done_;
  std::shared_ptr<client::Connection> conn_;
  client::Channel ch_;
  std::shared_ptr<client::RpcClient> rpc_;
  client::Consumer consumer_;
  client::Message held_;
  std::string body_;
  cli::Histogram latency_;
  std::uint64_t done_ = 0, block_end_ = 0, in_block_ = 0, busy_ns_ = 0;
  Clock::time_point last_;
};

// The runs in turn, blocks of 100, until each has done N; then both close and print.
class Turns {
 public:
  Turns(std::vector<Run*> runs, std::uint64_t count) : runs_(std::move(runs)), count_(count) {}
  void start() { start_next(0); }

 private:
  static constexpr std::uint64_t kBlock = 100;
  void start_next(std::size_t i) {
    if (i == runs_.size()) return next();
    runs_[i]->start([this, i] { start_next(i + 1); });
  }
  void next() {
    Run* run = runs_[turn_++ % runs_.size()];
    if (run->done() >= count_) {
      for (Run* r : runs_) r->close();
      return;
    }
    run->block(std::min(kBlock, count_ - run->done()), [this] { next(); });
  }
  std::vector<Run*> runs_;
  std::uint64_t count_;
  std::uint64_t turn_ = 0;
};

// stream: one consumer, on a connection and an exclusive queue of its own.
class StreamConsumer {
 public:
  StreamConsumer(client::Driver& driver, const Args& a, bool batching_off) : driver_(driver), a_(a), off_(batching_off) {}

  void start(std::function<void()> ready, std::function<void()> done) {
    ready_ = std::move(ready);
    done_ = std::move(done);
    connect_channel(driver_, a_, off_, conn_, [this](client::Channel ch) {
      ch_ = ch;
      ch_.queue_declare({.exclusive = true, .auto_delete = true}, [this](Result<client::QueueDeclared> q) {
        if (!q) die("queue.declare: " + q.error().to_string());
        queue_ = q->name;
        ch_.consume({.queue = queue_, .prefetch = 500}, [this](const client::Delivery& d) { on_delivery(d); },
                    [this](Result<client::Consumer> c) {
                      if (!c) die("consume: " + c.error().to_string());
                      consumer_ = std::move(*c);
                      ready_();
                    });
      });
    });
  }
  const std::string& queue() const { return queue_; }
  void close() {
    consumer_ = client::Consumer{};
    conn_->close([](Result<void>) {});
  }
  void print(double seconds) const {
    print_line(a_, off_, received_, seconds, static_cast<double>(received_) / seconds, latency_);
  }

 private:
  void on_delivery(const client::Delivery& d) {
    if (received_ == a_.count) return;
    const auto now = now_ns();
    std::uint64_t sent = 0;
    if (d.body().size() >= 8) std::memcpy(&sent, d.body().data(), 8);
    if (now >= sent) latency_.record(now - sent);
    ++received_;
    if (++unacked_ == 100 || received_ == a_.count) {
      if (auto r = d.ack({.multiple = true}); !r.ok()) die("ack: " + r.error().to_string());
      unacked_ = 0;
    }
    if (received_ == a_.count) done_();
  }

  client::Driver& driver_;
  const Args& a_;
  const bool off_;
  std::function<void()> ready_, done_;
  std::shared_ptr<client::Connection> conn_;
  client::Channel ch_;
  client::Consumer consumer_;
  std::string queue_;
  cli::Histogram latency_;
  std::uint64_t received_ = 0, unacked_ = 0;
};

// stream: the producer, pacing each consumer's messages from the start; the second
// consumer's half a period after the first's.
class StreamRun {
 public:
  StreamRun(client::Driver& driver, const Args& a, std::vector<StreamConsumer*> consumers)
      : driver_(driver), a_(a), consumers_(std::move(consumers)), sent_(consumers_.size(), 0), body_(a.size, 's') {}

  void start() {
    conn_ = client::Connection::connect(driver_, broker_url(a_), {}, [this](Result<void> r) {
      if (!r) die("connect: " + r.error().to_string());
      conn_->open_channel([this](Result<client::Channel> ch) {
        if (!ch) die("channel: " + ch.error().to_string());
        ch_ = *ch;
        start_consumer(0);
      });
    });
  }
  double seconds() const { return std::chrono::duration<double>(ended_ - started_).count(); }

 private:
  void start_consumer(std::size_t i) {
    if (i == consumers_.size()) {
      started_ = Clock::now();
      tick_ = driver_.timer([this] { tick(); });
      return tick();
    }
    consumers_[i]->start([this, i] { start_consumer(i + 1); }, [this] { consumer_done(); });
  }
  // Every millisecond: what each consumer's pace says is due by now.
  void tick() {
    const double s = std::chrono::duration<double>(Clock::now() - started_).count();
    for (std::size_t i = 0; i < consumers_.size(); ++i) {
      const double offset = static_cast<double>(i) / static_cast<double>(consumers_.size());
      const auto due = std::min<std::uint64_t>(a_.count, static_cast<std::uint64_t>(std::max(0.0, std::floor(s * a_.rate - offset) + 1)));
      while (sent_[i] < due) {
        const std::uint64_t t = now_ns();
        std::memcpy(body_.data(), &t, 8);
        if (auto r = ch_.publish({.routing_key = consumers_[i]->queue()}, client::as_bytes(body_)); !r.ok())
          die("publish: " + r.error().to_string());
        ++sent_[i];
      }
    }
    bool all_sent = true;
    for (auto n : sent_) all_sent = all_sent && n == a_.count;
    if (!all_sent) tick_->arm(driver_.now() + std::chrono::milliseconds(1));
  }
  void consumer_done() {
    if (++done_ < consumers_.size()) return;
    ended_ = Clock::now();
    tick_->cancel();
    for (auto* c : consumers_) c->close();
    conn_->close([](Result<void>) {});
  }

  client::Driver& driver_;
  const Args& a_;
  std::vector<StreamConsumer*> consumers_;
  std::vector<std::uint64_t> sent_;
  std::string body_;
  std::shared_ptr<client::Connection> conn_;
  client::Channel ch_;
  std::unique_ptr<client::Timer> tick_;
  std::size_t done_ = 0;
  Clock::time_point started_, ended_;
};

void run_stream(client::Driver& driver, const Args& a, const std::function<void()>& loop) {
  StreamConsumer with_default(driver, a, false), with_off(driver, a, true);
  const auto consumers = chosen(a, with_default, with_off);
  StreamRun run(driver, a, consumers);
  run.start();
  loop();
  for (auto* c : consumers) c->print(run.seconds());
}

void run_all(client::Driver& driver, const Args& a, const std::function<void()>& loop) {
  if (a.mode == "stream") return run_stream(driver, a, loop);
  Run with_default(driver, a, false), with_off(driver, a, true);
  const auto runs = chosen(a, with_default, with_off);
  Turns turns(runs, a.count);
  turns.start();
  loop();
  for (Run* r : runs) r->print();
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.driver == "uv") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    {
      uv::UvDriver driver(&loop);
      run_all(driver, a, [&] { uv_run(&loop, UV_RUN_DEFAULT); });
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
  }
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  run_all(driver, a, [&] { io.run(); });
  return 0;
}

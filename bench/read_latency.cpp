// One message at a time, where read batching must cost nothing (issue 37): bench/compare.sh's
// latency-by-size section runs it at default settings and with batching off, on both drivers.
//   bench-read-latency --port P --queue Q --mode rpc|prefetch1|get --size B --count N
//                      [--driver uv|asio] [--batching default|off]
// rpc:       N calls one after another over direct reply-to to `warren rpc serve --queue Q`
//            (its reply is the request upper-cased: B bytes each way); each call's round trip.
// prefetch1: N messages already in Q, consumed with a prefetch of 1 and an ack each: the
//            next is sent only after the ack, so every one is one read.
// get:       N messages already in Q, taken with basic.get one after another.
// Prints one line of JSON: {"mode","size","count","seconds","rate","latency_us":{"p50","p99"}}
// (latency: a call's round trip, or the time from one message's arrival to the next's).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
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
    else die("unknown option " + k);
  }
  if (a.queue.empty() || a.count == 0 || (a.mode != "rpc" && a.mode != "prefetch1" && a.mode != "get") ||
      (a.driver != "uv" && a.driver != "asio") || (a.batching != "default" && a.batching != "off"))
    die("usage: --port P --queue Q --mode rpc|prefetch1|get --size B --count N [--driver uv|asio] [--batching default|off]");
  return a;
}

// The run: connects, does N one at a time, records each, then closes.
class Run {
 public:
  Run(client::Driver& driver, const Args& a) : driver_(driver), a_(a) {}

  void start() {
    auto url = client::parse_url("amqp://guest:guest@127.0.0.1:" + std::to_string(a_.port) + "/%2f");
    client::ClientOptions o;
    if (a_.batching == "off") o.read_batching = {};
    conn_ = client::Connection::connect(driver_, *url, o, [this](Result<void> r) {
      if (!r) die("connect: " + r.error().to_string());
      conn_->open_channel([this](Result<client::Channel> ch) {
        if (!ch) die("channel: " + ch.error().to_string());
        ch_ = *ch;
        began_ = Clock::now();
        if (a_.mode == "rpc") return start_rpc();
        if (a_.mode == "prefetch1") return start_prefetch1();
        next_get();
      });
    });
  }
  void print() const {
    const double seconds = std::chrono::duration<double>(ended_ - began_).count();
    std::printf("{\"mode\":\"%s\",\"size\":%zu,\"count\":%llu,\"seconds\":%.6f,\"rate\":%.1f,\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f}}\n",
                a_.mode.c_str(), a_.size, static_cast<unsigned long long>(done_), seconds, static_cast<double>(done_) / seconds,
                static_cast<double>(latency_.quantile_ns(0.5)) / 1000.0, static_cast<double>(latency_.quantile_ns(0.99)) / 1000.0);
  }

 private:
  void start_rpc() {
    rpc_ = client::RpcClient::start(ch_, [this](Result<void> r) {
      if (!r) die("rpc: " + r.error().to_string());
      body_.assign(a_.size, 'r');
      call();
    });
  }
  void call() {
    const auto sent = Clock::now();
    rpc_->call({.routing_key = a_.queue, .timeout = std::chrono::seconds(10)}, body_, [this, sent](Result<client::Message> reply) {
      if (!reply) die("call: " + reply.error().to_string());
      if (reply->body().size() != a_.size) die("a reply of " + std::to_string(reply->body().size()) + " bytes");
      record(Clock::now() - sent);
      if (done_ < a_.count) return call();
      end();
    });
  }
  void start_prefetch1() {
    last_ = Clock::now();
    ch_.consume({.queue = a_.queue, .prefetch = 1},
                [this](const client::Delivery& d) {
                  (void)d.ack();
                  arrived();
                },
                [this](Result<client::Consumer> c) {
                  if (!c) die("consume: " + c.error().to_string());
                  consumer_ = std::move(*c);
                });
  }
  void next_get() {
    last_ = Clock::now();
    ch_.get({.queue = a_.queue, .auto_ack = true}, [this](Result<std::optional<client::Message>> m) {
      if (!m) die("get: " + m.error().to_string());
      if (!*m) die("the queue ran out after " + std::to_string(done_));
      arrived();
      if (done_ < a_.count) next_get();
    });
  }
  // One message in: the time since the last one (or since asking), and the end after N.
  void arrived() {
    const auto now = Clock::now();
    record(now - last_);
    last_ = now;
    if (done_ == a_.count) end();
  }
  void record(Clock::duration d) {
    latency_.record(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
    ++done_;
  }
  void end() {
    ended_ = Clock::now();
    consumer_ = client::Consumer{};
    rpc_.reset();
    conn_->close([](Result<void>) {});
  }

  client::Driver& driver_;
  const Args& a_;
  std::shared_ptr<client::Connection> conn_;
  client::Channel ch_;
  std::shared_ptr<client::RpcClient> rpc_;
  client::Consumer consumer_;
  std::string body_;
  cli::Histogram latency_;
  std::uint64_t done_ = 0;
  Clock::time_point began_, ended_, last_;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.driver == "uv") {
    uv_loop_t loop;
    uv_loop_init(&loop);
    {
      uv::UvDriver driver(&loop);
      Run run(driver, a);
      run.start();
      uv_run(&loop, UV_RUN_DEFAULT);
      run.print();
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
  }
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  Run run(driver, a);
  run.start();
  io.run();
  run.print();
  return 0;
}

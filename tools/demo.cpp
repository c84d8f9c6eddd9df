// warren-demo: the client on libuv against a broker. Declares a queue, publishes N confirmed
// messages (at most 1,000 unconfirmed), consumes them with an ack every 100, makes RPC calls
// over direct reply-to (one at a time, then all at once), and prints what happened and the
// rates.
// Usage: warren-demo [--url URL] [--count N] [--size BYTES] [--rpc CALLS]
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/client/rpc.hpp"
#include "warren/uv/uv_driver.hpp"

using namespace warren;
using Clock = std::chrono::steady_clock;

namespace {

struct Demo {
  uv_loop_t* loop;
  uv::UvDriver driver;
  std::shared_ptr<client::Connection> conn;
  std::uint64_t count = 100000;
  std::size_t size = 64;
  int rpc_calls = 1000;
  client::Channel pub, rpc_server;
  client::Consumer consumer;  // held until the end: dropping it cancels the subscription
  std::string queue, requests;
  std::string body;
  std::uint64_t sent = 0, confirmed = 0, failed = 0, received = 0;
  int rpc_done = 0, rpc_concurrent_done = 0;
  std::shared_ptr<client::RpcServer> server;
  std::shared_ptr<client::RpcClient> rpc;
  std::vector<double> rpc_us;
  Clock::time_point t_pub, t_con, t_rpc;
  int exit_code = 0;

  explicit Demo(uv_loop_t* l) : loop(l), driver(l) {}

  void fail(const char* what, const Error& e) {
    std::fprintf(stderr, "warren-demo: %s: %s\n", what, e.to_string().c_str());
    exit_code = 1;
    if (conn) conn->close([](Result<void>) {});
  }

  void start(const client::ConnectionUrl& url) {
    std::printf("connecting to %s\n", url.redacted().c_str());
    conn = client::Connection::connect(driver, url, {}, [this](Result<void> r) {
      if (!r) return fail("connect", r.error());
      std::printf("connected to %s:%u\n", conn->endpoint().host.c_str(), conn->endpoint().port);
      conn->open_channel([this](Result<client::Channel> ch) {
        if (!ch) return fail("channel.open", ch.error());
        pub = std::move(*ch);
        pub.confirm_select([this](Result<void> r) {
          if (!r) fail("confirm.select", r.error());
        });
        pub.queue_declare({.exclusive = true, .auto_delete = true}, [this](Result<client::QueueDeclared> q) {
          if (!q) return fail("queue.declare", q.error());
          queue = q->name;
          std::printf("declared %s\n", queue.c_str());
          body.assign(size, 'w');
          t_pub = Clock::now();
          publish_more();
        });
      });
    });
  }

  void publish_more() {
    while (sent < count && sent - confirmed - failed < 1000) {
      ++sent;
      pub.publish({.routing_key = queue}, client::as_bytes(body), [this](Result<engine::PublishOutcome> outcome) {
        if (outcome) ++confirmed;
        else if (++failed == 1) std::fprintf(stderr, "warren-demo: publish: %s\n", outcome.error().to_string().c_str());
        if (confirmed + failed == count) published();
        else publish_more();
      });
    }
  }

  void published() {
    double s = std::chrono::duration<double>(Clock::now() - t_pub).count();
    std::printf("published %llu x %zu B: %llu confirmed, %llu not, in %.3f s (%.0f msg/s)\n",
                static_cast<unsigned long long>(count), size, static_cast<unsigned long long>(confirmed),
                static_cast<unsigned long long>(failed), s, static_cast<double>(count) / s);
    if (failed) exit_code = 1;
    t_con = Clock::now();
    pub.consume(
        {.queue = queue},
        [this](const client::Delivery& d) {
          ++received;
          if (received % 100 == 0 || received == confirmed) {
            if (auto r = d.ack({.multiple = true}); !r) return fail("ack", r.error());
          }
          if (received == confirmed) consumed();
        },
        [this](Result<client::Consumer> c) {
          if (!c) return fail("basic.consume", c.error());
          consumer = std::move(*c);
        });
  }

  void consumed() {
    double s = std::chrono::duration<double>(Clock::now() - t_con).count();
    std::printf("consumed %llu messages (prefetch 250, a multiple ack every 100) in %.3f s (%.0f msg/s)\n",
                static_cast<unsigned long long>(received), s, static_cast<double>(received) / s);
    start_rpc();
  }

  // A server on a queue of its own answers with the body upper-cased (RpcServer); the caller
  // is an RpcClient over direct reply-to. First the calls one at a time, for latency; then
  // all of them at once on the same channel, for throughput.
  void start_rpc() {
    conn->open_channel([this](Result<client::Channel> ch) {
      if (!ch) return fail("channel.open", ch.error());
      rpc_server = std::move(*ch);
      rpc_server.queue_declare({.exclusive = true, .auto_delete = true}, [this](Result<client::QueueDeclared> q) {
        if (!q) return fail("queue.declare", q.error());
        requests = q->name;
        server = client::RpcServer::start(
            rpc_server, requests,
            [](const client::Delivery& m) {
              std::string reply(m.body_text());
              for (auto& c : reply) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
              return reply;
            },
            [this](Result<void> r) {
              if (!r) return fail("rpc server", r.error());
              conn->open_channel([this](Result<client::Channel> ch) {
                if (!ch) return fail("channel.open", ch.error());
                rpc = client::RpcClient::start(*ch, [this](Result<void> r) {
                  if (!r) return fail("rpc client", r.error());
                  call();
                });
              });
            });
      });
    });
  }

  void call() {
    auto request = std::make_shared<std::string>("hello " + std::to_string(rpc_done));
    t_rpc = Clock::now();
    rpc->call({.routing_key = requests, .timeout = std::chrono::seconds(10)}, client::as_bytes(*request),
              [this, request](Result<client::Message> reply) {
                if (!reply) return fail("rpc call", reply.error());
                rpc_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t_rpc).count());
                if (rpc_done == 0)
                  std::printf("rpc: \"%s\" -> \"%.*s\"\n", request->c_str(), static_cast<int>(reply->body().size()),
                              reply->body_text().data());
                if (++rpc_done < rpc_calls) return call();
                std::sort(rpc_us.begin(), rpc_us.end());
                std::printf("rpc: %d calls over direct reply-to, one at a time: p50 %.0f us, p99 %.0f us\n", rpc_done,
                            rpc_us[rpc_us.size() / 2], rpc_us[rpc_us.size() * 99 / 100]);
                call_all_at_once();
              });
  }

  void call_all_at_once() {
    static const std::string request = "at once";
    t_rpc = Clock::now();
    for (int i = 0; i < rpc_calls; ++i)
      rpc->call({.routing_key = requests, .timeout = std::chrono::seconds(30)}, client::as_bytes(request),
                [this](Result<client::Message> reply) {
                  if (!reply) return fail("rpc call", reply.error());
                  if (reply->body_text() != "AT ONCE")
                    return fail("rpc call", make_error(errc::protocol_error, "a reply that does not answer its call"));
                  if (++rpc_concurrent_done < rpc_calls) return;
                  double s = std::chrono::duration<double>(Clock::now() - t_rpc).count();
                  std::printf("rpc: %d calls in flight together on one channel: %.3f s (%.0f calls/s), %llu stray replies\n",
                              rpc_calls, s, rpc_calls / s, static_cast<unsigned long long>(rpc->dropped_replies()));
                  conn->close([this](Result<void> r) {
                    if (!r) return fail("close", r.error());
                    std::printf("closed cleanly\n");
                  });
                });
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string url_text = "amqp://guest:guest@127.0.0.1:5672/%2f";
  uv_loop_t* loop = uv_default_loop();
  Demo demo(loop);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--url")) url_text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--count")) demo.count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--size")) demo.size = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--rpc")) demo.rpc_calls = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: warren-demo [--url URL] [--count N] [--size BYTES] [--rpc CALLS]\n");
      return 2;
    }
  }
  auto url = client::parse_url(url_text);
  if (!url.ok()) {
    std::fprintf(stderr, "warren-demo: %s\n", url.error().to_string().c_str());
    return 2;
  }
  if (demo.count == 0 || demo.rpc_calls <= 0) {
    std::fprintf(stderr, "warren-demo: --count and --rpc must be at least 1\n");
    return 2;
  }
  demo.start(*url);
  uv_run(loop, UV_RUN_DEFAULT);  // returns once the connection is closed: nothing keeps it alive
  return demo.exit_code;
}

// warren-demo: the client on libuv against a broker. Declares a queue, publishes N confirmed
// messages (at most 1,000 unconfirmed), consumes them with an ack every 100, makes RPC calls
// over direct reply-to, and prints what happened and the rates.
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
#include "warren/engine/describe.hpp"
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
  engine::ChannelId pub = 0, rpc_server = 0, rpc_client = 0;
  std::string queue, requests;
  std::string body;
  std::uint64_t sent = 0, confirmed = 0, failed = 0, received = 0;
  int rpc_done = 0;
  std::vector<double> rpc_us;
  Clock::time_point t_pub, t_con, t_rpc;
  int exit_code = 0;

  explicit Demo(uv_loop_t* l) : loop(l), driver(l) {}

  void fail(const char* what, const Error& e) {
    std::fprintf(stderr, "warren-demo: %s: %s\n", what, e.to_string().c_str());
    exit_code = 1;
    if (conn) conn->close([](const Error*) {});
  }

  void start(const client::ConnectionUrl& url) {
    std::printf("connecting to %s\n", url.redacted().c_str());
    conn = client::Connection::connect(driver, url, {}, [this](const Error* e) {
      if (e) return fail("connect", *e);
      std::printf("connected to %s:%u\n", conn->endpoint().host.c_str(), conn->endpoint().port);
      conn->open_channel([this](const Error* e, engine::ChannelId ch) {
        if (e) return fail("channel.open", *e);
        pub = ch;
        conn->confirm_select(pub, [this](const Error* e, const wire::Method*) {
          if (e) fail("confirm.select", *e);
        });
        conn->queue_declare(pub, wire::QueueDeclare{"", false, false, true, true}, [this](const Error* e, const wire::Method* m) {
          if (e) return fail("queue.declare", *e);
          queue = std::string(std::get<wire::QueueDeclareOk>(*m).queue);
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
      conn->publish(pub, wire::BasicPublish{"", queue}, {}, std::as_bytes(std::span{body.data(), body.size()}),
                    [this](engine::PublishOutcome o, const Error& e) {
                      if (o == engine::PublishOutcome::confirmed) ++confirmed;
                      else if (++failed == 1) std::fprintf(stderr, "warren-demo: publish %s: %s\n",
                                                         std::string(engine::to_string(o)).c_str(), e.to_string().c_str());
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
    conn->consume(
        pub, wire::BasicConsume{queue}, std::nullopt,
        [this](const engine::Message& m) {
          ++received;
          if (received % 100 == 0 || received == confirmed) (void)conn->ack(m.channel, m.delivery_tag, true);
          if (received == confirmed) consumed();
        },
        [this](const Error* e, const wire::Method*) {
          if (e) fail("basic.consume", *e);
        });
  }

  void consumed() {
    double s = std::chrono::duration<double>(Clock::now() - t_con).count();
    std::printf("consumed %llu messages (prefetch 250, a multiple ack every 100) in %.3f s (%.0f msg/s)\n",
                static_cast<unsigned long long>(received), s, static_cast<double>(received) / s);
    start_rpc();
  }

  // A server on a queue of its own answers with the body upper-cased; the caller receives on
  // amq.rabbitmq.reply-to (no ack, started before the first call) and matches correlation ids.
  void start_rpc() {
    conn->open_channel([this](const Error* e, engine::ChannelId ch) {
      if (e) return fail("channel.open", *e);
      rpc_server = ch;
      conn->queue_declare(rpc_server, wire::QueueDeclare{"", false, false, true, true}, [this](const Error* e, const wire::Method* m) {
        if (e) return fail("queue.declare", *e);
        requests = std::string(std::get<wire::QueueDeclareOk>(*m).queue);
        conn->consume(rpc_server, wire::BasicConsume{requests, "", false, true}, std::nullopt,
                      [this](const engine::Message& m) {
                        std::string reply(reinterpret_cast<const char*>(m.body.data()), m.body.size());
                        for (auto& c : reply) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                        wire::BasicProperties p;
                        p.correlation_id = m.properties->correlation_id;
                        conn->publish(rpc_server, wire::BasicPublish{"", m.properties->reply_to.value_or("")}, p,
                                      std::as_bytes(std::span{reply.data(), reply.size()}), [](engine::PublishOutcome, const Error&) {});
                      },
                      [this](const Error* e, const wire::Method*) {
                        if (e) return fail("rpc server", *e);
                        conn->open_channel([this](const Error* e, engine::ChannelId ch) {
                          if (e) return fail("channel.open", *e);
                          rpc_client = ch;
                          conn->consume(rpc_client, wire::BasicConsume{"amq.rabbitmq.reply-to", "", false, true}, std::nullopt,
                                        [this](const engine::Message& m) { on_reply(m); },
                                        [this](const Error* e, const wire::Method*) {
                                          if (e) return fail("reply consumer", *e);
                                          call();
                                        });
                        });
                      });
      });
    });
  }

  void call() {
    std::string id = "call-" + std::to_string(rpc_done);
    wire::BasicProperties p;
    p.reply_to = "amq.rabbitmq.reply-to";
    p.correlation_id = id;
    std::string request = "hello " + std::to_string(rpc_done);
    t_rpc = Clock::now();
    conn->publish(rpc_client, wire::BasicPublish{"", requests}, p, std::as_bytes(std::span{request.data(), request.size()}),
                  [](engine::PublishOutcome, const Error&) {});
  }

  void on_reply(const engine::Message& m) {
    if (m.properties->correlation_id != "call-" + std::to_string(rpc_done)) return;  // stray: dropped
    rpc_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t_rpc).count());
    if (rpc_done == 0)
      std::printf("rpc: \"hello 0\" -> \"%.*s\"\n", static_cast<int>(m.body.size()), reinterpret_cast<const char*>(m.body.data()));
    if (++rpc_done < rpc_calls) return call();
    std::sort(rpc_us.begin(), rpc_us.end());
    std::printf("rpc: %d calls over direct reply-to, one at a time: p50 %.0f us, p99 %.0f us\n", rpc_done,
                rpc_us[rpc_us.size() / 2], rpc_us[rpc_us.size() * 99 / 100]);
    conn->close([this](const Error* e) {
      if (e) return fail("close", *e);
      std::printf("closed cleanly\n");
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

// The client API on the libuv driver against the real broker: connect by URL, publish with
// confirms, consume and ack, close; a refused login, a refused port, failover to the next
// host, TLS, and a loop that ends once the work is done (the heartbeat timer is unreferenced).
#include <gtest/gtest.h>

#include <chrono>

#include "support/broker_env.hpp"
#include "warren/client/connection.hpp"
#include "warren/uv/uv_driver.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using client::Connection;

client::ConnectionUrl url(const std::string& text) {
  auto u = client::parse_url(text);
  if (!u.ok()) throw std::runtime_error(u.error().to_string());
  return *u;
}

struct Loop {
  uv_loop_t loop;
  std::unique_ptr<uv::UvDriver> driver;
  Loop() {
    uv_loop_init(&loop);
    driver = std::make_unique<uv::UvDriver>(&loop);
  }
  ~Loop() {
    driver.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
  // Runs until `done` or a deadline; true when done.
  bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = 10s) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < give_up) uv_run(&loop, UV_RUN_ONCE);
    return done();
  }
};

std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span{s.data(), s.size()}); }

TEST(ClientUv, publish_confirm_consume_ack_close) {
  Loop l;
  std::optional<std::string> ready;
  auto conn = Connection::connect(*l.driver, url("amqp://guest:guest@127.0.0.1:" + env("RMQ_PORT") + "/%2f"), {},
                                  [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  ASSERT_EQ(*ready, "ok");

  client::Channel ch;
  conn->open_channel([&](Result<client::Channel> r) {
    ASSERT_TRUE(r.ok());
    ch = *r;
  });
  ASSERT_TRUE(l.run_until([&] { return ch.is_open(); }));
  bool selected = false;
  std::string queue;
  ch.confirm_select([&](Result<void> r) { selected = r.ok(); });
  ch.queue_declare({.exclusive = true, .auto_delete = true}, [&](Result<client::QueueDeclared> q) {
    ASSERT_TRUE(q.ok());
    queue = q->name;
  });
  ASSERT_TRUE(l.run_until([&] { return selected && !queue.empty(); }));

  constexpr int n = 100;
  int confirmed = 0;
  for (int i = 0; i < n; ++i)
    ch.publish({.routing_key = queue}, text("message " + std::to_string(i)), [&](Result<engine::PublishOutcome> o) {
      confirmed += o && *o == engine::PublishOutcome::confirmed;
    });
  ASSERT_TRUE(l.run_until([&] { return confirmed == n; }));

  int received = 0;
  bool in_order = true;
  client::Consumer consumer;
  ch.consume(
      {.queue = queue},
      [&](const client::Delivery& m) {
        in_order = in_order && m.body_text() == "message " + std::to_string(received);
        ++received;
        EXPECT_TRUE(m.ack().ok());  // a callback may ack
      },
      [&](Result<client::Consumer> c) {
        ASSERT_TRUE(c.ok());
        consumer = std::move(*c);
      });
  ASSERT_TRUE(l.run_until([&] { return received == n; }));
  EXPECT_TRUE(in_order);

  std::optional<std::string> closed;
  conn->close([&](Result<void> r) { closed = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(l.run_until([&] { return closed.has_value(); }));
  EXPECT_EQ(*closed, "ok");
}

TEST(ClientUv, a_wrong_password_is_refused_at_once) {
  Loop l;
  std::optional<Error> error;
  bool done = false;
  auto conn = Connection::connect(*l.driver, url("amqp://guest:nope@127.0.0.1:" + env("RMQ_PORT")), {},
                                  [&](Result<void> r) {
                                    if (!r) error = r.error();
                                    done = true;
                                  });
  ASSERT_TRUE(l.run_until([&] { return done; }, 5s));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, errc::access_refused);
  EXPECT_EQ(error->reply_code, 403);
}

TEST(ClientUv, a_refused_port_says_so) {
  Loop l;
  std::optional<Error> error;
  bool done = false;
  auto conn = Connection::connect(*l.driver, url("amqp://127.0.0.1:1"), {}, [&](Result<void> r) {
    if (!r) error = r.error();
    done = true;
  });
  ASSERT_TRUE(l.run_until([&] { return done; }, 5s));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->detail, "connect 127.0.0.1:1: connection refused");
}

TEST(ClientUv, the_next_host_is_tried_when_one_fails) {
  Loop l;
  std::optional<std::string> ready;
  auto conn = Connection::connect(*l.driver, url("amqp://127.0.0.1:1,127.0.0.1:" + env("RMQ_PORT")), {},
                                  [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  EXPECT_EQ(*ready, "ok");
  EXPECT_EQ(conn->endpoint().port, std::stoi(env("RMQ_PORT")));
  bool closed = false;
  conn->close([&](Result<void>) { closed = true; });
  ASSERT_TRUE(l.run_until([&] { return closed; }));
}

TEST(ClientUv, a_finished_program_does_not_wait_out_the_heartbeat) {
  Loop l;
  bool closed = false;
  std::shared_ptr<Connection> conn;
  conn = Connection::connect(*l.driver, url("amqp://127.0.0.1:" + env("RMQ_PORT") + "?heartbeat=60"), {},
                             [&](Result<void> r) {
                               ASSERT_TRUE(r.ok());
                               conn->close([&](Result<void>) { closed = true; });
                             });
  const auto started = std::chrono::steady_clock::now();
  uv_run(&l.loop, UV_RUN_DEFAULT);  // returns when nothing referenced is left
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(ClientUv, amqps_with_the_test_ca) {
  Loop l;
  client::ClientOptions options;
  options.ca_pem = file_text(env("RMQ_DIR") + "/tls/ca.pem");
  std::optional<std::string> ready;
  auto conn = Connection::connect(*l.driver, url("amqps://localhost:" + env("RMQ_TLS_PORT")), options,
                                  [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  EXPECT_EQ(*ready, "ok");
  bool closed = false;
  conn->close([&](Result<void>) { closed = true; });
  ASSERT_TRUE(l.run_until([&] { return closed; }));

  std::optional<std::string> refused;
  options.ca_pem.clear();  // the system store does not know the test CA
  auto other = Connection::connect(*l.driver, url("amqps://localhost:" + env("RMQ_TLS_PORT")), options,
                                   [&](Result<void> r) { refused = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(l.run_until([&] { return refused.has_value(); }));
  // RabbitMQ sends its CA in the chain, so OpenSSL names a self-signed CA it does not trust.
  EXPECT_EQ(*refused, "TLS handshake failed: certificate rejected: self-signed certificate in certificate chain");
}

}  // namespace
}  // namespace warren::test

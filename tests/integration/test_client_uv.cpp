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
                                  [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  ASSERT_EQ(*ready, "ok");

  engine::ChannelId ch = 0;
  conn->open_channel([&](const Error* e, engine::ChannelId id) {
    ASSERT_EQ(e, nullptr);
    ch = id;
  });
  ASSERT_TRUE(l.run_until([&] { return ch != 0; }));
  bool selected = false;
  std::string queue;
  conn->confirm_select(ch, [&](const Error* e, const wire::Method*) { selected = !e; });
  conn->queue_declare(ch, wire::QueueDeclare{"", false, false, true, true}, [&](const Error* e, const wire::Method* m) {
    ASSERT_EQ(e, nullptr);
    queue = std::string(std::get<wire::QueueDeclareOk>(*m).queue);
  });
  ASSERT_TRUE(l.run_until([&] { return selected && !queue.empty(); }));

  constexpr int n = 100;
  int confirmed = 0;
  for (int i = 0; i < n; ++i)
    conn->publish(ch, wire::BasicPublish{"", queue}, {}, text("message " + std::to_string(i)),
                  [&](engine::PublishOutcome o, const Error&) { confirmed += o == engine::PublishOutcome::confirmed; });
  ASSERT_TRUE(l.run_until([&] { return confirmed == n; }));

  int received = 0;
  bool in_order = true;
  conn->consume(
      ch, wire::BasicConsume{queue}, std::nullopt,
      [&](const engine::Message& m) {
        std::string body(reinterpret_cast<const char*>(m.body.data()), m.body.size());
        in_order = in_order && body == "message " + std::to_string(received);
        ++received;
        EXPECT_TRUE(conn->ack(m.channel, m.delivery_tag).ok());  // a callback may ack
      },
      [](const Error* e, const wire::Method*) { ASSERT_EQ(e, nullptr); });
  ASSERT_TRUE(l.run_until([&] { return received == n; }));
  EXPECT_TRUE(in_order);

  std::optional<std::string> closed;
  conn->close([&](const Error* e) { closed = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(l.run_until([&] { return closed.has_value(); }));
  EXPECT_EQ(*closed, "ok");
}

TEST(ClientUv, a_wrong_password_is_refused_at_once) {
  Loop l;
  std::optional<Error> error;
  bool done = false;
  auto conn = Connection::connect(*l.driver, url("amqp://guest:nope@127.0.0.1:" + env("RMQ_PORT")), {},
                                  [&](const Error* e) {
                                    if (e) error = *e;
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
  auto conn = Connection::connect(*l.driver, url("amqp://127.0.0.1:1"), {}, [&](const Error* e) {
    if (e) error = *e;
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
                                  [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  EXPECT_EQ(*ready, "ok");
  EXPECT_EQ(conn->endpoint().port, std::stoi(env("RMQ_PORT")));
  bool closed = false;
  conn->close([&](const Error*) { closed = true; });
  ASSERT_TRUE(l.run_until([&] { return closed; }));
}

TEST(ClientUv, a_finished_program_does_not_wait_out_the_heartbeat) {
  Loop l;
  bool closed = false;
  std::shared_ptr<Connection> conn;
  conn = Connection::connect(*l.driver, url("amqp://127.0.0.1:" + env("RMQ_PORT") + "?heartbeat=60"), {},
                             [&](const Error* e) {
                               ASSERT_EQ(e, nullptr);
                               conn->close([&](const Error*) { closed = true; });
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
                                  [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(l.run_until([&] { return ready.has_value(); }));
  EXPECT_EQ(*ready, "ok");
  bool closed = false;
  conn->close([&](const Error*) { closed = true; });
  ASSERT_TRUE(l.run_until([&] { return closed; }));

  std::optional<std::string> refused;
  options.ca_pem.clear();  // the system store does not know the test CA
  auto other = Connection::connect(*l.driver, url("amqps://localhost:" + env("RMQ_TLS_PORT")), options,
                                   [&](const Error* e) { refused = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(l.run_until([&] { return refused.has_value(); }));
  // RabbitMQ sends its CA in the chain, so OpenSSL names a self-signed CA it does not trust.
  EXPECT_EQ(*refused, "TLS handshake failed: certificate rejected: self-signed certificate in certificate chain");
}

}  // namespace
}  // namespace warren::test

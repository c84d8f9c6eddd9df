// The client suite's fixture: a loop and its driver, chosen by the test parameter, and
// blocking helpers (run the loop until a callback has fired) so each case reads top down.
// Every case runs on each driver warren has.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "warren/client/connection.hpp"
#include "warren/engine/describe.hpp"
#include "support/broker_env.hpp"
#include "warren/asio/asio_driver.hpp"
#include "warren/uv/uv_driver.hpp"

namespace warren::test {

using namespace std::chrono_literals;

enum class DriverKind { uv, asio };
inline std::string driver_name(const ::testing::TestParamInfo<DriverKind>& info) {
  switch (info.param) {
    case DriverKind::uv: return "libuv";
    case DriverKind::asio: return "asio";
  }
  return "unknown";
}

// A loop of the chosen kind, run a turn at a time.
class Loop {
 public:
  explicit Loop(DriverKind kind) : kind_(kind) {
    if (kind_ == DriverKind::uv) {
      uv_loop_init(&uv_loop_);
      uv_driver_ = std::make_unique<uv::UvDriver>(&uv_loop_);
    } else {
      asio_driver_ = std::make_unique<asio_driver::AsioDriver>(io_);
    }
  }
  ~Loop() {
    if (kind_ == DriverKind::uv) {
      uv_driver_.reset();
      uv_run(&uv_loop_, UV_RUN_DEFAULT);
      uv_loop_close(&uv_loop_);
    } else {
      io_.restart();
      io_.run();
    }
  }
  client::Driver& driver() {
    if (kind_ == DriverKind::uv) return *uv_driver_;
    return *asio_driver_;
  }
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      if (kind_ == DriverKind::uv) {
        uv_run(&uv_loop_, UV_RUN_NOWAIT);
      } else {
        io_.restart();
        io_.poll();
      }
      // Polling without blocking; a short sleep keeps the CPU free for the broker.
      if (!done()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return done();
  }
  // Runs the loop until nothing is left to do: what a finished program's main does.
  void run_to_completion() {
    if (kind_ == DriverKind::uv) {
      uv_run(&uv_loop_, UV_RUN_DEFAULT);
    } else {
      io_.restart();
      io_.run();
    }
  }

 private:
  DriverKind kind_;
  uv_loop_t uv_loop_;
  std::unique_ptr<uv::UvDriver> uv_driver_;
  asio::io_context io_;
  std::unique_ptr<asio_driver::AsioDriver> asio_driver_;
};

inline std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span{s.data(), s.size()}); }
inline std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

class ClientSuite : public ::testing::TestWithParam<DriverKind> {
 protected:
  Loop loop{GetParam()};
  std::shared_ptr<client::Connection> conn;

  std::shared_ptr<client::Connection> connect(const std::string& url_text = "", client::ClientOptions options = {}) {
    auto u = client::parse_url(url_text.empty() ? "amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f" : url_text);
    if (!u.ok()) throw std::runtime_error(u.error().to_string());
    std::optional<std::string> ready;
    auto c = client::Connection::connect(loop.driver(), *u, std::move(options),
                                         [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
    if (!loop.run_until([&] { return ready.has_value(); }) || *ready != "ok")
      throw std::runtime_error("connect: " + ready.value_or("timed out"));
    return c;
  }
  // Dials and reports how it ended: "ok" or the error's text.
  std::pair<std::shared_ptr<client::Connection>, std::optional<Error>> try_connect(const std::string& url_text,
                                                                                  client::ClientOptions options = {},
                                                                                  std::chrono::milliseconds limit = 10s) {
    auto u = client::parse_url(url_text);
    if (!u.ok()) return {nullptr, u.error()};
    std::optional<Result<void>> ready;
    auto c = client::Connection::connect(loop.driver(), *u, std::move(options), [&](Result<void> r) { ready.emplace(std::move(r)); });
    if (!loop.run_until([&] { return ready.has_value(); }, limit)) return {c, make_error(errc::timeout, "the test gave up")};
    if (*ready) return {c, std::nullopt};
    return {c, ready->error()};
  }
  void close(client::Connection& c) {
    bool closed = false;
    c.close([&](Result<void>) { closed = true; });
    loop.run_until([&] { return closed; });
  }
  void SetUp() override { conn = connect(); }
  void TearDown() override {
    if (conn && conn->is_open()) close(*conn);
  }

  // Runs a callback-style operation to its Result.
  template <class T, class Start>
  Result<T> wait(Start start, std::chrono::milliseconds limit = 10s) {
    std::optional<Result<T>> out;
    start([&](Result<T> r) { out.emplace(std::move(r)); });
    if (!loop.run_until([&] { return out.has_value(); }, limit))
      return make_error(errc::timeout, "the test gave up waiting");
    return std::move(*out);
  }
  client::Channel open(client::Connection& c) {
    auto r = wait<client::Channel>([&](auto done) { c.open_channel(done); });
    if (!r) throw std::runtime_error("open_channel: " + r.error().to_string());
    return *r;
  }
  client::Channel open() { return open(*conn); }
  std::string temp_queue(const client::Channel& ch,
                         client::QueueDeclareOptions o = {.exclusive = true, .auto_delete = true}) {
    auto q = wait<client::QueueDeclared>([&](auto done) { ch.queue_declare(o, done); });
    if (!q) throw std::runtime_error("queue_declare: " + q.error().to_string());
    return q->name;
  }
  // "ok" or the error's text, for one comparison.
  template <class T>
  static std::string said(const Result<T>& r) {
    return r ? "ok" : r.error().to_string();
  }
  // A publish's outcome as one word or the error's text.
  std::string confirm_publish(const client::Channel& ch, const client::Publish& p, std::span<const std::byte> body,
                              std::chrono::milliseconds limit = 10s) {
    auto r = wait<engine::PublishOutcome>([&](auto done) { ch.publish(p, body, done); }, limit);
    return r ? std::string(engine::to_string(*r)) : r.error().to_string();
  }
};

}  // namespace warren::test

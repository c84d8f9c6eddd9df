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
                                         [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
    if (!loop.run_until([&] { return ready.has_value(); }) || *ready != "ok")
      throw std::runtime_error("connect: " + ready.value_or("timed out"));
    return c;
  }
  void SetUp() override { conn = connect(); }
  void TearDown() override {
    if (conn && conn->is_open()) {
      bool closed = false;
      conn->close([&](const Error*) { closed = true; });
      loop.run_until([&] { return closed; });
    }
  }

  engine::ChannelId channel(client::Connection& c) {
    std::optional<engine::ChannelId> ch;
    c.open_channel([&](const Error* e, engine::ChannelId id) {
      if (!e) ch = id;
    });
    if (!loop.run_until([&] { return ch.has_value(); })) throw std::runtime_error("channel did not open");
    return *ch;
  }
  engine::ChannelId channel() { return channel(*conn); }

  // A Channel handle (the API users touch) on `c`, or on the suite's connection.
  client::Channel open_handle(client::Connection& c) {
    std::optional<Result<client::Channel>> r;
    c.open_channel([&](Result<client::Channel> ch) { r.emplace(std::move(ch)); });
    if (!loop.run_until([&] { return r.has_value(); })) throw std::runtime_error("channel did not open");
    if (!*r) throw std::runtime_error("open_channel: " + r->error().to_string());
    return **r;
  }
  client::Channel open_handle() { return open_handle(*conn); }

  // Runs one request to its answer; returns the error text or "ok" and the printed reply.
  template <class Call>
  std::string answer(Call call) {
    std::optional<std::string> out;
    call([&](const Error* e, const wire::Method* m) { out = e ? e->to_string() : (m ? wire::to_string(*m) : "ok"); });
    if (!loop.run_until([&] { return out.has_value(); })) return "<no answer>";
    return *out;
  }
  std::string declare(engine::ChannelId ch, const wire::QueueDeclare& q) {
    std::string name;
    std::optional<std::string> err;
    conn->queue_declare(ch, q, [&](const Error* e, const wire::Method* m) {
      if (e) err = e->to_string();
      else name = std::string(std::get<wire::QueueDeclareOk>(*m).queue);
    });
    loop.run_until([&] { return err || !name.empty(); });
    if (err) throw std::runtime_error(*err);
    return name;
  }
  std::string confirm_publish(engine::ChannelId ch, const wire::BasicPublish& p, std::span<const std::byte> body,
                              const wire::BasicProperties& props = {}, std::chrono::milliseconds limit = 10s) {
    std::optional<std::string> out;
    conn->publish(ch, p, props, body, [&](engine::PublishOutcome o, const Error& e) {
      out = std::string(engine::to_string(o)) + (e.code ? " " + e.to_string() : "");
    });
    if (!loop.run_until([&] { return out.has_value(); }, limit)) return "<no outcome>";
    return *out;
  }
};

}  // namespace warren::test

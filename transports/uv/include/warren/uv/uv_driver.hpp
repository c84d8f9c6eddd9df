// The libuv driver: TCP on a socket of its own (TCP_NODELAY, 64 KiB reads, one gathered
// write at a time, sendmsg with MSG_NOSIGNAL so no write raises SIGPIPE), name
// resolution and a connect timeout over the whole dial, TLS through the shared TlsSession,
// timers that do not keep the loop alive, and post() from any thread. It moves bytes and
// owns nothing of the protocol.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "warren/client/driver.hpp"

namespace warren::uv {

class UvDriver final : public client::Driver {
 public:
  explicit UvDriver(uv_loop_t* loop);
  ~UvDriver() override;
  UvDriver(const UvDriver&) = delete;
  UvDriver& operator=(const UvDriver&) = delete;

  engine::Instant now() override;
  std::unique_ptr<client::Stream> dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                       std::optional<client::TlsSettings> tls, client::StreamEvents& events) override;
  std::unique_ptr<client::Timer> timer(std::function<void()> on_fire) override;
  std::unique_ptr<client::Timer> keepalive_timer(std::function<void()> on_fire) override;
  void post(std::function<void()> fn) override;

  // Keeps uv_run from returning while it lives, as Asio's work guard does. Posting does not
  // keep a loop alive (a finished program must exit), so a loop fed only from other threads,
  // with nothing open yet, would return at once and leave what is posted for the next uv_run.
  // Take it on the loop's thread or before the loop runs; release it from any thread (the
  // release is posted, so it runs after everything posted before it). Move-only.
  class KeepAlive {
   public:
    KeepAlive() = default;
    KeepAlive(KeepAlive&& other) noexcept : driver_(std::exchange(other.driver_, nullptr)) {}
    KeepAlive& operator=(KeepAlive&& other) noexcept {
      if (this != &other) {
        reset();
        driver_ = std::exchange(other.driver_, nullptr);
      }
      return *this;
    }
    KeepAlive(const KeepAlive&) = delete;
    KeepAlive& operator=(const KeepAlive&) = delete;
    ~KeepAlive() { reset(); }
    void reset();

   private:
    friend class UvDriver;
    explicit KeepAlive(UvDriver* driver) : driver_(driver) {}
    UvDriver* driver_ = nullptr;
  };
  [[nodiscard]] KeepAlive keep_alive();

  [[nodiscard]] uv_loop_t* loop() const noexcept { return loop_; }

 private:
  static void on_async(uv_async_t* handle);
  void hold(int delta);  // on the loop's thread: the async handle counts while anyone holds it
  int holders_ = 0;

  uv_loop_t* loop_;
  uv_async_t* async_;  // freed by its close callback
  std::mutex mutex_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace warren::uv

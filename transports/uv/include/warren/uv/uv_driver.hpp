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
                                       std::optional<tls::TlsOptions> tls, client::StreamEvents& events) override;
  std::unique_ptr<client::Timer> timer(std::function<void()> on_fire) override;
  std::unique_ptr<client::Timer> keepalive_timer(std::function<void()> on_fire) override;
  void post(std::function<void()> fn) override;

  [[nodiscard]] uv_loop_t* loop() const noexcept { return loop_; }

 private:
  static void on_async(uv_async_t* handle);

  uv_loop_t* loop_;
  uv_async_t* async_;  // freed by its close callback
  std::mutex mutex_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace warren::uv

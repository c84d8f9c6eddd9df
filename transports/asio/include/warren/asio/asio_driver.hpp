// The Asio driver (standalone Asio): TCP with TCP_NODELAY, 64 KiB reads, one gathered write
// at a time, resolution and a connect timeout over the whole dial, TLS through the shared
// TlsSession, and post() through the io_context. Once a connection is closed nothing of it
// stays queued, so io_context::run() returns when the program's work is done.
#pragma once

#include "warren/asio/asio_config.hpp"  // before any Asio header
#include <asio/io_context.hpp>

#include "warren/client/driver.hpp"

namespace warren::asio_driver {

class AsioDriver final : public client::Driver {
 public:
  explicit AsioDriver(asio::io_context& io) : io_(io) {}

  engine::Instant now() override;
  std::unique_ptr<client::Stream> dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                       std::optional<client::TlsSettings> tls, client::StreamEvents& events) override;
  std::unique_ptr<client::Timer> timer(std::function<void()> on_fire) override;
  void post(std::function<void()> fn) override;

  [[nodiscard]] asio::io_context& context() const noexcept { return io_; }

 private:
  asio::io_context& io_;
};

}  // namespace warren::asio_driver

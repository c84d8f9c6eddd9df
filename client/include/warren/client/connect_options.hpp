// ClientOptions viewed: what a connect written inline inside a `co_await` takes, and copies
// into an owned ClientOptions at the call.
//
//   co_await asio_driver::async_connect(driver, url, {.engine = {.heartbeat_s = 30}}, use_awaitable);
//
// Why a second form: GCC 12 copies a braced temporary of an aggregate inside a `co_await`
// expression bitwise and destroys both copies, so any aggregate there that owns memory (a
// std::string, even an empty one in its small buffer; a shared_ptr) frees what it never owned.
// Everything here is trivially destructible, the same fields as ClientOptions by name (a test
// holds the two to the same fields), and a ClientOptions converts to it, so a named one works
// too. May not: outlive the call it was written in.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>

#include "warren/client/arguments.hpp"
#include "warren/client/driver.hpp"
#include "warren/engine/options.hpp"

namespace warren::client {

// A shared_ptr<T> (or to a type derived from T) viewed for the length of a call: the call
// takes its own reference. Trivially destructible; `.observer = std::make_shared<Mine>()`
// works too (the temporary lives until the call's end).
template <class T>
class SharedView {
 public:
  SharedView() = default;
  SharedView(std::nullptr_t) noexcept {}  // NOLINT: implicit by design
  template <class U>
    requires std::is_convertible_v<U*, T*>
  SharedView(const std::shared_ptr<U>& p) noexcept  // NOLINT: implicit by design
      : p_(&p), copy_([](const void* v) { return std::shared_ptr<T>(*static_cast<const std::shared_ptr<U>*>(v)); }) {}
  template <class U>
  SharedView(std::shared_ptr<U>&&) = delete;  // moved from, it would be gone: name it (or pass a temporary)

  [[nodiscard]] std::shared_ptr<T> get() const { return copy_ ? copy_(p_) : nullptr; }

 private:
  const void* p_ = nullptr;
  std::shared_ptr<T> (*copy_)(const void*) = nullptr;
};

// engine::ConnectionOptions viewed, field for field (its defaults too).
struct EngineOptionsView {
  std::string_view user = "guest";
  std::string_view password = "guest";  // never logged, never printed
  std::string_view vhost = "/";
  engine::Mechanism mechanism = engine::Mechanism::plain;
  std::string_view connection_name{};
  Arguments client_properties{};
  std::uint16_t heartbeat_s = 60;
  std::uint32_t frame_max_bytes = 131072;
  std::uint16_t channel_max = 2047;
  engine::Duration handshake_timeout{10000};
  engine::Duration request_timeout{10000};
  engine::Duration close_timeout{10000};
  std::uint16_t default_prefetch = 250;
  std::size_t output_limit_bytes = 256 * 1024;
  std::uint64_t max_body_bytes = 128ull * 1024 * 1024;
};

class Observer;
class Metrics;
class CredentialsProvider;
struct ClientOptions;

// ClientOptions viewed, field for field (see connection.hpp for what each does).
struct ConnectOptions {
  EngineOptionsView engine{};
  std::optional<engine::Duration> connect_timeout{};
  std::string_view ca_pem{};
  std::string_view client_cert_pem{};
  std::string_view client_key_pem{};
  ReadBatching read_batching = adaptive_read_batching;
  SharedView<Observer> observer{};
  SharedView<Metrics> metrics{};
  SharedView<CredentialsProvider> credentials{};

  // The owned copy a connection keeps (defined in connection.hpp).
  [[nodiscard]] ClientOptions owned() const;
};

}  // namespace warren::client

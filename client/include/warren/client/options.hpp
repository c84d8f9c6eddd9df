// The options of every channel verb, by name: designated initializers with the defaults a
// RabbitMQ user expects, so no call site passes a positional boolean.
//
//   ch.queue_declare({.name = "orders", .durable = true,
//                     .arguments = {{"x-queue-type", "quorum"}}}, done);
//
// Every options struct is a view: its strings are string_views and its arguments an
// Arguments (see arguments.hpp), and a verb copies what it needs before it returns, so a
// temporary written inline is enough. That is also what makes the inline form safe inside a
// `co_await` on GCC 12, which copies a braced temporary bitwise and destroys it twice: a
// struct that owned a std::string crashed there. Whatever starts a verb later than the call
// that wrote it (an Asio token, a layer's redeclare) keeps its own copy: Kept<Options>.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "warren/client/arguments.hpp"
#include "warren/client/trace_context.hpp"
#include "warren/engine/types.hpp"
#include "warren/result.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/properties.hpp"

namespace warren::client {

using wire::FieldTable;  // built from `{{"key", value}, ...}` of typed values
using Properties = wire::BasicProperties;

// Every callback of the client gets one Result: a value when it worked, an Error (with the
// broker's reply code and text when the broker refused) when it did not.
template <class T>
using Callback = std::function<void(Result<T>)>;

struct ExchangeDeclareOptions {
  std::string_view name{};
  std::string_view type = "direct";  // direct, fanout, topic, headers, or a plugin's type
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  bool passive = false;  // only check that it exists (404 closes the channel if not)
  Arguments arguments{};
};

struct ExchangeDeleteOptions {
  std::string_view name{};
  bool if_unused = false;
};

// exchange.bind / exchange.unbind: messages flow from `source` to `destination`.
struct ExchangeBindOptions {
  std::string_view destination{};
  std::string_view source{};
  std::string_view routing_key{};
  Arguments arguments{};
};

struct QueueDeclareOptions {
  std::string_view name{};  // empty: the broker names it (the reply says what)
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  bool passive = false;
  Arguments arguments{};  // x-queue-type, x-expires, x-message-ttl, x-dead-letter-exchange, ...
};

// queue.bind / queue.unbind.
struct QueueBindOptions {
  std::string_view queue{};
  std::string_view exchange{};
  std::string_view routing_key{};
  Arguments arguments{};
};

struct QueuePurgeOptions {
  std::string_view queue{};
};

struct QueueDeleteOptions {
  std::string_view queue{};
  bool if_unused = false;
  bool if_empty = false;
};

struct QosOptions {
  std::uint16_t prefetch_count = 0;  // 0: no limit
  std::uint32_t prefetch_size = 0;   // RabbitMQ refuses anything but 0
  bool global = false;               // RabbitMQ: shared by the channel's consumers
};

struct FlowOptions {
  bool active = true;
};

struct RecoverOptions {
  bool requeue = true;  // RabbitMQ supports only requeue
};

struct GetOptions {
  std::string_view queue{};
  bool auto_ack = false;
};

struct ConsumeOptions {
  std::string_view queue{};
  std::string_view tag{};  // empty: the broker names it
  bool auto_ack = false;
  bool exclusive = false;
  // The subscription's prefetch (basic.qos sent with the consume). Unset: the connection's
  // default (250) unless the channel has a qos of its own. 0: no limit.
  std::optional<std::uint16_t> prefetch{};
  // x-stream-offset, x-priority, x-cancel-on-ha-failover, ...
  Arguments arguments{};
  // A stream subscription (implied by an x-stream-offset argument): its deliveries are never
  // rejected when it is cancelled, because RabbitMQ 3.10-3.12 closes the whole connection
  // (540) for a reject or nack of a stream delivery. They are left to the channel instead.
  bool stream = false;
  // The broker's consumer_timeout for this subscription, as the application knows it (RabbitMQ's
  // default is 30 min; x-consumer-timeout per queue on newer brokers). Set, a delivery held
  // unsettled past three quarters of it is told once (a `consumer.ack_late` record,
  // Connection::on_ack_late) while there is time to settle it; past the whole of it the broker
  // closes the channel (errc::ack_timeout). Unset: nothing is tracked per delivery.
  std::optional<engine::Duration> ack_timeout{};
};

// One publish. Views: the frames are copied before publish() returns.
struct Publish {
  std::string_view exchange{};  // empty: the default exchange (routing_key names the queue)
  std::string_view routing_key{};
  bool mandatory = false;   // unroutable: the outcome is errc::unroutable (312) in confirm mode
  Properties properties{};  // {.content_type = "application/json", .delivery_mode = 2, ...}
  // This publish's one deadline (wait while blocked, write, confirm). Unset: the channel's.
  std::optional<engine::Duration> timeout{};
  // Written into its headers as traceparent and tracestate (trace_context.hpp), in place of
  // any there; none (the default): the headers go as they are.
  TraceContext trace{};
};

// delivery_mode values, by name.
inline constexpr std::uint8_t transient = 1;
inline constexpr std::uint8_t persistent = 2;

// Text as bytes, for bodies.
[[nodiscard]] inline std::span<const std::byte> as_bytes(std::string_view text) noexcept {
  return std::as_bytes(std::span{text.data(), text.size()});
}

// A message body, viewed: bytes (a span, a std::vector<std::byte>, a Message's body()) or text
// (a std::string, a string_view, a literal), so `publish(p, "hello", ...)` and
// `publish(p, json_text, ...)` need no as_bytes. A publish copies it before it returns.
class Body {
 public:
  Body() = default;
  template <class Bytes>
    requires std::is_convertible_v<Bytes&&, std::span<const std::byte>>
  Body(Bytes&& bytes) noexcept : bytes_(std::forward<Bytes>(bytes)) {}  // NOLINT: implicit by design
  template <class Text>
    requires(!std::is_convertible_v<Text &&, std::span<const std::byte>>) && std::is_convertible_v<Text&&, std::string_view>
  Body(Text&& text) noexcept : bytes_(as_bytes(std::string_view(std::forward<Text>(text)))) {}  // NOLINT

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  operator std::span<const std::byte>() const noexcept { return bytes_; }  // NOLINT: to the layers below

 private:
  std::span<const std::byte> bytes_{};
};

}  // namespace warren::client

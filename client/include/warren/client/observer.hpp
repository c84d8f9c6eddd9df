// What happens inside a connection and the layers above it, for a log, a metrics or a tracing
// adapter: one Record per event, with a stable dotted name (docs/observability.md lists them).
// An observer is separate from the application's own hooks (on_closed, on_blocked, ...), so an
// adapter never takes a hook away from the application; null means off, one untaken branch
// per event. Records are handed over on the loop's thread, never inside an engine call, and
// their views last for the call only.
//
// No record carries a secret: a connection is named by its host and port (never a URL's user
// information), and no password, TLS key or certificate is ever put in a record's fields.
//
// An observer that wants spans (wants_spans() true) is also handed one SpanRecord per finished
// send, receive, process and settle, named and attributed per OpenTelemetry's messaging
// conventions, for its tracer to turn into real spans (start and end are given).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "warren/client/trace_context.hpp"
#include "warren/engine/types.hpp"
#include "warren/error.hpp"

namespace warren::client {

enum class Level : std::uint8_t { debug, info, warning, error };
[[nodiscard]] const char* to_string(Level level) noexcept;

struct Record {
  std::string_view name{};        // "connection.connected", "channel.closed", ...
  Level level = Level::info;
  std::string_view connection{};  // "host:port" of the connection it concerns
  engine::ChannelId channel = 0;  // the channel it concerns; 0: the connection itself
  const Error* cause = nullptr;   // why, where there is a why (a close's reply code and text)
  std::string_view subject{};     // what it is about, where there is one: a queue, a consumer
                                  // tag, the broker's reason for a block
};

// OpenTelemetry's span kinds, as the messaging conventions use them.
enum class SpanKind : std::uint8_t { producer, consumer, client };
[[nodiscard]] const char* to_string(SpanKind kind) noexcept;

// One span attribute: text, or a number when `is_number`.
struct SpanAttribute {
  std::string_view key{};
  std::string_view text{};
  std::int64_t number = 0;
  bool is_number = false;
};

// A finished span: a publish from the call to its outcome ("send"), a basic.get from the
// request to its message ("receive"), a push consumer's callback ("process"), an ack, nack or
// reject ("settle"). Its views last for the on_span call only.
struct SpanRecord {
  std::string_view name{};            // "{operation} {destination}": "publish orders", "process jobs"
  SpanKind kind = SpanKind::producer;  // send: producer; process: consumer; receive, settle: client
  std::string_view operation_type{};  // messaging.operation.type: send, receive, process, settle
  std::string_view operation_name{};  // messaging.operation.name: publish, get, process, ack, nack, reject
  TraceContext context{};             // this span's ids (a send span's are what its message carried)
  std::optional<TraceContext> parent{};  // none: a root span
  std::optional<TraceContext> link{};    // consumer side: the context the message carried
  std::chrono::system_clock::time_point start{};
  std::chrono::system_clock::time_point end{};
  std::string_view connection{};  // "host:port" (server.address, server.port)
  engine::ChannelId channel = 0;
  std::string_view exchange{};     // messaging.destination.name ("" is the default exchange)
  std::string_view routing_key{};  // messaging.rabbitmq.destination.routing_key
  std::string_view queue{};        // consumer side: messaging.destination.subscription.name
  std::uint64_t delivery_tag = 0;  // consumer side: messaging.rabbitmq.message.delivery_tag
  std::string_view message_id{};   // messaging.message.id
  std::string_view correlation_id{};  // messaging.message.conversation_id
  std::size_t body_bytes = 0;         // messaging.message.body.size (send, receive, process)
  const Error* error = nullptr;       // the span failed: error.type, and the span's status

  // The fields above under OpenTelemetry's attribute names, the empty ones left out.
  struct Attributes {
    std::array<SpanAttribute, 16> items{};
    std::size_t size = 0;
    [[nodiscard]] const SpanAttribute* begin() const noexcept { return items.data(); }
    [[nodiscard]] const SpanAttribute* end() const noexcept { return items.data() + size; }
  };
  [[nodiscard]] Attributes attributes() const noexcept;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_record(const Record& record) = 0;
  // Asked once, when a connection is made: true to be handed spans. A connection that records
  // them writes every publish's own span (a child of Publish::trace, else a new trace's root)
  // into its traceparent header, as OpenTelemetry's instrumentations do.
  [[nodiscard]] virtual bool wants_spans() const noexcept { return false; }
  virtual void on_span(const SpanRecord& span) { (void)span; }
};

}  // namespace warren::client

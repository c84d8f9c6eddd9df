// W3C Trace Context (https://www.w3.org/TR/trace-context/) carried in a message's headers, as
// the Java and .NET clients and OpenTelemetry's instrumentations for amqplib carry it: a
// `traceparent` header ("00-<trace id>-<parent span id>-<flags>") and, when there is one, a
// `tracestate` header, both long strings.
//
// A publish writes the context it is given (Publish::trace, by value: there is no hidden
// global), replacing any traceparent or tracestate in the publish's own headers; a delivery
// reads the one it carried (Delivery::trace, Message::trace) without decoding its other
// headers. Making spans is the application's tracer's: this type only carries the ids.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "warren/wire/field_value.hpp"

namespace warren::client {

struct TraceContext {
  std::array<std::uint8_t, 16> trace_id{};  // all zero: no context (nothing is written)
  std::array<std::uint8_t, 8> span_id{};    // the span that sent it: the receiver's parent
  std::uint8_t flags = 0;                   // bit 0: sampled
  std::string_view tracestate{};            // vendors' entries, passed on as they came (a view)

  // A trace id and a span id that are not all zero. Inline, in three word loads: every
  // publish asks it.
  [[nodiscard]] bool valid() const noexcept {
    std::uint64_t t0 = 0, t1 = 0, s = 0;
    std::memcpy(&t0, trace_id.data(), 8);
    std::memcpy(&t1, trace_id.data() + 8, 8);
    std::memcpy(&s, span_id.data(), 8);
    return (t0 | t1) != 0 && s != 0;
  }
  [[nodiscard]] bool sampled() const noexcept { return (flags & 1u) != 0; }

  // "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": version 00, lowercase hex.
  [[nodiscard]] std::string traceparent() const;
  // The same in a fixed buffer: what a publish writes, allocating nothing.
  [[nodiscard]] std::array<char, 55> traceparent_chars() const noexcept;
  // The W3C parsing rules: version 00 is exactly 55 characters; a later version (not ff) is
  // read by its first four fields and may carry more after a '-'; lowercase hex only; a trace
  // id or span id of zeros is no context. Nothing when `traceparent` is not one.
  [[nodiscard]] static std::optional<TraceContext> parse(std::string_view traceparent,
                                                         std::string_view tracestate = {});
  // The context in decoded headers: their traceparent and tracestate long strings, parsed;
  // the tracestate views the table.
  [[nodiscard]] static std::optional<TraceContext> from(const wire::FieldTable& headers);

  // The same trace with a new span id (random, never zero), the same flags and state: what a
  // stage that receives a message and sends another on writes into what it sends.
  [[nodiscard]] TraceContext child() const;
  // A new trace: new random ids, sampled.
  [[nodiscard]] static TraceContext new_root();

  friend bool operator==(const TraceContext&, const TraceContext&) = default;
};

// A tracestate as W3C Trace Context writes it: at most 32 comma-separated members of
// `key=value` (a key is lowercase letters, digits, '_', '-', '*', '/', or tenant@system; a value
// up to 256 printable ASCII characters without ',' or '=' and not ending in a space), at most
// 512 characters in all. What a publisher put in a header need not be one: a command warren
// runs is handed it only when it is (docs/warren-cli.md).
[[nodiscard]] bool valid_tracestate(std::string_view tracestate) noexcept;

}  // namespace warren::client

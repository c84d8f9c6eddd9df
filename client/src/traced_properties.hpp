// Internal: the properties a publish sends — its own, with a trace context (Publish::trace, or
// the publish's own span's when spans are recorded) in its headers in place of any traceparent
// and tracestate there. Holds the header text they point at, so it lives until the publish call
// returns (the engine encodes before that). And the reading side: a message's context.
// Not installed.
#pragma once

#include <array>
#include <optional>
#include <span>

#include "warren/client/options.hpp"

namespace warren::client::detail {

class TracedProperties {
 public:
  // Without a context the publish's own properties are used as they are, not copied, and
  // nothing of the traced copy is built (its 14 properties, the header entries, 55 bytes of
  // traceparent): this is on every publish's path.
  TracedProperties(const Publish& p, const TraceContext& trace) : used_(&p.properties) {
    if (!trace.valid()) return;
    Traced& t = traced_.emplace();
    t.properties = p.properties;
    used_ = &t.properties;
    t.traceparent = trace.traceparent_chars();
    // An empty tracestate removes one the headers had: it belonged to another trace's span.
    t.entries = {wire::StringEntry{"traceparent", std::string_view(t.traceparent.data(), t.traceparent.size())},
                 wire::StringEntry{"tracestate", trace.tracestate}};
    t.properties.headers = t.properties.headers.value_or(wire::TableRef{}).replacing(t.entries);
  }
  TracedProperties(const TracedProperties&) = delete;
  TracedProperties& operator=(const TracedProperties&) = delete;

  [[nodiscard]] const wire::BasicProperties& get() const noexcept { return *used_; }

 private:
  struct Traced {
    std::array<char, 55> traceparent;
    std::array<wire::StringEntry, 2> entries;
    wire::BasicProperties properties;
  };
  std::optional<Traced> traced_;
  const wire::BasicProperties* used_;
};

// The context a message's headers carry (traceparent, and tracestate viewed in them), read
// without decoding the other headers; nothing when none or a malformed one.
[[nodiscard]] std::optional<TraceContext> trace_of(const wire::BasicProperties& properties) noexcept;

}  // namespace warren::client::detail

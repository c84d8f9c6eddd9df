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
  // Without a context the publish's own properties are used as they are, not copied: this is
  // on every publish's path.
  TracedProperties(const Publish& p, const TraceContext& trace) : used_(&p.properties) {
    if (!trace.valid()) return;
    properties_ = p.properties;
    used_ = &properties_;
    traceparent_ = trace.traceparent_chars();
    // An empty tracestate removes one the headers had: it belonged to another trace's span.
    entries_ = {wire::StringEntry{"traceparent", std::string_view(traceparent_.data(), traceparent_.size())},
                wire::StringEntry{"tracestate", trace.tracestate}};
    properties_.headers = properties_.headers.value_or(wire::TableRef{}).replacing(entries_);
  }
  TracedProperties(const TracedProperties&) = delete;
  TracedProperties& operator=(const TracedProperties&) = delete;

  [[nodiscard]] const wire::BasicProperties& get() const noexcept { return *used_; }

 private:
  std::array<char, 55> traceparent_{};
  std::array<wire::StringEntry, 2> entries_{};
  wire::BasicProperties properties_;
  const wire::BasicProperties* used_;
};

// The context a message's headers carry (traceparent, and tracestate viewed in them), read
// without decoding the other headers; nothing when none or a malformed one.
[[nodiscard]] std::optional<TraceContext> trace_of(const wire::BasicProperties& properties) noexcept;

}  // namespace warren::client::detail

// Internal: the properties a publish sends — its own, with its trace context (Publish::trace)
// in its headers in place of any traceparent and tracestate there. Holds the header text they
// point at, so it lives until the publish call returns (the engine encodes before that).
// Not installed.
#pragma once

#include <array>
#include <span>

#include "warren/client/options.hpp"

namespace warren::client::detail {

class TracedProperties {
 public:
  explicit TracedProperties(const Publish& p) : properties_(p.properties) {
    if (!p.trace.valid()) return;
    traceparent_ = p.trace.traceparent_chars();
    // An empty tracestate removes one the headers had: it belonged to another trace's span.
    entries_ = {wire::StringEntry{"traceparent", std::string_view(traceparent_.data(), traceparent_.size())},
                wire::StringEntry{"tracestate", p.trace.tracestate}};
    properties_.headers = properties_.headers.value_or(wire::TableRef{}).replacing(entries_);
  }
  TracedProperties(const TracedProperties&) = delete;
  TracedProperties& operator=(const TracedProperties&) = delete;

  [[nodiscard]] const wire::BasicProperties& get() const noexcept { return properties_; }

 private:
  std::array<char, 55> traceparent_{};
  std::array<wire::StringEntry, 2> entries_{};
  wire::BasicProperties properties_;
};

}  // namespace warren::client::detail

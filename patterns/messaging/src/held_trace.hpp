// Internal: a trace context kept for a publish made later than the call that gave it (a put
// that waits for its declare, a publish that waits for the layer's channel). A TraceContext's
// tracestate views the caller's string; a HeldTrace owns a copy, and since it is only ever
// shared (never copied or moved), the view in it never dangles.
#pragma once

#include <memory>
#include <string>

#include "warren/client/trace_context.hpp"

namespace warren::messaging::detail {

struct HeldTrace {
  explicit HeldTrace(const client::TraceContext& given) : tracestate(given.tracestate), context(given) {
    context.tracestate = tracestate;
  }
  HeldTrace(const HeldTrace&) = delete;
  HeldTrace& operator=(const HeldTrace&) = delete;

  const std::string tracestate;
  client::TraceContext context;  // what a publish's `trace` is set to
};

[[nodiscard]] inline std::shared_ptr<const HeldTrace> hold(const client::TraceContext& trace) {
  return std::make_shared<const HeldTrace>(trace);
}

}  // namespace warren::messaging::detail

// Trace context the way processes carry it (OpenTelemetry's environment carrier): TRACEPARENT,
// and TRACESTATE when there is one, in the environment. Both ways: a span handed to a command
// warren runs (warren pipe, warren work run), and the context warren was started in, which
// what it sends continues (publish, rpc call, work put, log append).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "warren/client/trace_context.hpp"

namespace warren::cli {

// The context in warren's own environment; nothing when TRACEPARENT is absent or not a valid
// traceparent (ignored, not an error, as OpenTelemetry ignores it). Its tracestate views the
// environment, which lives as long as the process (warren never changes its own).
[[nodiscard]] inline std::optional<client::TraceContext> trace_from_environment() {
  const char* parent = std::getenv("TRACEPARENT");
  if (!parent) return std::nullopt;
  const char* state = std::getenv("TRACESTATE");
  return client::TraceContext::parse(parent, state ? state : "");
}

// A --header traceparent given explicitly wins over the environment.
[[nodiscard]] inline std::optional<client::TraceContext> trace_from_environment(const wire::FieldTable& headers) {
  if (headers.find("traceparent")) return std::nullopt;
  return trace_from_environment();
}

// The span for a command warren runs: TRACEPARENT, and TRACESTATE only when it is a valid one
// (client::valid_tracestate): it came from a publisher's header, and a child's environment (a
// shell's, at that) takes it as it is.
struct ChildTrace {
  std::vector<std::pair<std::string, std::string>> environment;
  bool tracestate_dropped = false;  // there was one, and it was not valid
};
[[nodiscard]] inline ChildTrace trace_environment(const client::TraceContext& span) {
  ChildTrace child{.environment = {{"TRACEPARENT", span.traceparent()}}};
  if (span.tracestate.empty()) return child;
  if (client::valid_tracestate(span.tracestate)) child.environment.emplace_back("TRACESTATE", std::string(span.tracestate));
  else child.tracestate_dropped = true;
  return child;
}

}  // namespace warren::cli

// A span handed to a command the way processes carry trace context: TRACEPARENT, and
// TRACESTATE when there is one, in its environment (warren pipe, warren work run).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "warren/client/trace_context.hpp"

namespace warren::cli {

[[nodiscard]] inline std::vector<std::pair<std::string, std::string>> trace_environment(const client::TraceContext& span) {
  std::vector<std::pair<std::string, std::string>> env{{"TRACEPARENT", span.traceparent()}};
  if (!span.tracestate.empty()) env.emplace_back("TRACESTATE", std::string(span.tracestate));
  return env;
}

}  // namespace warren::cli

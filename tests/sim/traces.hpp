// The layer simulation's trace invariant (tests/sim/layers.hpp): every message's trace id
// survives every hop — a worker's retry and dead-letter copies, a group member, an inbox, the
// backplane, a pipeline's output and dead-letter envelope, an RPC reply — with or without an
// observer recording spans. A message sent with a context keeps it; one sent without keeps
// whatever its first hop carried (a new root when spans are recorded, none otherwise).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "client/fake_driver.hpp"
#include "sim/ledger.hpp"
#include "warren/client/trace_context.hpp"

namespace warren::layersim {

class Traces {
 public:
  Traces(Ledger& ledger, bool spans) : ledger_(ledger), spans_(spans) {}

  [[nodiscard]] bool spans() const noexcept { return spans_; }

  // `key` was sent with `context`, or by a publish of the client's without one (whose first
  // publish names its trace, with spans). A message put on the model broker directly without
  // one is not registered: each of its copies may start a trace of its own.
  void sent(const std::string& key, const std::optional<client::TraceContext>& context) {
    auto& e = expected_[key];
    e.sent = true;
    if (context && context->valid()) e.id = context->trace_id;
  }
  // What `who` was handed of message `key`.
  void seen(const std::string& who, const std::string& key, const std::optional<client::TraceContext>& context) {
    auto it = expected_.find(key);
    if (it == expected_.end()) return;  // not one the simulation sent with a known context
    auto& e = it->second;
    const bool has = context && context->valid();
    if (e.id) {
      if (!has) return ledger_.violation("trace: " + who + " was handed " + key + " without the trace it was sent in");
      if (context->trace_id != *e.id) ledger_.violation("trace: " + who + " was handed " + key + " in another trace");
      return;
    }
    if (!has) return;
    if (!spans_) return ledger_.violation("trace: " + who + " was handed " + key + " in a trace nobody started");
    // A publish of it started a trace (spans recorded: its first, or a republish of one that
    // came without): every later hop stays in that trace.
    e.id = context->trace_id;
  }
  // A message the model broker holds (a dead-letter queue, a pipeline's output).
  void seen(const std::string& who, const std::string& key, const test::BrokerWorld::Message& m) {
    std::optional<client::TraceContext> context;
    if (m.table) context = client::TraceContext::from(*m.table);
    seen(who, key, context);
  }

 private:
  struct Expected {
    bool sent = false;
    std::optional<std::array<std::uint8_t, 16>> id;
  };
  Ledger& ledger_;
  bool spans_;
  std::map<std::string, Expected> expected_;
};

// A context for a message the simulation sends, or none: every other one goes without.
[[nodiscard]] inline std::optional<client::TraceContext> maybe_trace(int n) {
  if (n % 2 == 1) return std::nullopt;
  return client::TraceContext::new_root();
}

// Its traceparent and tracestate as headers, for a message put on the model broker directly.
inline void add_trace(wire::FieldTable& headers, const client::TraceContext& context) {
  headers.set("traceparent", context.traceparent());
  headers.set("tracestate", std::string("sim=1"));
}

}  // namespace warren::layersim

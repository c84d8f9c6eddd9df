// A verb's options (views: work_queue.hpp) with their own copy of every string and table,
// for an operation that starts later than the call that wrote them: an Asio token's
// initiation (asio.hpp; a deferred token, a call from another thread). Stored as owned strings
// and viewed only when used: moving a short std::string moves its characters, so a view taken
// earlier would dangle. May not: hand out a view that outlives it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "warren/messaging/direct.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/work_queue.hpp"

namespace warren::messaging {

// PutOptions copied.
struct KeptPut {
  explicit KeptPut(const PutOptions& o)
      : body(o.body), headers(o.headers.to_table()), message_id(o.message_id), timeout(o.timeout), trace(o.trace),
        tracestate(o.trace.tracestate) {}
  [[nodiscard]] PutOptions view() const {
    client::TraceContext context = trace;
    context.tracestate = tracestate;
    return {.body = body, .headers = headers, .message_id = message_id, .timeout = timeout, .trace = context};
  }
  std::string body{};
  client::FieldTable headers{};
  std::string message_id{};
  std::optional<engine::Duration> timeout{};
  client::TraceContext trace{};  // its tracestate is viewed only from `tracestate`, in view()
  std::string tracestate{};
};

// RetryOptions copied, as KeptPut.
struct KeptRetry {
  explicit KeptRetry(const RetryOptions& o) : error(o.error), headers(o.headers.to_table()) {}
  [[nodiscard]] RetryOptions view() const { return {.error = error, .headers = headers}; }
  std::string error{};
  client::FieldTable headers{};
};

// From copied, as KeptPut.
struct KeptFrom {
  explicit KeptFrom(const From& o) : position(o.position), offset(o.offset) {}
  [[nodiscard]] From view() const { return {.position = position, .offset = offset}; }
  std::string position{};
  std::optional<std::uint64_t> offset{};
};

// SendOptions with its four views copied, as KeptPut.
struct KeptSend {
  explicit KeptSend(const SendOptions& o)
      : address(o.address), body(o.body), reply_to(o.reply_to), correlation_id(o.correlation_id),
        headers(o.headers.to_table()), timeout(o.timeout) {}
  [[nodiscard]] SendOptions view() const {
    return {.address = address, .body = body, .reply_to = reply_to, .correlation_id = correlation_id,
            .headers = headers, .timeout = timeout};
  }
  std::string address, body, reply_to, correlation_id;
  client::FieldTable headers{};
  std::optional<engine::Duration> timeout{};
};

}  // namespace warren::messaging

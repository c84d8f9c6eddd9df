// The model broker's queue kinds (tests/client/fake_driver.hpp, for the layer simulation in
// tests/sim/layers): what a queue.declare's arguments make of a queue, as RabbitMQ 3.10 reads
// them. Classic and quorum queues hold messages until acked; a quorum queue counts a
// message's returns (x-delivery-count on its next delivery); x-message-ttl expires a message
// at the queue's head and x-dead-letter-exchange/-routing-key say where it, or a message
// rejected without requeue, goes (with x-death, as RabbitMQ writes it). A stream keeps every
// entry at an offset until retention drops the oldest; each consumer has its own position.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "warren/wire/field_table.hpp"

namespace warren::test {

struct ModelQueueInfo {
  std::string type = "classic";  // classic, quorum, stream
  std::optional<std::int64_t> ttl_ms;
  std::optional<std::string> dlx, dlrk;
  int exclusive_owner = 0;  // the broker connection's id, or 0
  std::optional<std::int64_t> expires_ms;  // x-expires (kept to compare, not enforced)

  [[nodiscard]] static std::optional<std::string> text(const wire::FieldValue& v) {
    if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
    return std::nullopt;
  }
  static ModelQueueInfo from(const wire::FieldTable& arguments) {
    ModelQueueInfo info;
    if (const auto* v = arguments.find("x-queue-type"); v && text(*v)) info.type = *text(*v);
    if (const auto* v = arguments.find("x-message-ttl")) info.ttl_ms = v->integer();
    if (const auto* v = arguments.find("x-dead-letter-exchange")) info.dlx = text(*v);
    if (const auto* v = arguments.find("x-dead-letter-routing-key")) info.dlrk = text(*v);
    if (const auto* v = arguments.find("x-expires")) info.expires_ms = v->integer();
    return info;
  }
  // RabbitMQ's 406 for a redeclare with other arguments: the first that differs, or nothing.
  [[nodiscard]] std::optional<std::string> inequivalent(const ModelQueueInfo& asked) const {
    if (asked.type != type) return "x-queue-type";
    if (asked.ttl_ms != ttl_ms) return "x-message-ttl";
    if (asked.dlx != dlx) return "x-dead-letter-exchange";
    if (asked.dlrk != dlrk) return "x-dead-letter-routing-key";
    if (asked.expires_ms != expires_ms) return "x-expires";
    return std::nullopt;
  }
};

// x-death and the x-first-death-*/x-last-death-* headers after one more dead-lettering, as
// RabbitMQ 3.10 keeps them: one x-death entry per (queue, reason), its count raised and moved
// to the front.
inline void add_death(wire::FieldTable& headers, const std::string& queue, const std::string& reason,
                      const std::string& exchange, const std::string& routing_key) {
  wire::FieldArray deaths;
  if (const auto* v = headers.find("x-death"))
    if (const auto* a = std::get_if<wire::FieldArray>(&v->value)) deaths = *a;
  std::int64_t count = 0;
  for (auto it = deaths.begin(); it != deaths.end(); ++it) {
    const auto* t = std::get_if<wire::FieldTable>(&it->value);
    if (!t) continue;
    const auto* q = t->find("queue");
    const auto* r = t->find("reason");
    if (q && r && ModelQueueInfo::text(*q) == queue && ModelQueueInfo::text(*r) == reason) {
      if (const auto* c = t->find("count")) count = c->integer().value_or(0);
      deaths.erase(it);
      break;
    }
  }
  wire::FieldTable entry{{"count", count + 1},
                         {"reason", reason},
                         {"queue", queue},
                         {"exchange", exchange},
                         {"routing-keys", wire::FieldArray{wire::FieldValue(routing_key)}}};
  deaths.insert(deaths.begin(), wire::FieldValue(std::move(entry)));
  headers.set("x-death", std::move(deaths));
  if (!headers.find("x-first-death-queue")) {
    headers.set("x-first-death-queue", queue);
    headers.set("x-first-death-reason", reason);
    headers.set("x-first-death-exchange", exchange);
  }
  headers.set("x-last-death-queue", queue);
  headers.set("x-last-death-reason", reason);
  headers.set("x-last-death-exchange", exchange);
}

}  // namespace warren::test

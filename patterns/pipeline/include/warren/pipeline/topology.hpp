// Opt-in topology: declare the exchanges, queues and bindings a pipeline needs, or verify
// they are there and fail fast at start, naming every missing or mismatched object in one
// error. The connection stays open either way: every check runs on a channel of its own.
//
// A passive declare sees only existence (404) and exclusivity (405), never a type,
// durability or arguments; so an object that exists is redeclared with the expected
// settings on a throwaway channel, and a 406 names the mismatch. (If the object vanished
// between the two, that redeclare creates it.) Bindings cannot be checked over AMQP 0-9-1
// without creating them: verify does not look at them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "warren/client/connection.hpp"

namespace warren::pipeline {

struct ExchangeSpec {
  std::string name{};
  std::string type = "direct";
  bool durable = true;
  wire::FieldTable arguments{};
};

struct QueueSpec {
  std::string name{};
  bool durable = true;
  bool auto_delete = false;
  wire::FieldTable arguments{};  // x-queue-type, x-dead-letter-exchange, x-delivery-limit, ...
};

struct BindingSpec {
  std::string queue{};
  std::string exchange{};
  std::string routing_key{};
};

struct Topology {
  std::vector<ExchangeSpec> exchanges{};
  std::vector<QueueSpec> queues{};
  std::vector<BindingSpec> bindings{};
};

// Declares everything in order (exchanges, queues, bindings); the first refusal ends it with
// the object's name in the error.
void declare_topology(const std::shared_ptr<client::Connection>& connection, const Topology& topology,
                      client::Callback<void> done);

struct VerifyOptions {
  // Redeclare each object that exists with its spec, to find a type, durability or argument
  // mismatch (406). Off: existence only (when the expected settings are not known).
  bool compare_settings = true;
};

// Checks every exchange and queue: one error (errc::not_found when something is missing,
// else errc::precondition_failed) listing each problem, or success.
void verify_topology(const std::shared_ptr<client::Connection>& connection, const Topology& topology,
                     VerifyOptions options, client::Callback<void> done);

// The queue's x-dead-letter-exchange argument, which a passive declare cannot see. The queue
// is redeclared on throwaway channels with `expected` as that argument, and the 406 read:
// "current is none" (nullopt: the queue has no DLX), "current is 'X'" (it is X); success means
// it is `expected`. A 406 about what RabbitMQ compares first (durable, auto_delete, x-expires,
// x-message-ttl) is answered by the next redeclare taking the queue's own value, at most six
// times. The connection stays open. A dead-letter exchange set by a policy is not an argument
// and cannot be seen this way (nullopt). Check that the queue exists first: should it vanish
// meanwhile, the redeclare creates it (with `expected` as its DLX).
void find_dead_letter_exchange(const std::shared_ptr<client::Connection>& connection, const std::string& queue,
                               const std::string& expected, client::Callback<std::optional<std::string>> done);

}  // namespace warren::pipeline

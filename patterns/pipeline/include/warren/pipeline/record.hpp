// A record: what flows through a pipeline. Transport-agnostic data: a body, the metadata the
// source knew about it (for a queue: the delivery's fields and its basic properties, owned),
// and headers as typed field values (an int stays a signed 32-bit value, a timestamp a
// timestamp). No I/O here; the queue transport maps deliveries into records and records into
// publishes (mapping.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "warren/wire/field_value.hpp"

namespace warren::pipeline {

// Where a record came from and the properties it carried, owned so a stage may keep them.
struct Metadata {
  std::string exchange{};     // the exchange it was published to ("" for the default exchange)
  std::string routing_key{};  // the routing key it was published with
  bool redelivered = false;
  std::uint32_t delivery_count = 0;  // a quorum queue's x-delivery-count, 0 when absent
  // The basic properties, carried to the destination unless a stage changes them.
  std::optional<std::string> content_type{}, content_encoding{}, correlation_id{}, reply_to{}, expiration{},
      message_id{}, type{}, user_id{}, app_id{};
  std::optional<std::uint8_t> delivery_mode{}, priority{};
  std::optional<std::uint64_t> timestamp{};  // POSIX seconds
};

struct Record {
  std::string body{};  // bytes; text when the producer sent text
  Metadata metadata{};
  wire::FieldTable headers{};  // typed values, published as they are
};

}  // namespace warren::pipeline

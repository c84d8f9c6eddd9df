// One readable line per event, for logs and test scripts. Secrets never appear in events.
#pragma once

#include <string>

#include "warren/engine/events.hpp"

namespace warren::engine {

[[nodiscard]] std::string to_string(const Event& event);
[[nodiscard]] std::string_view to_string(PublishOutcome outcome);
// The detail of a returned publish's error: the broker's text, then where the message was
// sent, so the error alone says which publish found no queue:
// `NO_ROUTE (exchange "orders", routing key "eu.1")`, `NO_ROUTE (the default exchange, routing key "q")`.
[[nodiscard]] std::string returned_detail(std::string_view reply_text, std::string_view exchange,
                                          std::string_view routing_key);

}  // namespace warren::engine

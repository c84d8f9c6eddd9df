// A delivered message as one JSON object, the shape `warren consume --json` prints:
// body (a string when it is valid UTF-8, else body_base64), exchange, routing_key,
// redelivered, delivery_tag, properties (absent ones omitted) and headers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "warren/engine/events.hpp"
#include "warren/result.hpp"

namespace warren::cli {

using Json = nlohmann::ordered_json;

[[nodiscard]] bool is_utf8(std::string_view text) noexcept;
[[nodiscard]] std::string base64(std::string_view bytes);
[[nodiscard]] Json field_value_json(const wire::FieldValue& value);
[[nodiscard]] Json field_table_json(const wire::FieldTable& table);
// Fails only when the headers table cannot be decoded (the engine validated it already).
[[nodiscard]] Result<Json> message_json(const engine::Message& message);

}  // namespace warren::cli

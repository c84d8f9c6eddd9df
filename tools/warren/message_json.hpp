// A delivered message as one JSON object, the shape `warren consume --json` prints:
// body (a string when it is valid UTF-8, else body_base64), exchange, routing_key,
// redelivered, delivery_tag, properties (absent ones omitted) and headers. Nothing of the
// message is lost and no message fails: headers with a repeated key or a key that is not UTF-8
// add header_entries (every entry in wire order, a key as key or key_base64; a nested table
// like that is {"table_entries": [...]}), and headers warren cannot decode are headers_base64
// with headers_error. Print it with json_line_escaped (untrusted_text.hpp).
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
[[nodiscard]] Json message_json(const engine::Message& message);
// One line of output: dumped with text kept UTF-8 (a byte that is not UTF-8 replaced, never
// thrown on), and what a terminal acts on escaped (json_line_escaped).
[[nodiscard]] std::string json_line(const Json& json);

}  // namespace warren::cli

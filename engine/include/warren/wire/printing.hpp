// Readable, canonical text for field tables and values: every value carries its type tag
// ("I:5", "S:\"text\"", "F:{...}"), bytes outside printable ASCII print as \xHH. Used in
// error details, logs and tests (the pika cross-check compares this form).
#pragma once

#include <string>
#include <string_view>

#include "warren/wire/field_value.hpp"

namespace warren::wire {

[[nodiscard]] std::string to_string(const FieldValue& value);
[[nodiscard]] std::string to_string(const FieldTable& table);
[[nodiscard]] std::string quote(std::string_view bytes);

}  // namespace warren::wire

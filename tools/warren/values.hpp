// What the command line says about a message or a declaration, turned into wire values:
// typed header and argument values, property names, and the rules that refuse what cannot
// be sent exactly as written. Pure: no I/O, so tests can drive it directly.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warren/result.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/properties.hpp"

namespace warren::cli {

// How an untyped `K=V` is read: a header value is always a long string; a declaration
// argument (x-max-length=10) is read as an integer or a boolean when it looks like one,
// because that is what the broker requires of such arguments.
enum class Untyped { string, infer };

// `K=V`, `K:int=V` (signed 64-bit, type l), `K:bool=true|false`, `K:float=V` (double, type
// d), `K:string=V`. Adds the entry to `table` (a later K replaces an earlier one).
[[nodiscard]] Result<void> add_typed_entry(wire::FieldTable& table, std::string_view spec, Untyped untyped);

// Properties by their names (content_type ... app_id). The strings live in the object, so
// the views in properties() stay valid as long as it does.
class MessageProperties {
 public:
  [[nodiscard]] Result<void> set(std::string_view spec);  // NAME=VALUE
  void set_persistent() { properties_.delivery_mode = 2; }
  void set_headers(const wire::FieldTable& headers) {
    if (!headers.empty()) properties_.headers = wire::TableRef(headers);
  }
  [[nodiscard]] const wire::BasicProperties& properties() const noexcept { return properties_; }

 private:
  std::deque<std::string> strings_;  // a deque: adding one never moves the others
  wire::BasicProperties properties_;
};

// The property names `set` accepts, in the order JSON output lists them.
inline constexpr std::string_view property_names[] = {
    "content_type", "content_encoding", "delivery_mode", "priority", "correlation_id", "reply_to",
    "expiration",   "message_id",       "timestamp",     "type",     "user_id",        "app_id"};

}  // namespace warren::cli

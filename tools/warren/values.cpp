#include "values.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace warren::cli {
namespace {

Error bad(std::string_view spec, std::string why) {
  return make_error(errc::invalid_argument, "'" + std::string(spec) + "': " + why);
}

template <class Int>
std::optional<Int> parse_int(std::string_view text) {
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return std::nullopt;
}

std::optional<double> parse_double(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string copy(text);  // strtod needs a terminated string; from_chars<double> is newer than GCC 12's
  char* end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

Result<void> add_typed_entry(wire::FieldTable& table, std::string_view spec, Untyped untyped) {
  auto eq = spec.find('=');
  if (eq == std::string_view::npos) return bad(spec, "expected K=V or K:type=V");
  std::string_view key = spec.substr(0, eq), text = spec.substr(eq + 1);
  std::string_view type;
  if (auto colon = key.rfind(':'); colon != std::string_view::npos) {
    type = key.substr(colon + 1);
    key = key.substr(0, colon);
  }
  if (key.empty()) return bad(spec, "the key is empty");
  if (key.size() > 128) return bad(spec, "a key is at most 128 bytes");
  wire::FieldValue value;
  if (type.empty()) {
    value = std::string(text);
    if (untyped == Untyped::infer) {
      if (auto i = parse_int<std::int64_t>(text)) value = *i;
      else if (auto b = parse_bool(text)) value = *b;
    }
  } else if (type == "string") {
    value = std::string(text);
  } else if (type == "int") {
    auto i = parse_int<std::int64_t>(text);
    if (!i) return bad(spec, "not a signed 64-bit integer");
    value = *i;
  } else if (type == "bool") {
    auto b = parse_bool(text);
    if (!b) return bad(spec, "a bool is true or false");
    value = *b;
  } else if (type == "float") {
    auto d = parse_double(text);
    if (!d) return bad(spec, "not a finite number");
    value = *d;
  } else {
    return bad(spec, "unknown type '" + std::string(type) + "' (string, int, bool, float)");
  }
  table.set(std::string(key), std::move(value));
  return {};
}

Result<void> MessageProperties::set(std::string_view spec) {
  auto eq = spec.find('=');
  if (eq == std::string_view::npos) return bad(spec, "expected NAME=VALUE");
  std::string_view name = spec.substr(0, eq), text = spec.substr(eq + 1);
  auto octet = [&](std::optional<std::uint8_t>& field, int low, int high) -> Result<void> {
    auto v = parse_int<int>(text);
    if (!v || *v < low || *v > high)
      return bad(spec, "expected an integer from " + std::to_string(low) + " to " + std::to_string(high));
    field = static_cast<std::uint8_t>(*v);
    return {};
  };
  if (name == "delivery_mode") return octet(properties_.delivery_mode, 1, 2);
  if (name == "priority") return octet(properties_.priority, 0, 255);
  if (name == "timestamp") {
    auto v = parse_int<std::uint64_t>(text);
    if (!v) return bad(spec, "expected seconds since 1970 as an integer");
    properties_.timestamp = *v;
    return {};
  }
  std::optional<std::string_view>* field = nullptr;
  if (name == "content_type") field = &properties_.content_type;
  else if (name == "content_encoding") field = &properties_.content_encoding;
  else if (name == "correlation_id") field = &properties_.correlation_id;
  else if (name == "reply_to") field = &properties_.reply_to;
  else if (name == "expiration") field = &properties_.expiration;
  else if (name == "message_id") field = &properties_.message_id;
  else if (name == "type") field = &properties_.type;
  else if (name == "user_id") field = &properties_.user_id;
  else if (name == "app_id") field = &properties_.app_id;
  if (!field) return bad(spec, "unknown property '" + std::string(name) + "'");
  if (text.size() > 255) return bad(spec, "a property is at most 255 bytes");
  if (name == "expiration" && !parse_int<std::uint32_t>(text)) return bad(spec, "expiration is milliseconds, as digits");
  *field = strings_.emplace_back(text);
  return {};
}

}  // namespace warren::cli

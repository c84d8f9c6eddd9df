#include "message_json.hpp"

#include "untrusted_text.hpp"

#include <cstdlib>
#include <set>

namespace warren::cli {
namespace {

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A string that is not valid UTF-8 cannot be a JSON string without losing bytes.
Json text_or_bytes(std::string_view text, const char* bytes_key) {
  if (is_utf8(text)) return Json(std::string(text));
  return Json{{bytes_key, base64(text)}};
}

// 123 with scale 2 is "1.23"; -5 with scale 3 is "-0.005".
// (Built by concatenation: GCC 12 warns falsely about std::string::insert here.)
std::string decimal_text(const wire::Decimal& d) {
  const std::string digits = std::to_string(std::llabs(static_cast<long long>(d.value)));
  const std::string sign = d.value < 0 ? "-" : "";
  if (d.scale == 0) return sign + digits;
  const std::size_t scale = d.scale;
  const std::string padded = digits.size() <= scale ? std::string(scale - digits.size() + 1, '0') + digits : digits;
  const std::size_t point = padded.size() - scale;
  return sign + padded.substr(0, point) + "." + padded.substr(point);
}

}  // namespace

bool is_utf8(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    const auto cp = utf8_at(text, i);
    if (!cp) return false;
    i += cp->length;
  }
  return true;
}

std::string base64(std::string_view bytes) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    std::uint32_t v = (std::uint32_t(std::uint8_t(bytes[i])) << 16) | (std::uint32_t(std::uint8_t(bytes[i + 1])) << 8) |
                      std::uint8_t(bytes[i + 2]);
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (std::size_t rest = bytes.size() - i; rest > 0) {
    std::uint32_t v = std::uint32_t(std::uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= std::uint32_t(std::uint8_t(bytes[i + 1])) << 8;
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += rest == 2 ? alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Json field_value_json(const wire::FieldValue& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) return v;
        else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int16_t> ||
                           std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>)
          return static_cast<std::int64_t>(v);
        else if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t> ||
                           std::is_same_v<T, std::uint32_t>)
          return static_cast<std::uint64_t>(v);
        else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<double>(v);
        else if constexpr (std::is_same_v<T, wire::Decimal>) return Json{{"decimal", decimal_text(v)}};
        else if constexpr (std::is_same_v<T, std::string>) return text_or_bytes(v, "bytes_base64");
        else if constexpr (std::is_same_v<T, wire::FieldArray>) {
          Json array = Json::array();
          for (const auto& item : v) array.push_back(field_value_json(item));
          return array;
        } else if constexpr (std::is_same_v<T, wire::Timestamp>) return Json{{"timestamp", v.seconds}};
        else if constexpr (std::is_same_v<T, wire::FieldTable>) return field_table_json(v);
        else if constexpr (std::is_same_v<T, wire::Void>) return nullptr;
        else return Json{{"bytes_base64", base64(v.bytes)}};  // wire::ByteArray
      },
      value.value);
}

bool faithful_as_object(const wire::FieldTable& table) {
  std::set<std::string_view> keys;
  for (const auto& entry : table.entries)
    if (!is_utf8(entry.key) || !keys.insert(entry.key).second) return false;
  return true;
}

Json field_entries_json(const wire::FieldTable& table) {
  Json entries = Json::array();
  for (const auto& entry : table.entries) {
    Json e = Json::object();
    if (is_utf8(entry.key)) e["key"] = entry.key;
    else e["key_base64"] = base64(entry.key);
    e["value"] = field_value_json(entry.value);
    entries.push_back(std::move(e));
  }
  return entries;
}

Json field_table_json(const wire::FieldTable& table) {
  // An object keeps one value per key, and a key must be text: a table with a repeated key or
  // a key that is not UTF-8 is shown entry by entry instead, in wire order, nothing lost.
  if (!faithful_as_object(table)) return Json{{"table_entries", field_entries_json(table)}};
  Json object = Json::object();
  for (const auto& entry : table.entries) object[entry.key] = field_value_json(entry.value);
  return object;
}

Json message_json(const engine::Message& m) {
  Json out;
  std::string_view body = as_text(m.body);
  if (is_utf8(body)) out["body"] = std::string(body);
  else out["body_base64"] = base64(body);
  out["exchange"] = std::string(m.exchange);
  out["routing_key"] = std::string(m.routing_key);
  out["redelivered"] = m.redelivered;
  out["delivery_tag"] = m.delivery_tag;
  Json properties = Json::object();
  Json headers = Json::object();
  if (const auto* p = m.properties) {
    auto text = [&](const char* name, const std::optional<std::string_view>& v) {
      if (v) properties[name] = text_or_bytes(*v, "bytes_base64");
    };
    text("content_type", p->content_type);
    text("content_encoding", p->content_encoding);
    if (p->delivery_mode) properties["delivery_mode"] = *p->delivery_mode;
    if (p->priority) properties["priority"] = *p->priority;
    text("correlation_id", p->correlation_id);
    text("reply_to", p->reply_to);
    text("expiration", p->expiration);
    text("message_id", p->message_id);
    if (p->timestamp) properties["timestamp"] = *p->timestamp;
    text("type", p->type);
    text("user_id", p->user_id);
    text("app_id", p->app_id);
    if (p->headers) {
      auto table = p->headers->to_table();
      if (!table.ok()) {
        // A table warren cannot decode (nested deeper than 64, which RabbitMQ delivers): its
        // bytes and why, never the end of the stream.
        const auto bytes = p->headers->encoded();
        out["properties"] = std::move(properties);
        out["headers"] = Json::object();
        out["headers_base64"] = base64(as_text(bytes));
        out["headers_error"] = table.error().to_string();
        return out;
      }
      if (faithful_as_object(*table)) {
        headers = field_table_json(*table);
      } else {
        // The unique text keys as an object, as ever, and every entry beside it.
        for (const auto& entry : table->entries)
          if (is_utf8(entry.key) && !headers.contains(entry.key)) headers[entry.key] = field_value_json(entry.value);
        out["properties"] = std::move(properties);
        out["headers"] = std::move(headers);
        out["header_entries"] = field_entries_json(*table);
        return out;
      }
    }
  }
  out["properties"] = std::move(properties);
  out["headers"] = std::move(headers);
  return out;
}

std::string json_line(const Json& json) {
  return json_line_escaped(json.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace warren::cli

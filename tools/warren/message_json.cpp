#include "message_json.hpp"

#include <cstdlib>

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
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
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

Json field_table_json(const wire::FieldTable& table) {
  Json object = Json::object();
  for (const auto& entry : table.entries) object[entry.key] = field_value_json(entry.value);
  return object;
}

Result<Json> message_json(const engine::Message& m) {
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
      if (!table.ok()) return table.error();
      headers = field_table_json(*table);
    }
  }
  out["properties"] = std::move(properties);
  out["headers"] = std::move(headers);
  return out;
}

}  // namespace warren::cli

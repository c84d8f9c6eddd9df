#include "warren/wire/printing.hpp"

#include <cstdio>

#include "warren/wire/method_codec.hpp"

namespace warren::wire {

std::string quote(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02X", u);
      out += buf;
    }
  }
  out += '"';
  return out;
}

std::string to_string(const FieldValue& value) {
  // Appended piece by piece: GCC 12 at -O3 warns falsely on `"literal" + std::string&&`.
  std::string out(1, value.type_tag());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Void>) return;
        out += ':';
        if constexpr (std::is_same_v<T, bool>) out += x ? "true" : "false";
        else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(x));
          out += buf;
        } else if constexpr (std::is_integral_v<T>) out += std::to_string(x);
        else if constexpr (std::is_same_v<T, Decimal>) {
          out += std::to_string(x.scale);
          out += ':';
          out += std::to_string(x.value);
        } else if constexpr (std::is_same_v<T, std::string>) out += quote(x);
        else if constexpr (std::is_same_v<T, ByteArray>) out += quote(x.bytes);
        else if constexpr (std::is_same_v<T, Timestamp>) out += std::to_string(x.seconds);
        else if constexpr (std::is_same_v<T, FieldTable>) out += to_string(x);
        else if constexpr (std::is_same_v<T, FieldArray>) {
          out += '[';
          for (std::size_t i = 0; i < x.size(); ++i) {
            if (i) out += ", ";
            out += to_string(x[i]);
          }
          out += ']';
        }
      },
      value.value);
  return out;
}

std::string to_string(const FieldTable& table) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : table.entries) {
    if (!first) out += ", ";
    first = false;
    out += quote(key);
    out += ": ";
    out += to_string(value);
  }
  return out + "}";
}

namespace detail {

std::string PrintVisitor::quote(std::string_view s) { return wire::quote(s); }

void PrintVisitor::table(const char* n, const TableRef& t) {
  auto decoded = t.to_table();
  field(n, decoded.ok() ? to_string(*decoded) : "<invalid table>");
}

}  // namespace detail
}  // namespace warren::wire

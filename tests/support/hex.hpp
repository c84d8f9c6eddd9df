// Test helpers: bytes from readable hex ("0a 00 0a"), and hex from bytes.
#pragma once

#include <cctype>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace warren::test {

inline std::vector<std::byte> from_hex(std::string_view hex) {
  std::vector<std::byte> out;
  int hi = -1;
  for (char c : hex) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '|') continue;
    int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                          : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    if (v < 0 || v > 15) throw std::invalid_argument("bad hex digit");
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(std::byte(hi * 16 + v));
      hi = -1;
    }
  }
  if (hi >= 0) throw std::invalid_argument("odd number of hex digits");
  return out;
}

inline std::string to_hex(std::span<const std::byte> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    auto v = std::to_integer<unsigned>(b);
    out += digits[v >> 4];
    out += digits[v & 15];
  }
  return out;
}

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span{s.data(), s.size()});
}

}  // namespace warren::test

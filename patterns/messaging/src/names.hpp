// Internal: what the layer accepts as a prefix or a name. Queue names are short strings (255
// bytes), and a prefix and a name must leave room for each other and for the suffixes the
// layer adds (`.retry.<ms>`, `.dlq`, `.log.`), so each caller passes its own bound.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace warren::messaging::detail {

// 1 to max_size of letters, digits, '.', '-', '_', ':'.
[[nodiscard]] inline bool valid_name(std::string_view s, std::size_t max_size) {
  if (s.empty() || s.size() > max_size) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_' || c == ':';
  });
}

}  // namespace warren::messaging::detail

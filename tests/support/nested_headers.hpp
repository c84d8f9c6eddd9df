// Test helper: a header table's bytes nested `depth` tables deep ({"n": {"n": ... {}}}),
// for headers the client's decoder refuses (it stops at max_table_depth, 64) while the frame
// itself is valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace warren::test {

inline std::vector<std::byte> nested_headers(int depth = 100) {
  std::vector<std::byte> deep;  // innermost: an empty table
  for (int i = 0; i < depth; ++i) {
    std::vector<std::byte> outer{std::byte{1}, std::byte{'n'}, std::byte{'F'}};  // key "n", a table
    const auto n = static_cast<std::uint32_t>(deep.size());
    for (int shift = 24; shift >= 0; shift -= 8) outer.push_back(std::byte(n >> shift));
    outer.insert(outer.end(), deep.begin(), deep.end());
    deep = std::move(outer);
  }
  return deep;
}

}  // namespace warren::test

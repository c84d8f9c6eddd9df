// Rule: validation and decoding agree on every input (both accept or both refuse, with the
// same error); the depth-free bounds check (validate_table_bounds) agrees with validation on
// everything but depth (it accepts what validation accepts, and refuses with the same code
// whatever validation refuses for another reason than nesting); an accepted table re-encodes to bytes of the same size that decode to the same
// table and re-encode to themselves (only a boolean's non-zero octet is normalised to 1); the
// top-level cursor and find_long_string agree with the decoder.
#include <cstdlib>
#include <cstring>
#include <variant>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warren::wire;
  auto bytes = std::span(reinterpret_cast<const std::byte*>(data), size);
  auto valid = validate_table(bytes);
  auto decoded = decode_table(bytes);
  if (valid.ok() != decoded.ok()) std::abort();
  auto bounds = validate_table_bounds(bytes);
  if (valid.ok() && !bounds.ok()) std::abort();
  if (!valid.ok() && valid.error().code != warren::make_error_code(warren::errc::table_too_deep) &&
      (bounds.ok() || bounds.error().code != valid.error().code))
    std::abort();
  if (!valid.ok()) {
    if (!(valid.error() == decoded.error())) std::abort();
    return 0;
  }
  // The cursor steps over the entries the decoder makes, in order, and a long string found by
  // key is the decoder's first entry of that key.
  TableCursor cursor(bytes);
  std::size_t i = 0;
  while (auto e = cursor.next()) {
    if (i >= decoded->entries.size() || decoded->entries[i].key != e->key) std::abort();
    ++i;
  }
  if (i != decoded->entries.size()) std::abort();
  for (const auto& entry : decoded->entries) {
    const auto found = find_long_string(bytes, entry.key);
    const auto* text = std::get_if<std::string>(&decoded->find(entry.key)->value);
    if (text ? (!found || *found != *text) : found.has_value()) std::abort();
  }
  auto encode = [](const FieldTable& t) {
    auto n = encoded_table_size(t);
    if (!n.ok()) std::abort();
    std::vector<std::byte> out(*n);
    Writer w(out.data());
    encode_table_content(w, t);
    return out;
  };
  auto once = encode(*decoded);
  if (once.size() != size) std::abort();
  auto again = decode_table(once);
  if (!again.ok() || to_string(*again) != to_string(*decoded)) std::abort();
  auto twice = encode(*again);
  if (twice.size() != once.size()) std::abort();
  if (!once.empty() && std::memcmp(twice.data(), once.data(), once.size()) != 0) std::abort();
  return 0;
}

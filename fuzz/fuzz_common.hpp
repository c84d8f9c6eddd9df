// Shared checks of the fuzz targets. A failed check aborts, which libFuzzer reports.
#pragma once

#include <cstdlib>
#include <span>
#include <vector>

#include "warren/wire/wire.hpp"

namespace warren::fuzz {

inline void check_method_round_trip(std::span<const std::byte> payload) {
  using namespace warren::wire;
  auto m = decode_method(payload);
  if (!m.ok()) {
    if (m.error().detail.empty()) std::abort();  // every refusal says why
    return;
  }
  auto size = method_payload_size(*m);
  if (!size.ok()) std::abort();  // what was decoded can always be encoded
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  encode_method_payload(w, *m);
  if (static_cast<std::size_t>(w.position() - out.data()) != out.size()) std::abort();
  auto again = decode_method(out);
  if (!again.ok() || to_string(*again) != to_string(*m)) std::abort();
}

inline void check_header_round_trip(std::span<const std::byte> payload) {
  using namespace warren::wire;
  auto h = decode_content_header(payload);
  if (!h.ok()) {
    if (h.error().detail.empty()) std::abort();
    return;
  }
  auto size = content_header_size(h->properties);
  if (!size.ok()) std::abort();
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  encode_content_header(w, h->body_size, h->properties);
  auto again = decode_content_header(out);
  if (!again.ok() || again->body_size != h->body_size ||
      to_string(again->properties) != to_string(h->properties))
    std::abort();
}

}  // namespace warren::fuzz

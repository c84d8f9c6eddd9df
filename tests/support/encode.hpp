// Test helpers: a method's payload or whole frame as a byte vector.
#pragma once

#include <vector>

#include "warren/wire/wire.hpp"

namespace warren::test {

inline std::vector<std::byte> encode_payload(const wire::Method& m) {
  auto size = wire::method_payload_size(m);
  if (!size.ok()) throw std::runtime_error(size.error().to_string());
  std::vector<std::byte> out(*size);
  wire::Writer w(out.data());
  wire::encode_method_payload(w, m);
  if (static_cast<std::size_t>(w.position() - out.data()) != out.size())
    throw std::logic_error("payload size and encoder disagree");
  return out;
}

inline std::vector<std::byte> encode_frame(std::uint16_t channel, const wire::Method& m,
                                           std::uint32_t frame_max = 131072) {
  wire::OutputQueue q;
  auto r = wire::write_method_frame(q, channel, m, frame_max);
  if (!r.ok()) throw std::runtime_error(r.error().to_string());
  return q.to_vector();
}

}  // namespace warren::test

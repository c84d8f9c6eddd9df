// A method's identity on the wire: its class id and method id.
#pragma once

#include <cstdint>

namespace warren::wire {

struct MethodId {
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;

  [[nodiscard]] constexpr std::uint32_t key() const noexcept {
    return (std::uint32_t{class_id} << 16) | method_id;
  }
  friend constexpr bool operator==(MethodId, MethodId) = default;
};

}  // namespace warren::wire

// The broker's version as connection.start announced it (server-properties "version"), for
// code whose behaviour must differ between releases (RabbitMQ 3.10 vs 4.x: delivery limits,
// stream rejects). Compared as major.minor.patch; anything after the numbers (a "-rc.1", a
// "+build") is ignored.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string_view>

namespace warren::client {

struct BrokerVersion {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::uint32_t patch = 0;
  auto operator<=>(const BrokerVersion&) const = default;
};

// "3.10.8" -> {3, 10, 8}; "4.1" -> {4, 1, 0}. Nothing for text that does not start with
// "<digits>.<digits>".
[[nodiscard]] std::optional<BrokerVersion> parse_broker_version(std::string_view text) noexcept;

}  // namespace warren::client

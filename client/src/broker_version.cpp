#include "warren/client/broker_version.hpp"

#include "warren/client/connection.hpp"

#include <charconv>
#include <string>
#include <variant>

namespace warren::client {
namespace {

// Digits at the front of `text` (moved past them), or nothing.
std::optional<std::uint32_t> number(std::string_view& text) noexcept {
  std::uint32_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return n;
}

}  // namespace

std::optional<BrokerVersion> parse_broker_version(std::string_view text) noexcept {
  BrokerVersion v;
  auto major = number(text);
  if (!major || !text.starts_with('.')) return std::nullopt;
  text.remove_prefix(1);
  auto minor = number(text);
  if (!minor) return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  if (text.starts_with('.')) {
    text.remove_prefix(1);
    if (auto patch = number(text)) v.patch = *patch;
  }
  return v;
}

}  // namespace warren::client


namespace warren::client {

std::optional<BrokerVersion> Connection::broker_version() const {
  const auto* v = server_properties_.find("version");
  if (!v) return std::nullopt;
  const auto* text = std::get_if<std::string>(&v->value);
  if (!text) return std::nullopt;
  return parse_broker_version(*text);
}

}  // namespace warren::client

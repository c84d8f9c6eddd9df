// Internal: OpenTelemetry's error.type for an Error, a low-cardinality name for why (a metric's
// label, a span's attribute). Not installed.
#pragma once

#include <string_view>

#include "warren/error.hpp"

namespace warren::client::detail {

[[nodiscard]] inline std::string_view error_type(const Error& e) noexcept {
  if (e.code == make_error_code(errc::connection_closed)) return "connection_closed";
  if (e.code == make_error_code(errc::channel_closed)) return "channel_closed";
  if (e.code == make_error_code(errc::invalid_argument)) return "invalid_argument";
  if (e.code == make_error_code(errc::timeout)) return "timeout";
  if (e.code == make_error_code(errc::string_too_long)) return "string_too_long";
  if (e.code == make_error_code(errc::nacked)) return "nacked";
  if (e.code == make_error_code(errc::unroutable)) return "unroutable";
  return "_OTHER";
}

}  // namespace warren::client::detail

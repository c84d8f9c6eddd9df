#include "warren/client/observer.hpp"

#include <charconv>

#include "error_type.hpp"

namespace warren::client {

const char* to_string(Level level) noexcept {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warning: return "warning";
    case Level::error: return "error";
  }
  return "?";
}

const char* to_string(SpanKind kind) noexcept {
  switch (kind) {
    case SpanKind::producer: return "producer";
    case SpanKind::consumer: return "consumer";
    case SpanKind::client: return "client";
  }
  return "?";
}

SpanRecord::Attributes SpanRecord::attributes() const noexcept {
  Attributes out;
  auto text = [&](std::string_view key, std::string_view value, bool keep_empty = false) {
    if (!value.empty() || keep_empty) out.items[out.size++] = SpanAttribute{.key = key, .text = value};
  };
  auto number = [&](std::string_view key, std::int64_t value) {
    out.items[out.size++] = SpanAttribute{.key = key, .number = value, .is_number = true};
  };
  text("messaging.system", "rabbitmq");
  text("messaging.operation.type", operation_type);
  text("messaging.operation.name", operation_name);
  // The default exchange is "" by the conventions: kept, so a send always names its destination.
  text("messaging.destination.name", exchange, operation_type == "send");
  text("messaging.rabbitmq.destination.routing_key", routing_key);
  text("messaging.destination.subscription.name", queue);
  if (delivery_tag != 0) number("messaging.rabbitmq.message.delivery_tag", static_cast<std::int64_t>(delivery_tag));
  text("messaging.message.id", message_id);
  text("messaging.message.conversation_id", correlation_id);
  if (operation_type != "settle") number("messaging.message.body.size", static_cast<std::int64_t>(body_bytes));
  // "host:port": the port after the last colon (an IPv6 host is bracketed).
  if (const auto colon = connection.rfind(':'); colon != std::string_view::npos) {
    std::string_view host = connection.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    text("server.address", host);
    int port = 0;
    const auto digits = connection.substr(colon + 1);
    if (std::from_chars(digits.data(), digits.data() + digits.size(), port).ec == std::errc{}) number("server.port", port);
  }
  if (error) text("error.type", detail::error_type(*error));
  return out;
}

}  // namespace warren::client

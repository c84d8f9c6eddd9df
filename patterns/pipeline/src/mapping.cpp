#include "warren/pipeline/mapping.hpp"


namespace warren::pipeline {
namespace {

std::optional<std::string> owned(const std::optional<std::string_view>& v) {
  if (!v) return std::nullopt;
  return std::string(*v);
}
std::optional<std::string_view> view(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::string_view(*v);
}

// A quorum queue counts its returns in x-delivery-count (a long or an int by version).
std::uint32_t delivery_count(const wire::FieldTable& headers) {
  const wire::FieldValue* v = headers.find("x-delivery-count");
  const auto n = v ? v->integer() : std::nullopt;
  return !n || *n < 0 ? 0 : static_cast<std::uint32_t>(*n);
}

}  // namespace

Result<Record> record_from(const client::Message& message) {
  auto headers = message.headers();
  if (!headers) return headers.error();
  Record r = record_without_headers(message);
  r.headers = std::move(*headers);
  r.metadata.delivery_count = delivery_count(r.headers);
  return r;
}

Record record_without_headers(const client::Message& message) {
  Record r;
  r.body.assign(message.body_text());
  const auto& p = message.properties();
  Metadata& m = r.metadata;
  m.exchange = message.exchange();
  m.routing_key = message.routing_key();
  m.redelivered = message.redelivered();
  m.content_type = owned(p.content_type);
  m.content_encoding = owned(p.content_encoding);
  m.correlation_id = owned(p.correlation_id);
  m.reply_to = owned(p.reply_to);
  m.expiration = owned(p.expiration);
  m.message_id = owned(p.message_id);
  m.type = owned(p.type);
  m.user_id = owned(p.user_id);
  m.app_id = owned(p.app_id);
  m.delivery_mode = p.delivery_mode;
  m.priority = p.priority;
  m.timestamp = p.timestamp;
  return r;
}

bool carries_user_id(std::string_view user_id, std::string_view login_user) noexcept {
  return !login_user.empty() && user_id == login_user;
}

client::Properties properties_of(const Metadata& m, const wire::FieldTable& headers, std::string_view login_user) {
  client::Properties p;
  p.content_type = view(m.content_type);
  p.content_encoding = view(m.content_encoding);
  if (!headers.empty()) p.headers = wire::TableRef(headers);
  p.delivery_mode = m.delivery_mode;
  p.priority = m.priority;
  p.correlation_id = view(m.correlation_id);
  p.reply_to = view(m.reply_to);
  p.expiration = view(m.expiration);
  p.message_id = view(m.message_id);
  p.timestamp = m.timestamp;
  p.type = view(m.type);
  // Another user's user_id would make RabbitMQ refuse the publish (406, closing the channel):
  // the record must not claim its source's publisher, and the stage still sees it (metadata).
  if (m.user_id && carries_user_id(*m.user_id, login_user)) p.user_id = view(m.user_id);
  p.app_id = view(m.app_id);
  return p;
}

}  // namespace warren::pipeline

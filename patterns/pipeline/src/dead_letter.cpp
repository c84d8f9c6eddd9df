#include "warren/pipeline/dead_letter.hpp"

#include <string>

namespace warren::pipeline {
namespace {

constexpr std::size_t frame_overhead = 8;  // type, channel, size (7) and the end byte
constexpr std::string_view cut_mark = "...";

wire::FieldTable build(const EnvelopeFacts& f, std::string message) {
  wire::FieldTable t;
  if (f.headers) t = *f.headers;
  t.set(std::string(envelope::original_exchange), std::string(f.exchange));
  t.set(std::string(envelope::original_routing_key), std::string(f.routing_key));
  t.set(std::string(envelope::error_type), f.error ? f.error->type : std::string());
  t.set(std::string(envelope::error_message), std::move(message));
  t.set(std::string(envelope::attempt), static_cast<std::int64_t>(f.attempt));
  t.set(std::string(envelope::failed_at), wire::Timestamp{f.failed_at_s});
  t.set(std::string(envelope::pipeline), std::string(f.pipeline));
  if (f.expiration) t.set(std::string(envelope::original_expiration), std::string(*f.expiration));
  if (f.user_id) t.set(std::string(envelope::original_user_id), std::string(*f.user_id));
  return t;
}

Result<std::size_t> header_size(client::Properties base, const wire::FieldTable& headers) {
  base.headers = wire::TableRef(headers);
  return wire::content_header_size(base);
}

}  // namespace

Result<wire::FieldTable> envelope_headers(const EnvelopeFacts& facts, client::Properties base,
                                          std::uint32_t frame_max_bytes) {
  const std::string message = facts.error ? facts.error->message : std::string();
  const std::size_t budget = frame_max_bytes > frame_overhead ? frame_max_bytes - frame_overhead : 0;
  auto whole = build(facts, message);
  auto size = header_size(base, whole);
  if (!size) return size.error();
  if (*size <= budget || frame_max_bytes == 0) return whole;
  // Over budget: the message is the one field we may shorten. What it must lose is known
  // exactly (every other field's size is fixed), so one cut suffices.
  const std::size_t over = *size - budget;
  if (over + cut_mark.size() > message.size()) {
    auto empty = build(facts, std::string());
    auto bare = header_size(base, empty);
    if (!bare) return bare.error();
    if (*bare > budget)
      return make_error(errc::frame_too_large, "the dead-letter envelope's headers need " + std::to_string(*bare) +
                                                   " bytes, over the frame_max budget of " + std::to_string(budget));
    return empty;
  }
  std::size_t keep = message.size() - over - cut_mark.size();
  // Cut on a UTF-8 character boundary: never leave half a character before the mark.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0) == 0x80) --keep;
  return build(facts, message.substr(0, keep) + std::string(cut_mark));
}

std::uint32_t attempt_of(const Metadata& metadata) noexcept {
  if (metadata.delivery_count > 0) return metadata.delivery_count + 1;
  return metadata.redelivered ? 2 : 1;
}

}  // namespace warren::pipeline

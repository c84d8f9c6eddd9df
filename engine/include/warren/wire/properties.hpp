// The content header: body size and the 14 basic properties behind a property-flags word.
// Decoded properties are views into the frame; nothing is allocated on decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "warren/always_inline.hpp"
#include "warren/result.hpp"
#include "warren/wire/byte_io.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/field_table.hpp"
#include "warren/wire/method_codec.hpp"

namespace warren::wire {

struct BasicProperties {
  std::optional<std::string_view> content_type{};
  std::optional<std::string_view> content_encoding{};
  std::optional<TableRef> headers{};
  std::optional<std::uint8_t> delivery_mode{};  // 1 transient, 2 persistent
  std::optional<std::uint8_t> priority{};
  std::optional<std::string_view> correlation_id{};
  std::optional<std::string_view> reply_to{};
  std::optional<std::string_view> expiration{};  // milliseconds, as text
  std::optional<std::string_view> message_id{};
  std::optional<std::uint64_t> timestamp{};    // POSIX seconds
  std::optional<std::string_view> type{};
  std::optional<std::string_view> user_id{};
  std::optional<std::string_view> app_id{};
  std::optional<std::string_view> cluster_id{};  // reserved by 0-9-1; kept so bytes round-trip

  // Each property in flag order, the first at bit 15 of the flags word.
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.shortstr(15, "content_type", s.content_type);
    v.shortstr(14, "content_encoding", s.content_encoding);
    v.table(13, "headers", s.headers);
    v.octet(12, "delivery_mode", s.delivery_mode);
    v.octet(11, "priority", s.priority);
    v.shortstr(10, "correlation_id", s.correlation_id);
    v.shortstr(9, "reply_to", s.reply_to);
    v.shortstr(8, "expiration", s.expiration);
    v.shortstr(7, "message_id", s.message_id);
    v.timestamp(6, "timestamp", s.timestamp);
    v.shortstr(5, "type", s.type);
    v.shortstr(4, "user_id", s.user_id);
    v.shortstr(3, "app_id", s.app_id);
    v.shortstr(2, "cluster_id", s.cluster_id);
  }
};

struct ContentHeader {
  std::uint16_t class_id = 60;
  std::uint64_t body_size = 0;
  std::uint16_t property_flags = 0;  // as decoded; lets a reused header skip clearing
  BasicProperties properties{};
};

inline constexpr std::uint16_t basic_class_id = 60;

// Decodes a header frame's payload. Refuses a class other than basic, a flag for a property
// that does not exist, a property that runs past the payload, and trailing bytes.
[[nodiscard]] Result<ContentHeader> decode_content_header(std::span<const std::byte> payload);
// The same, into `out` in place (the hot path: no copy of the properties).
[[nodiscard]] Result<void> decode_content_header(std::span<const std::byte> payload, ContentHeader& out);

// Payload size of a basic content header with these properties (class, weight, size, flags
// included); refuses strings over 255 bytes and tables that cannot be encoded.
[[nodiscard]] Result<std::size_t> content_header_size(const BasicProperties& properties);
void encode_content_header(Writer& out, std::uint64_t body_size, const BasicProperties& properties);

// The same from one walk of the properties, for the publish path: the size and the flags word
// together, then the encoder writes the properties the flags name (none: nothing to walk).
// Inline, as is the walk: a publish plans a header per message, and a call with a Result
// around it cost more than the walk of 14 absent properties.
struct ContentHeaderPlan {
  std::size_t size = 0;  // the payload's bytes
  std::uint16_t flags = 0;
};

namespace detail {

struct PropertiesSizer {
  std::size_t size = content_header_min_bytes;
  std::uint16_t flags = 0;
  const char* failed = nullptr;
  // Its error is built again out of line. A property's own TableRef, never a temporary: it
  // outlives the sizer.
  const TableRef* failed_table = nullptr;

  template <class T>
  WARREN_ALWAYS_INLINE bool mark(int bit, const std::optional<T>& v) {
    if (v) flags |= static_cast<std::uint16_t>(1u << bit);
    return v.has_value();
  }
  WARREN_ALWAYS_INLINE void shortstr(int b, const char* n, const std::optional<std::string_view>& s) {
    if (!mark(b, s)) return;
    if (s->size() > 255 && !failed) failed = n;
    size += 1 + s->size();
  }
  WARREN_ALWAYS_INLINE void octet(int b, const char*, const std::optional<std::uint8_t>& v) { size += mark(b, v) ? 1 : 0; }
  WARREN_ALWAYS_INLINE void timestamp(int b, const char*, const std::optional<std::uint64_t>& v) {
    size += mark(b, v) ? 8 : 0;
  }
  WARREN_ALWAYS_INLINE void table(int b, const char* n, const std::optional<TableRef>& t) {
    if (!mark(b, t)) return;
    auto bytes = t->encoded_size();
    if (!bytes.ok()) {
      if (!failed) {
        failed = n;
        failed_table = &*t;
      }
      return;
    }
    size += 4 + *bytes;
  }
};

// The properties the flags word names, in flag order, from `at`; returns where they end. A
// pointer, not the caller's Writer: a Writer passed by reference keeps its position in memory
// through the whole frame that inlines it.
[[nodiscard]] std::byte* encode_properties(std::byte* at, const BasicProperties& properties);

}  // namespace detail

[[nodiscard]] WARREN_ALWAYS_INLINE Result<ContentHeaderPlan> plan_content_header(const BasicProperties& properties) {
  detail::PropertiesSizer s;
  BasicProperties::fields(properties, s);
  if (s.failed) [[unlikely]]
    return detail::unsizable_field("property", s.failed, s.failed_table);
  return ContentHeaderPlan{.size = s.size, .flags = s.flags};
}

WARREN_ALWAYS_INLINE void encode_content_header(Writer& out, std::uint64_t body_size,
                                                const BasicProperties& properties, ContentHeaderPlan plan) {
  out.u16(basic_class_id);
  out.u16(0);  // weight
  out.u64(body_size);
  out.u16(plan.flags);
  if (plan.flags != 0) out = Writer(detail::encode_properties(out.position(), properties));
}

[[nodiscard]] std::string to_string(const BasicProperties& properties);

}  // namespace warren::wire

#include "warren/wire/properties.hpp"

#include "warren/always_inline.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/printing.hpp"

namespace warren::wire {
namespace {

struct Flags {
  std::uint16_t word = 0;
  template <class T>
  void mark(int bit, const std::optional<T>& v) { if (v) word |= static_cast<std::uint16_t>(1u << bit); }
  void shortstr(int b, const char*, const std::optional<std::string_view>& s) { mark(b, s); }
  void octet(int b, const char*, const std::optional<std::uint8_t>& v) { mark(b, v); }
  void timestamp(int b, const char*, const std::optional<std::uint64_t>& v) { mark(b, v); }
  void table(int b, const char*, const std::optional<TableRef>& t) { mark(b, t); }
};

struct Encoder {
  Writer& out;
  WARREN_ALWAYS_INLINE void shortstr(int, const char*, const std::optional<std::string_view>& s) {
    if (!s) return;
    out.u8(static_cast<std::uint8_t>(s->size()));
    out.text(*s);
  }
  WARREN_ALWAYS_INLINE void octet(int, const char*, const std::optional<std::uint8_t>& v) { if (v) out.u8(*v); }
  WARREN_ALWAYS_INLINE void timestamp(int, const char*, const std::optional<std::uint64_t>& v) { if (v) out.u64(*v); }
  void table(int, const char*, const std::optional<TableRef>& t) {
    if (!t) return;
    std::byte* size_at = out.position();
    out.u32(0);
    t->encode_content(out);
    patch_u32(size_at, static_cast<std::uint32_t>(out.position() - size_at - 4));
  }
};

struct Decoder {
  Reader& in;
  std::uint16_t flags;
  const char* failed = nullptr;
  std::optional<Error> table_error;

  WARREN_ALWAYS_INLINE bool present(int bit) const { return (flags >> bit) & 1u; }
  WARREN_ALWAYS_INLINE void check(const char* n) { if (in.failed() && !failed) failed = n; }
  WARREN_ALWAYS_INLINE void shortstr(int b, const char* n, std::optional<std::string_view>& s) {
    if (!present(b)) return;
    s = in.shortstr();
    check(n);
  }
  WARREN_ALWAYS_INLINE void octet(int b, const char* n, std::optional<std::uint8_t>& v) {
    if (!present(b)) return;
    v = in.u8();
    check(n);
  }
  WARREN_ALWAYS_INLINE void timestamp(int b, const char* n, std::optional<std::uint64_t>& v) {
    if (!present(b)) return;
    v = in.u64();
    check(n);
  }
  void table(int b, const char* n, std::optional<TableRef>& t) {
    if (!present(b)) return;
    auto content = in.bytes(in.u32());
    check(n);
    if (failed) return;
    auto valid = validate_table(content);
    // Headers nested deeper than the decoder goes are still a well-formed message. Refusing
    // the frame would close the connection over that one message, and the broker would hand
    // it to the next consumer, and the next (a poison message). They are kept as bytes, and
    // to_table() answers table_too_deep for that message alone.
    if (!valid.ok() && valid.error().code == make_error_code(errc::table_too_deep) && validate_table_bounds(content).ok())
      valid = Result<void>();
    if (!valid.ok()) {
      failed = n;
      table_error = valid.error();
      return;
    }
    t = TableRef::validated(content);
  }
};

struct Printer {
  std::string out;
  void field(const char* n, const std::string& v) {
    if (!out.empty()) out += ", ";
    out += n;
    out += '=';
    out += v;
  }
  void shortstr(int, const char* n, const std::optional<std::string_view>& s) { if (s) field(n, quote(*s)); }
  void octet(int, const char* n, const std::optional<std::uint8_t>& v) { if (v) field(n, std::to_string(*v)); }
  void timestamp(int, const char* n, const std::optional<std::uint64_t>& v) { if (v) field(n, std::to_string(*v)); }
  void table(int, const char* n, const std::optional<TableRef>& t) {
    if (!t) return;
    auto decoded = t->to_table();
    field(n, decoded.ok() ? to_string(*decoded) : "<invalid table>");
  }
};

// Bits 15..2 name properties; bit 0 says another flags word follows. Basic has no 15th
// property, so any bit set in a later word names a property nobody can decode.
constexpr std::uint16_t known_flags = 0xFFFC;

}  // namespace

Result<ContentHeader> decode_content_header(std::span<const std::byte> payload) {
  ContentHeader h;
  if (auto r = decode_content_header(payload, h); !r.ok()) return std::move(r).error();
  return h;
}

Result<void> decode_content_header(std::span<const std::byte> payload, ContentHeader& h) {
  Reader in(payload);
  if (h.property_flags != 0) {  // a header decoded into before had properties: clear them
    h.properties = BasicProperties{};
    h.property_flags = 0;
  }
  h.class_id = in.u16();
  in.u16();  // weight: unused, always 0
  h.body_size = in.u64();
  std::uint16_t flags = in.u16();
  if (in.failed())
    return make_error(errc::frame_too_small, "content header of " + std::to_string(payload.size()) +
                                                 " bytes is shorter than 14");
  if (h.class_id != basic_class_id)
    return make_error(errc::malformed_payload,
                      "content header for class " + std::to_string(h.class_id) + ", not basic (60)");
  for (std::uint16_t more = flags; more & 1u;) {
    more = in.u16();
    if (in.failed()) return make_error(errc::malformed_payload, "property flags continuation runs past the frame");
    if (more & 0xFFFE) return make_error(errc::malformed_payload, "property flags name a property basic does not have");
  }
  if (flags & ~known_flags & 0xFFFE)
    return make_error(errc::malformed_payload, "property flag bit 1 names no basic property");
  h.property_flags = flags & known_flags;
  if ((flags & known_flags) == 0) {
    if (in.remaining() != 0)
      return make_error(errc::malformed_payload, "content header has " + std::to_string(in.remaining()) +
                                                     " bytes after its last property");
    return {};
  }
  Decoder d{in, flags, nullptr, {}};
  BasicProperties::fields(h.properties, d);
  if (d.failed) {
    if (d.table_error) {
      Error e = *d.table_error;
      e.detail = std::string("content header ") + d.failed + ": " + e.detail;
      return e;
    }
    return make_error(errc::malformed_payload, std::string("property ") + d.failed + " runs past the content header");
  }
  if (in.remaining() != 0)
    return make_error(errc::malformed_payload, "content header has " + std::to_string(in.remaining()) +
                                                   " bytes after its last property");
  return {};
}

Result<std::size_t> content_header_size(const BasicProperties& properties) {
  auto plan = plan_content_header(properties);
  if (!plan.ok()) return std::move(plan).error();
  return plan->size;
}

std::byte* detail::encode_properties(std::byte* at, const BasicProperties& properties) {
  Writer out(at);
  Encoder e{out};
  BasicProperties::fields(properties, e);
  return out.position();
}

void encode_content_header(Writer& out, std::uint64_t body_size, const BasicProperties& properties) {
  Flags f;
  BasicProperties::fields(properties, f);
  encode_content_header(out, body_size, properties, ContentHeaderPlan{.size = 0, .flags = f.word});
}

std::string to_string(const BasicProperties& properties) {
  Printer p;
  BasicProperties::fields(properties, p);
  return "{" + p.out + "}";
}

}  // namespace warren::wire

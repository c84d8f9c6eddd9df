// The visitors that read a method struct's fields() list: one sizes it, one writes it, one
// reads it, one prints it. Bits that follow one another share an octet, low bit first.
// Templates, so a hot path (publish, deliver) compiles to straight-line code for its method.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "warren/always_inline.hpp"
#include "warren/result.hpp"
#include "warren/wire/byte_io.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/field_table.hpp"
#include "warren/wire/method_id.hpp"

namespace warren::wire::detail {

class SizeVisitor {
 public:
  std::size_t size = 0;
  const char* failed_field = nullptr;
  // The table that could not be sized: its error is built again out of line, so a success
  // neither builds nor destroys an Error (the publish path sizes a method per message). A
  // method's own TableRef member, never a temporary: it outlives the sizer.
  const TableRef* failed_table = nullptr;

  WARREN_ALWAYS_INLINE void octet(const char*, std::uint8_t) { end_bits(); size += 1; }
  WARREN_ALWAYS_INLINE void short_(const char*, std::uint16_t) { end_bits(); size += 2; }
  WARREN_ALWAYS_INLINE void long_(const char*, std::uint32_t) { end_bits(); size += 4; }
  WARREN_ALWAYS_INLINE void longlong(const char*, std::uint64_t) { end_bits(); size += 8; }
  WARREN_ALWAYS_INLINE void bit(const char*, bool) {
    if (bits_ == 0 || bits_ == 8) { size += 1; bits_ = 0; }
    ++bits_;
  }
  WARREN_ALWAYS_INLINE void shortstr(const char* name, std::string_view s) {
    end_bits();
    if (s.size() > 255 && !failed_field) failed_field = name;
    size += 1 + s.size();
  }
  WARREN_ALWAYS_INLINE void longstr(const char* name, std::string_view s) {
    end_bits();
    if (s.size() > UINT32_MAX && !failed_field) failed_field = name;
    size += 4 + s.size();
  }
  WARREN_ALWAYS_INLINE void secret_longstr(const char* name, std::string_view s) { longstr(name, s); }
  WARREN_ALWAYS_INLINE void table(const char* name, const TableRef& t) {
    end_bits();
    auto n = t.encoded_size();
    if (!n.ok()) {
      if (!failed_field) { failed_field = name; failed_table = &t; }
      return;
    }
    size += 4 + *n;
  }
  WARREN_ALWAYS_INLINE void reserved_short() { short_("", 0); }
  WARREN_ALWAYS_INLINE void reserved_shortstr() { shortstr("", {}); }
  WARREN_ALWAYS_INLINE void reserved_longstr() { longstr("", {}); }
  WARREN_ALWAYS_INLINE void reserved_bit() { bit("", false); }

 private:
  WARREN_ALWAYS_INLINE void end_bits() { bits_ = 0; }
  int bits_ = 0;
};

class EncodeVisitor {
 public:
  explicit EncodeVisitor(Writer& out) : out_(out) {}

  WARREN_ALWAYS_INLINE void octet(const char*, std::uint8_t v) { end_bits(); out_.u8(v); }
  WARREN_ALWAYS_INLINE void short_(const char*, std::uint16_t v) { end_bits(); out_.u16(v); }
  WARREN_ALWAYS_INLINE void long_(const char*, std::uint32_t v) { end_bits(); out_.u32(v); }
  WARREN_ALWAYS_INLINE void longlong(const char*, std::uint64_t v) { end_bits(); out_.u64(v); }
  WARREN_ALWAYS_INLINE void bit(const char*, bool v) {
    if (bits_ == 0 || bits_ == 8) {
      bit_octet_ = out_.position();
      out_.u8(0);
      bits_ = 0;
    }
    if (v) *bit_octet_ |= std::byte(1u << bits_);
    ++bits_;
  }
  WARREN_ALWAYS_INLINE void shortstr(const char*, std::string_view s) {
    end_bits();
    out_.u8(static_cast<std::uint8_t>(s.size()));
    out_.text(s);
  }
  WARREN_ALWAYS_INLINE void longstr(const char*, std::string_view s) {
    end_bits();
    out_.u32(static_cast<std::uint32_t>(s.size()));
    out_.text(s);
  }
  WARREN_ALWAYS_INLINE void secret_longstr(const char* name, std::string_view s) { longstr(name, s); }
  WARREN_ALWAYS_INLINE void table(const char*, const TableRef& t) {
    end_bits();
    std::byte* size_at = out_.position();
    out_.u32(0);
    t.encode_content(out_);
    patch_u32(size_at, static_cast<std::uint32_t>(out_.position() - size_at - 4));
  }
  WARREN_ALWAYS_INLINE void reserved_short() { short_("", 0); }
  WARREN_ALWAYS_INLINE void reserved_shortstr() { shortstr("", {}); }
  WARREN_ALWAYS_INLINE void reserved_longstr() { longstr("", {}); }
  WARREN_ALWAYS_INLINE void reserved_bit() { bit("", false); }

 private:
  WARREN_ALWAYS_INLINE void end_bits() { bits_ = 0; }
  Writer& out_;
  std::byte* bit_octet_ = nullptr;
  int bits_ = 0;
};

class DecodeVisitor {
 public:
  explicit DecodeVisitor(Reader& in) : in_(in) {}

  const char* failed_field = nullptr;  // the first field that ran past the payload or was invalid
  std::optional<Error> table_error;

  WARREN_ALWAYS_INLINE void octet(const char* n, std::uint8_t& v) { end_bits(); v = in_.u8(); check(n); }
  WARREN_ALWAYS_INLINE void short_(const char* n, std::uint16_t& v) { end_bits(); v = in_.u16(); check(n); }
  WARREN_ALWAYS_INLINE void long_(const char* n, std::uint32_t& v) { end_bits(); v = in_.u32(); check(n); }
  WARREN_ALWAYS_INLINE void longlong(const char* n, std::uint64_t& v) { end_bits(); v = in_.u64(); check(n); }
  WARREN_ALWAYS_INLINE void bit(const char* n, bool& v) {
    if (bits_ == 0 || bits_ == 8) {
      octet_ = in_.u8();
      check(n);
      bits_ = 0;
    }
    v = ((octet_ >> bits_) & 1u) != 0;
    ++bits_;
  }
  WARREN_ALWAYS_INLINE void shortstr(const char* n, std::string_view& s) { end_bits(); s = in_.shortstr(); check(n); }
  WARREN_ALWAYS_INLINE void longstr(const char* n, std::string_view& s) { end_bits(); s = in_.longstr(); check(n); }
  WARREN_ALWAYS_INLINE void secret_longstr(const char* n, std::string_view& s) { longstr(n, s); }
  WARREN_ALWAYS_INLINE void table(const char* n, TableRef& t) {
    end_bits();
    auto content = in_.bytes(in_.u32());
    check(n);
    if (failed_field) return;
    auto valid = validate_table(content);
    if (!valid.ok()) {
      failed_field = n;
      table_error = std::move(valid).error();
      return;
    }
    t = TableRef::validated(content);
  }
  WARREN_ALWAYS_INLINE void reserved_short() { std::uint16_t v; short_("reserved", v); }
  WARREN_ALWAYS_INLINE void reserved_shortstr() { std::string_view s; shortstr("reserved", s); }
  WARREN_ALWAYS_INLINE void reserved_longstr() { std::string_view s; longstr("reserved", s); }
  WARREN_ALWAYS_INLINE void reserved_bit() { bool b; bit("reserved", b); }

 private:
  WARREN_ALWAYS_INLINE void end_bits() { bits_ = 0; }
  WARREN_ALWAYS_INLINE void check(const char* n) {
    if (in_.failed() && !failed_field) failed_field = n;
  }
  Reader& in_;
  std::uint8_t octet_ = 0;
  int bits_ = 0;
};

// Readable one-line form for logs and test failures. Secrets are never shown.
class PrintVisitor {
 public:
  std::string out;

  void octet(const char* n, std::uint8_t v) { field(n, std::to_string(v)); }
  void short_(const char* n, std::uint16_t v) { field(n, std::to_string(v)); }
  void long_(const char* n, std::uint32_t v) { field(n, std::to_string(v)); }
  void longlong(const char* n, std::uint64_t v) { field(n, std::to_string(v)); }
  void bit(const char* n, bool v) { field(n, v ? "true" : "false"); }
  void shortstr(const char* n, std::string_view s) { field(n, quote(s)); }
  void longstr(const char* n, std::string_view s) { field(n, quote(s)); }
  void secret_longstr(const char* n, std::string_view) { field(n, "<hidden>"); }
  void table(const char* n, const TableRef& t);
  void reserved_short() {}
  void reserved_shortstr() {}
  void reserved_longstr() {}
  void reserved_bit() {}

  static std::string quote(std::string_view s);

 private:
  void field(const char* n, const std::string& v) {
    if (!out.empty()) out += ", ";
    out += n;
    out += '=';
    out += v;
  }
};

// Why a method (or, named "property", a content header) could not be sized (out of line: the
// hot path only tests for it). The table's error is asked of it again.
[[nodiscard]] Error unsizable_field(std::string_view method, const char* field, const TableRef* table);

// The size of a method's payload, class and method ids included; refuses over-long strings.
template <class M>
[[nodiscard]] WARREN_ALWAYS_INLINE Result<std::size_t> payload_size(const M& m) {
  SizeVisitor v;
  M::fields(m, v);
  if (v.failed_field) [[unlikely]]
    return unsizable_field(M::name, v.failed_field, v.failed_table);
  return method_header_bytes + v.size;
}

template <class M>
WARREN_ALWAYS_INLINE void encode_payload(Writer& out, const M& m) {
  out.u16(M::id.class_id);
  out.u16(M::id.method_id);
  EncodeVisitor v(out);
  M::fields(m, v);
}

// Decodes the fields after the class and method ids into `m`; every byte must be used.
template <class M>
[[nodiscard]] Result<void> decode_fields_into(Reader& in, M& m) {
  DecodeVisitor v(in);
  M::fields(m, v);
  if (v.failed_field) {
    if (v.table_error) {
      Error e = std::move(*v.table_error);
      e.detail = std::string(M::name) + " " + v.failed_field + ": " + e.detail;
      return e;
    }
    return make_error(errc::malformed_payload,
                      std::string(M::name) + " field " + v.failed_field + " runs past the frame");
  }
  if (in.remaining() != 0)
    return make_error(errc::malformed_payload, std::string(M::name) + " has " +
                                                   std::to_string(in.remaining()) +
                                                   " bytes after its last field");
  return {};
}

}  // namespace warren::wire::detail

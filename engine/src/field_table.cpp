#include "warren/wire/field_table.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "warren/wire/constants.hpp"

namespace warren::wire {

const FieldValue* FieldTable::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

FieldTable& FieldTable::set(std::string key, FieldValue value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  entries.emplace_back(std::move(key), std::move(value));
  return *this;
}

namespace {

// Moves `in` past a scalar value whose tag was just read; false for a table, an array or a tag
// that is no field type (the caller's to handle).
bool skip_scalar(Reader& in, char tag) {
  switch (tag) {
    case 't': case 'b': case 'B': (void)in.u8(); return true;
    case 's': case 'u': (void)in.u16(); return true;
    case 'I': case 'i': case 'f': (void)in.u32(); return true;
    case 'l': case 'd': case 'T': (void)in.u64(); return true;
    case 'D': (void)in.u8(); (void)in.u32(); return true;
    case 'S': case 'x': (void)in.longstr(); return true;
    case 'V': return true;
    default: return false;
  }
}

// Decoding walks the bytes once; the same walker validates (Build=false) or builds owning
// values (Build=true), so the two can never disagree about what a valid table is.
struct Failure {
  errc code{};
  std::string detail;
};

template <bool Build>
class Walker {
 public:
  explicit Walker(std::span<const std::byte> bytes) : in_(bytes) {}

  bool table(int depth, FieldTable* out) {
    if (depth > max_table_depth) return fail(errc::table_too_deep, too_deep());
    while (in_.remaining() > 0) {
      std::string_view key = in_.shortstr();
      if (in_.failed()) return fail(errc::malformed_payload, "field table key runs past its table");
      FieldValue* slot = nullptr;
      if constexpr (Build) slot = &out->entries.emplace_back(std::string(key), FieldValue{}).value;
      if (!value(depth, slot)) return false;
    }
    return true;
  }

  bool array(int depth, FieldArray* out) {
    if (depth > max_table_depth) return fail(errc::table_too_deep, too_deep());
    while (in_.remaining() > 0) {
      FieldValue* slot = nullptr;
      if constexpr (Build) slot = &out->emplace_back();
      if (!value(depth, slot)) return false;
    }
    return true;
  }

  Failure failure;

 private:
  static std::string too_deep() {
    return "field tables nested deeper than " + std::to_string(max_table_depth);
  }
  bool fail(errc code, std::string detail) {
    failure = {code, std::move(detail)};
    return false;
  }

  template <class T>
  void put(FieldValue* slot, T v) {
    if constexpr (Build) slot->value = std::move(v);
  }

  bool value(int depth, FieldValue* slot) {
    auto tag = static_cast<char>(in_.u8());
    switch (tag) {
      case 't': put(slot, in_.u8() != 0); break;
      case 'b': put(slot, static_cast<std::int8_t>(in_.u8())); break;
      case 'B': put(slot, in_.u8()); break;
      case 's': put(slot, static_cast<std::int16_t>(in_.u16())); break;
      case 'u': put(slot, in_.u16()); break;
      case 'I': put(slot, static_cast<std::int32_t>(in_.u32())); break;
      case 'i': put(slot, in_.u32()); break;
      case 'l': put(slot, static_cast<std::int64_t>(in_.u64())); break;
      case 'f': put(slot, std::bit_cast<float>(in_.u32())); break;
      case 'd': put(slot, std::bit_cast<double>(in_.u64())); break;
      case 'D': {
        auto scale = in_.u8();
        put(slot, Decimal{scale, static_cast<std::int32_t>(in_.u32())});
        break;
      }
      case 'S': {
        auto text = in_.longstr();
        if constexpr (Build) put(slot, std::string(text));
        break;
      }
      case 'x': {
        auto text = in_.longstr();
        if constexpr (Build) put(slot, ByteArray{std::string(text)});
        break;
      }
      case 'T': put(slot, Timestamp{in_.u64()}); break;
      case 'V': put(slot, Void{}); break;
      case 'A':
      case 'F': {
        auto nested = in_.bytes(in_.u32());
        if (in_.failed()) break;
        Walker inner(nested);
        bool ok;
        if (tag == 'A') {
          FieldArray* arr = nullptr;
          if constexpr (Build) arr = &slot->value.template emplace<FieldArray>();
          ok = inner.array(depth + 1, arr);
        } else {
          FieldTable* tbl = nullptr;
          if constexpr (Build) tbl = &slot->value.template emplace<FieldTable>();
          ok = inner.table(depth + 1, tbl);
        }
        if (!ok) {
          failure = std::move(inner.failure);
          return false;
        }
        break;
      }
      default:
        if (in_.failed()) break;
        return fail(errc::unknown_field_type,
                    "field value type tag 0x" + hex(static_cast<unsigned char>(tag)) +
                        " is not one of " + std::string(field_type_tags));
    }
    if (in_.failed()) return fail(errc::malformed_payload, "field value runs past its table");
    return true;
  }

  static std::string hex(unsigned v) {
    const char* digits = "0123456789ABCDEF";
    return {digits[(v >> 4) & 15], digits[v & 15]};
  }

  Reader in_;
};

// Size of one value after its tag; nullopt-like failure via the Failure out-param.
struct TableSizer {
  Failure failure;
  bool failed = false;

  std::size_t table(const FieldTable& t, int depth) {
    if (depth > max_table_depth) return fail(errc::table_too_deep, "field tables nested too deep to encode");
    std::size_t n = 0;
    for (const auto& [key, v] : t.entries) {
      if (key.size() > 255) return fail(errc::string_too_long, "field table key over 255 bytes: " + key.substr(0, 32) + "...");
      n += 1 + key.size() + 1 + value(v, depth);
      if (failed) return 0;
    }
    return n;
  }
  std::size_t array(const FieldArray& a, int depth) {
    if (depth > max_table_depth) return fail(errc::table_too_deep, "field arrays nested too deep to encode");
    std::size_t n = 0;
    for (const auto& v : a) {
      n += 1 + value(v, depth);
      if (failed) return 0;
    }
    return n;
  }
  std::size_t longstr(std::size_t size) {
    if (size > std::numeric_limits<std::uint32_t>::max()) return fail(errc::string_too_long, "long string over 4 GiB");
    return 4 + size;
  }
  std::size_t nested(std::size_t size) { return longstr(size); }

  std::size_t value(const FieldValue& v, int depth) {
    return std::visit(
        [&](const auto& x) -> std::size_t {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) return longstr(x.size());
          else if constexpr (std::is_same_v<T, ByteArray>) return longstr(x.bytes.size());
          else if constexpr (std::is_same_v<T, FieldTable>) return nested(table(x, depth + 1));
          else if constexpr (std::is_same_v<T, FieldArray>) return nested(array(x, depth + 1));
          else if constexpr (std::is_same_v<T, Decimal>) return 5;
          else if constexpr (std::is_same_v<T, Timestamp>) return 8;
          else if constexpr (std::is_same_v<T, Void>) return 0;
          else return sizeof(T);
        },
        v.value);
  }

 private:
  std::size_t fail(errc code, std::string detail) {
    if (!failed) failure = {code, std::move(detail)};
    failed = true;
    return 0;
  }
};

void encode_array_content(Writer& out, const FieldArray& array);

void encode_value(Writer& out, const FieldValue& v) {
  out.u8(static_cast<std::uint8_t>(v.type_tag()));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) out.u8(x ? 1 : 0);
        else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) out.u8(static_cast<std::uint8_t>(x));
        else if constexpr (std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t>) out.u16(static_cast<std::uint16_t>(x));
        else if constexpr (std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t>) out.u32(static_cast<std::uint32_t>(x));
        else if constexpr (std::is_same_v<T, std::int64_t>) out.u64(static_cast<std::uint64_t>(x));
        else if constexpr (std::is_same_v<T, float>) out.u32(std::bit_cast<std::uint32_t>(x));
        else if constexpr (std::is_same_v<T, double>) out.u64(std::bit_cast<std::uint64_t>(x));
        else if constexpr (std::is_same_v<T, Decimal>) { out.u8(x.scale); out.u32(static_cast<std::uint32_t>(x.value)); }
        else if constexpr (std::is_same_v<T, std::string>) { out.u32(static_cast<std::uint32_t>(x.size())); out.text(x); }
        else if constexpr (std::is_same_v<T, ByteArray>) { out.u32(static_cast<std::uint32_t>(x.bytes.size())); out.text(x.bytes); }
        else if constexpr (std::is_same_v<T, Timestamp>) out.u64(x.seconds);
        else if constexpr (std::is_same_v<T, Void>) {}
        else if constexpr (std::is_same_v<T, FieldTable>) {
          std::byte* size_at = out.position();
          out.u32(0);
          encode_table_content(out, x);
          patch_u32(size_at, static_cast<std::uint32_t>(out.position() - size_at - 4));
        } else if constexpr (std::is_same_v<T, FieldArray>) {
          std::byte* size_at = out.position();
          out.u32(0);
          encode_array_content(out, x);
          patch_u32(size_at, static_cast<std::uint32_t>(out.position() - size_at - 4));
        }
      },
      v.value);
}

void encode_array_content(Writer& out, const FieldArray& array) {
  for (const auto& v : array) encode_value(out, v);
}

}  // namespace

Result<void> validate_table(std::span<const std::byte> content) {
  Walker<false> walker(content);
  if (!walker.table(1, nullptr)) return make_error(walker.failure.code, std::move(walker.failure.detail));
  return {};
}

Result<void> validate_table_bounds(std::span<const std::byte> content) {
  // Levels on the heap, not the stack: the nesting is the peer's to choose. This runs only
  // after validate_table found a table too deep, so the allocation is off every common path.
  struct Level {
    Reader in;
    bool array;
  };
  std::vector<Level> levels{{Reader(content), false}};
  while (!levels.empty()) {
    Reader& in = levels.back().in;
    if (in.remaining() == 0) {
      levels.pop_back();
      continue;
    }
    if (!levels.back().array) {
      (void)in.shortstr();
      if (in.failed()) return make_error(errc::malformed_payload, "field table key runs past its table");
    }
    const auto tag = static_cast<char>(in.u8());
    std::optional<Level> nested;
    if (tag == 'A' || tag == 'F') {
      auto bytes = in.bytes(in.u32());
      if (!in.failed()) nested = Level{Reader(bytes), tag == 'A'};
    } else if (!skip_scalar(in, tag) && !in.failed()) {
      return make_error(errc::unknown_field_type, "field value type tag is not one of " + std::string(field_type_tags));
    }
    if (in.failed()) return make_error(errc::malformed_payload, "field value runs past its table");
    if (nested) levels.push_back(*nested);  // `in` is not used after this: push_back may move it
  }
  return {};
}

Result<FieldTable> decode_table(std::span<const std::byte> content) {
  FieldTable table;
  Walker<true> walker(content);
  if (!walker.table(1, &table)) return make_error(walker.failure.code, std::move(walker.failure.detail));
  return table;
}

Result<std::size_t> encoded_table_size(const FieldTable& table) {
  TableSizer sizer;
  std::size_t n = sizer.table(table, 1);
  if (sizer.failed) return make_error(sizer.failure.code, std::move(sizer.failure.detail));
  if (n > std::numeric_limits<std::uint32_t>::max()) return make_error(errc::string_too_long, "field table over 4 GiB");
  return n;
}

void encode_table_content(Writer& out, const FieldTable& table) {
  for (const auto& [key, v] : table.entries) {
    out.u8(static_cast<std::uint8_t>(key.size()));
    out.text(key);
    encode_value(out, v);
  }
}

std::optional<TableEntry> TableCursor::next() {
  if (in_.failed() || in_.remaining() == 0) return std::nullopt;
  const std::string_view key = in_.shortstr();
  const std::byte* value_at = in_.position();
  const auto tag = static_cast<char>(in_.u8());
  if (tag == 'A' || tag == 'F') (void)in_.bytes(in_.u32());
  else if (!skip_scalar(in_, tag)) return std::nullopt;
  if (in_.failed()) return std::nullopt;
  return TableEntry{key, std::span<const std::byte>(value_at, static_cast<std::size_t>(in_.position() - value_at))};
}

std::optional<std::string_view> find_long_string(std::span<const std::byte> content, std::string_view key) {
  TableCursor cursor(content);
  while (auto e = cursor.next()) {
    if (e->key != key) continue;
    if (e->value.empty() || static_cast<char>(e->value[0]) != 'S') return std::nullopt;
    Reader in(e->value.subspan(1));
    return in.longstr();
  }
  return std::nullopt;
}

namespace {

bool replaced(std::span<const StringEntry> entries, std::string_view key) {
  for (const auto& e : entries)
    if (e.key == key) return true;
  return false;
}

}  // namespace

Result<std::size_t> TableRef::encoded_size() const {
  std::size_t n = 0;
  if (owned_) {
    auto size = encoded_table_size(*owned_);
    if (!size.ok() || replacing_.empty()) return size;
    n = *size;
    // Less the entries it replaces, each sized alone (copied: a trace header, a few bytes).
    for (const auto& entry : owned_->entries)
      if (replaced(replacing_, entry.key)) n -= *encoded_table_size(FieldTable{entry});
  } else {
    if (replacing_.empty()) return encoded_.size();
    TableCursor cursor(encoded_);
    while (auto e = cursor.next())
      if (!replaced(replacing_, e->key)) n += 1 + e->key.size() + e->value.size();
  }
  for (const auto& e : replacing_) {
    if (e.value.empty()) continue;  // removes its key, writes nothing
    if (e.key.size() > 255) return make_error(errc::string_too_long, "field table key is over 255 bytes");
    n += 1 + e.key.size() + 1 + 4 + e.value.size();
  }
  if (n > std::numeric_limits<std::uint32_t>::max()) return make_error(errc::string_too_long, "field table over 4 GiB");
  return n;
}

void TableRef::encode_content(Writer& out) const {
  if (replacing_.empty()) {
    if (owned_) encode_table_content(out, *owned_);
    else out.bytes(encoded_);
    return;
  }
  if (owned_) {
    for (const auto& [key, v] : owned_->entries) {
      if (replaced(replacing_, key)) continue;
      out.u8(static_cast<std::uint8_t>(key.size()));
      out.text(key);
      encode_value(out, v);
    }
  } else {
    TableCursor cursor(encoded_);
    while (auto e = cursor.next()) {
      if (replaced(replacing_, e->key)) continue;
      out.u8(static_cast<std::uint8_t>(e->key.size()));
      out.text(e->key);
      out.bytes(e->value);
    }
  }
  for (const auto& e : replacing_) {
    if (e.value.empty()) continue;
    out.u8(static_cast<std::uint8_t>(e.key.size()));
    out.text(e.key);
    out.u8(static_cast<std::uint8_t>('S'));
    out.u32(static_cast<std::uint32_t>(e.value.size()));
    out.text(e.value);
  }
}

Result<FieldTable> TableRef::to_table() const {
  auto table = owned_ ? Result<FieldTable>(*owned_) : decode_table(encoded_);
  if (!table.ok() || replacing_.empty()) return table;
  std::erase_if(table->entries, [&](const FieldEntry& entry) { return replaced(replacing_, entry.key); });
  for (const auto& e : replacing_)
    if (!e.value.empty()) table->entries.emplace_back(std::string(e.key), FieldValue{std::string(e.value)});
  return table;
}

bool same_table(const TableRef& a, const TableRef& b) {
  auto ta = a.to_table();
  auto tb = b.to_table();
  return ta.ok() && tb.ok() && *ta == *tb;
}

}  // namespace warren::wire

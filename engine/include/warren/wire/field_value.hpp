// Owning field tables and arrays with RabbitMQ's full value type set. These are what an
// application builds to send and what it gets when it asks for a decoded table; the decoder's
// hot path never builds them (it hands out validated views, see field_table.hpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace warren::wire {

struct Decimal {
  std::uint8_t scale = 0;  // digits after the point
  std::int32_t value = 0;
  friend bool operator==(const Decimal&, const Decimal&) = default;
};

struct Timestamp {
  std::uint64_t seconds = 0;  // POSIX time
  friend bool operator==(const Timestamp&, const Timestamp&) = default;
};

struct Void {
  friend bool operator==(const Void&, const Void&) = default;
};

// 'x': bytes that are not text (a long string is 'S').
struct ByteArray {
  std::string bytes;
  friend bool operator==(const ByteArray&, const ByteArray&) = default;
};

struct FieldValue;
struct FieldEntry;
using FieldArray = std::vector<FieldValue>;

// Entries keep their wire order, so decode-then-encode gives back the same bytes.
struct FieldTable {
  std::vector<FieldEntry> entries;

  // Declared here, defined once FieldEntry is complete: a table nests inside its own values.
  FieldTable();
  // `{{"x-queue-type", "quorum"}, {"x-max-length", 1000}}`: entries in the order written.
  FieldTable(std::initializer_list<FieldEntry> entries);
  FieldTable(const FieldTable&);
  FieldTable(FieldTable&&) noexcept;
  FieldTable& operator=(const FieldTable&);
  FieldTable& operator=(FieldTable&&) noexcept;
  ~FieldTable();

  [[nodiscard]] const FieldValue* find(std::string_view key) const;
  FieldTable& set(std::string key, FieldValue value);  // replaces an existing key
  [[nodiscard]] bool empty() const noexcept { return entries.empty(); }
  friend bool operator==(const FieldTable&, const FieldTable&);
};

// The alternatives' order is the order of the type tags in field_type_tags, so a value's
// index is its tag's position: t b B s u I i l f d D S A T F V x.
using FieldVariant =
    std::variant<bool, std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t,
                 std::uint32_t, std::int64_t, float, double, Decimal, std::string, FieldArray,
                 Timestamp, FieldTable, Void, ByteArray>;

inline constexpr std::string_view field_type_tags = "tbBsuIilfdDSATFVx";

struct FieldValue {
  FieldVariant value;

  FieldValue() : value(Void{}) {}
  template <class T>
    requires(!std::is_same_v<std::remove_cvref_t<T>, FieldValue>) &&
            std::is_constructible_v<FieldVariant, T&&>
  FieldValue(T&& v) : value(std::forward<T>(v)) {}  // NOLINT: values convert implicitly
  FieldValue(const char* text) : value(std::string(text)) {}  // NOLINT

  [[nodiscard]] char type_tag() const noexcept { return field_type_tags[value.index()]; }
  // An integer of any width as a long (brokers send a count as short, int or long by version);
  // nothing for any other type, a bool included.
  [[nodiscard]] std::optional<std::int64_t> integer() const noexcept {
    return std::visit(
        [](const auto& x) -> std::optional<std::int64_t> {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return static_cast<std::int64_t>(x);
          else return std::nullopt;
        },
        value);
  }
  friend bool operator==(const FieldValue& a, const FieldValue& b) { return a.value == b.value; }
};

struct FieldEntry {
  std::string key;
  FieldValue value;

  FieldEntry(std::string k, FieldValue v) : key(std::move(k)), value(std::move(v)) {}
  friend bool operator==(const FieldEntry&, const FieldEntry&) = default;
};

inline FieldTable::FieldTable() = default;
inline FieldTable::FieldTable(std::initializer_list<FieldEntry> list) : entries(list) {}
inline FieldTable::FieldTable(const FieldTable&) = default;
inline FieldTable::FieldTable(FieldTable&&) noexcept = default;
inline FieldTable& FieldTable::operator=(const FieldTable&) = default;
inline FieldTable& FieldTable::operator=(FieldTable&&) noexcept = default;
inline FieldTable::~FieldTable() = default;

inline bool operator==(const FieldTable& a, const FieldTable& b) { return a.entries == b.entries; }

}  // namespace warren::wire

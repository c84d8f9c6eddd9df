// The x-arguments of a declare, bind or consume, as a view the verb copies when it starts:
//
//   ch.queue_declare({.name = "orders", .arguments = {{"x-queue-type", "quorum"},
//                                                     {"x-max-length", 10000}}}, done);
//   ch.queue_declare({.name = "orders", .arguments = table}, done);  // a FieldTable, borrowed
//
// Why a view and not a FieldTable: GCC 12 copies a braced temporary inside a `co_await`
// expression bitwise and then destroys it twice, so an options struct that owns a string or a
// vector crashes the natural coroutine form, and an initializer_list there does not compile
// ("array used as initializer"). Everything here is trivially copyable and trivially
// destructible, and the list form is a constructor with defaulted parameters, not an
// initializer_list. Up to eight entries inline; more, or nested tables and arrays, through a
// FieldTable (or a FieldValue, for one entry's value) the caller keeps alive for the call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "warren/wire/field_value.hpp"

namespace warren::client {

// One argument's value: a scalar or text written inline, or a FieldValue borrowed for
// anything else (a table, an array, bytes). An int is sent as a signed 32-bit value ('I'),
// a long as 'l', text as a long string ('S'), as RabbitMQ's own clients send them.
class ArgumentValue {
 public:
  using Scalar = std::variant<bool, std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t,
                              std::uint32_t, std::int64_t, float, double, wire::Decimal, wire::Timestamp,
                              std::string_view, const wire::FieldValue*>;

  ArgumentValue() = default;
  template <class T>
    requires std::is_constructible_v<Scalar, T&&> && (!std::is_pointer_v<std::remove_cvref_t<T>>)
  ArgumentValue(T&& value) noexcept : value_(std::forward<T>(value)) {}  // NOLINT: implicit by design
  ArgumentValue(const char* text) noexcept : value_(std::string_view(text)) {}  // NOLINT
  ArgumentValue(const wire::FieldValue& borrowed) noexcept : value_(&borrowed) {}  // NOLINT
  // A temporary would be gone before the verb starts, in an options struct kept in a variable:
  // name the string (or the value) first.
  ArgumentValue(std::string&&) = delete;
  ArgumentValue(wire::FieldValue&&) = delete;

  [[nodiscard]] wire::FieldValue to_field_value() const {
    return std::visit(
        [](const auto& v) -> wire::FieldValue {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string_view>) return wire::FieldValue(std::string(v));
          else if constexpr (std::is_same_v<V, const wire::FieldValue*>) return v ? *v : wire::FieldValue();
          else return wire::FieldValue(v);
        },
        value_);
  }

 private:
  Scalar value_{};
};

struct Argument {
  std::string_view key{};  // an entry with an empty key is no entry
  ArgumentValue value{};
};

class Arguments {
 public:
  static constexpr std::size_t max_inline = 8;

  Arguments() = default;
  // `{{"x-queue-type", "quorum"}, {"x-max-length", 1000}}`: entries in the order written.
  Arguments(Argument a1, Argument a2 = {}, Argument a3 = {}, Argument a4 = {}, Argument a5 = {},  // NOLINT
            Argument a6 = {}, Argument a7 = {}, Argument a8 = {}) noexcept {
    for (const Argument& a : {a1, a2, a3, a4, a5, a6, a7, a8})
      if (!a.key.empty()) inline_[count_++] = a;
  }
  Arguments(const wire::FieldTable& borrowed) noexcept : table_(&borrowed) {}  // NOLINT
  Arguments(wire::FieldTable&&) = delete;  // a temporary would be gone before the verb starts

  [[nodiscard]] bool empty() const noexcept { return table_ ? table_->empty() : count_ == 0; }
  [[nodiscard]] bool contains(std::string_view key) const noexcept {
    if (table_) return table_->find(key) != nullptr;
    for (std::size_t i = 0; i < count_; ++i)
      if (inline_[i].key == key) return true;
    return false;
  }
  // An owning copy, made when the verb starts.
  [[nodiscard]] wire::FieldTable to_table() const {
    if (table_) return *table_;
    wire::FieldTable out;
    for (std::size_t i = 0; i < count_; ++i) out.set(std::string(inline_[i].key), inline_[i].value.to_field_value());
    return out;
  }

 private:
  std::array<Argument, max_inline> inline_{};
  std::uint8_t count_ = 0;
  const wire::FieldTable* table_ = nullptr;
};

}  // namespace warren::client

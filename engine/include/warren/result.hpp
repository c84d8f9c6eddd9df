// Result<T>: a value or an Error. warren's own small expected-type, because std::expected
// needs C++23 and the clang used for fuzzing does not have it yet.
#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

#include "warren/error.hpp"

namespace warren {

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  [[nodiscard]] T& value() & { assert(ok()); return *std::get_if<0>(&state_); }
  [[nodiscard]] const T& value() const& { assert(ok()); return *std::get_if<0>(&state_); }
  [[nodiscard]] T&& value() && { assert(ok()); return std::move(*std::get_if<0>(&state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  [[nodiscard]] const Error& error() const& { assert(!ok()); return *std::get_if<1>(&state_); }
  [[nodiscard]] Error&& error() && { assert(!ok()); return std::move(*std::get_if<1>(&state_)); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] const Error& error() const& { assert(failed_); return error_; }
  [[nodiscard]] Error&& error() && { assert(failed_); return std::move(error_); }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace warren

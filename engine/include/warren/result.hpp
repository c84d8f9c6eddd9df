// Result<T>: a value or an Error. warren's own small expected-type, because std::expected
// needs C++23 and the clang used for fuzzing does not have it yet.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "warren/error.hpp"

namespace warren {

// Thrown by value(), operator* and operator-> of a Result that holds an error: a
// std::system_error (its code() is the error's), carrying the whole Error. A coroutine that
// would rather throw than check writes `auto conn = (co_await async_connect(...)).value();`.
class BadResultAccess : public std::system_error {
 public:
  explicit BadResultAccess(Error error)
      : std::system_error(error.code), error_(std::move(error)), what_("warren: " + error_.to_string()) {}
  [[nodiscard]] const Error& error() const noexcept { return error_; }
  // The Error's own text (system_error's would repeat the code's message after it).
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

 private:
  Error error_;
  std::string what_;
};

namespace detail {
[[noreturn]] inline void throw_bad_access(const Error& e) { throw BadResultAccess(e); }
[[noreturn]] inline void throw_no_error() {
  throw std::logic_error("warren: error() of a Result that holds a value");
}
}  // namespace detail

namespace detail {

// What a Result<T> holds: the value or the error, one at a time.
template <class T>
struct ResultState {
  explicit ResultState(T value) : state(std::in_place_index<0>, std::move(value)) {}
  explicit ResultState(Error error) : state(std::in_place_index<1>, std::move(error)) {}
  T* value() noexcept { return std::get_if<0>(&state); }
  const T* value() const noexcept { return std::get_if<0>(&state); }
  Error* error() noexcept { return std::get_if<1>(&state); }
  const Error* error() const noexcept { return std::get_if<1>(&state); }
  std::variant<T, Error> state;
};

// A value that is trivially copied (a publish's id, a count, a flag): the value always there,
// value-initialized under an error, beside an optional Error. Moving and destroying it is a
// test of the optional, inline; the variant moved and destroyed itself through its
// visitation tables, out of line, at every layer a publish's Result<PublishId> passes through
// (about 20 instructions a publish). A union and a flag would do the same for every T, but
// GCC 12 cannot see the flag guard the member and warns maybe-uninitialized at -O2.
template <class T>
  requires(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>)
struct ResultState<T> {
  explicit ResultState(T v) : held(v) {}
  explicit ResultState(Error e) : failed(std::move(e)) {}
  T* value() noexcept { return failed ? nullptr : &held; }
  const T* value() const noexcept { return failed ? nullptr : &held; }
  Error* error() noexcept { return failed ? &*failed : nullptr; }
  const Error* error() const noexcept { return failed ? &*failed : nullptr; }
  T held{};
  std::optional<Error> failed;
};

}  // namespace detail

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return state_.error() == nullptr; }
  explicit operator bool() const noexcept { return ok(); }

  // The value; on an error, BadResultAccess (in every build type: never a read of nothing).
  // Not [[nodiscard]]: `(co_await ch.publish(...)).value();` is how a coroutine that would
  // rather throw checks a step whose value it does not need.
  T& value() & { return *checked(); }
  const T& value() const& { return *checked(); }
  T&& value() && { return std::move(*checked()); }
  T* operator->() { return checked(); }
  const T* operator->() const { return checked(); }
  T& operator*() & { return *checked(); }
  const T& operator*() const& { return *checked(); }

  // The error; on a value, std::logic_error.
  [[nodiscard]] const Error& error() const& {
    if (const auto* e = state_.error()) return *e;
    detail::throw_no_error();
  }
  [[nodiscard]] Error&& error() && {
    if (auto* e = state_.error()) return std::move(*e);
    detail::throw_no_error();
  }

 private:
  T* checked() {
    if (auto* v = state_.value()) return v;
    detail::throw_bad_access(*state_.error());
  }
  const T* checked() const {
    if (const auto* v = state_.value()) return v;
    detail::throw_bad_access(*state_.error());
  }

  detail::ResultState<T> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  // Nothing on success; on an error, BadResultAccess (`(co_await ch->close(...)).value();`).
  void value() const {
    if (error_) detail::throw_bad_access(*error_);
  }
  [[nodiscard]] const Error& error() const& {
    if (!error_) detail::throw_no_error();
    return *error_;
  }
  [[nodiscard]] Error&& error() && {
    if (!error_) detail::throw_no_error();
    return std::move(*error_);
  }

 private:
  // Optional, not an Error and a flag: a success then builds and destroys no Error (its
  // error_code and string), and most Results on a hot path are successes.
  std::optional<Error> error_;
};

}  // namespace warren

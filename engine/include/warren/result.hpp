// Result<T>: a value or an Error. warren's own small expected-type, because std::expected
// needs C++23 and the clang used for fuzzing does not have it yet.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

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

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : ok_(true) { std::construct_at(std::addressof(value_), std::move(value)); }  // NOLINT: implicit by design
  Result(Error error) : ok_(false) { std::construct_at(std::addressof(error_), std::move(error)); }  // NOLINT

  Result(const Result& o) requires std::is_copy_constructible_v<T> : ok_(o.ok_) {
    if (ok_) std::construct_at(std::addressof(value_), o.value_);
    else std::construct_at(std::addressof(error_), o.error_);
  }
  Result(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : ok_(o.ok_) {
    if (ok_) std::construct_at(std::addressof(value_), std::move(o.value_));
    else std::construct_at(std::addressof(error_), std::move(o.error_));
  }
  // The copy is made before this one is touched, so a copy that throws leaves it as it was.
  Result& operator=(const Result& o) requires std::is_copy_constructible_v<T> {
    if (this != &o) *this = Result(o);
    return *this;
  }
  // Destroys what this holds, then moves in: a move that threw in between would leave nothing
  // to destroy, so assigning needs a T whose move cannot throw (Error's cannot).
  Result& operator=(Result&& o) noexcept {
    static_assert(std::is_nothrow_move_constructible_v<T>, "Result<T> is move-assigned only for a T that moves without throwing");
    if (this == &o) return *this;
    destroy();
    ok_ = o.ok_;
    if (ok_) std::construct_at(std::addressof(value_), std::move(o.value_));
    else std::construct_at(std::addressof(error_), std::move(o.error_));
    return *this;
  }
  ~Result() { destroy(); }

  [[nodiscard]] bool ok() const noexcept { return ok_; }
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
    if (ok_) detail::throw_no_error();
    return error_;
  }
  [[nodiscard]] Error&& error() && {
    if (ok_) detail::throw_no_error();
    return std::move(error_);
  }

 private:
  T* checked() {
    if (!ok_) detail::throw_bad_access(error_);
    return &value_;
  }
  const T* checked() const {
    if (!ok_) detail::throw_bad_access(error_);
    return &value_;
  }
  void destroy() noexcept {
    if (ok_) value_.~T();
    else error_.~Error();
  }

  // A union and a flag rather than std::variant<T, Error>: the variant moved and destroyed
  // through its visitation tables, out of line, at every layer a publish's Result passes
  // through (about 20 instructions a publish); here a trivially destructible T costs one test.
  union {
    T value_;
    Error error_;
  };
  bool ok_;
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

// Result<T> misused: reading the value of an error, or the error of a value, is a clear
// failure in every build type (issue 23, item 4: `*r` on an error was a segfault in release),
// and the value() accessor is the throwing idiom for code that would rather not check.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "warren/result.hpp"

namespace warren {
namespace {

Result<std::string> refused() {
  Error e = make_error(errc::precondition_failed, "PRECONDITION_FAILED - inequivalent arg 'durable'");
  e.reply_code = 406;
  return e;
}

TEST(Result, the_value_of_an_error_throws_the_whole_error) {
  auto r = refused();
  try {
    (void)r.value();
    FAIL() << "value() of an error returned";
  } catch (const BadResultAccess& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::precondition_failed));
    EXPECT_EQ(e.error().reply_code, 406);
    EXPECT_EQ(e.error().detail, "PRECONDITION_FAILED - inequivalent arg 'durable'");
    EXPECT_NE(std::string(e.what()).find("inequivalent arg 'durable'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)*r, BadResultAccess);
  EXPECT_THROW((void)r->size(), BadResultAccess);
  EXPECT_THROW((void)std::move(r).value(), BadResultAccess);
  const auto& cr = r;
  EXPECT_THROW((void)*cr, BadResultAccess);
  // It is a std::system_error: code that catches those catches it.
  EXPECT_THROW((void)refused().value(), std::system_error);
}

TEST(Result, the_error_of_a_value_throws) {
  Result<std::string> r(std::string("fine"));
  EXPECT_EQ(*r, "fine");
  EXPECT_THROW((void)r.error(), std::logic_error);
  Result<void> ok;
  EXPECT_NO_THROW(ok.value());
  EXPECT_THROW((void)ok.error(), std::logic_error);
  Result<void> failed(make_error(errc::timeout, "no confirm within 10000 ms"));
  EXPECT_THROW(failed.value(), BadResultAccess);
}

// A move-only value is held and moved, never copied; a copyable one copies both ways.
static_assert(!std::is_copy_constructible_v<Result<std::unique_ptr<int>>>);
static_assert(std::is_nothrow_move_constructible_v<Result<std::unique_ptr<int>>>);
static_assert(std::is_nothrow_move_constructible_v<Result<std::string>>);
static_assert(std::is_copy_constructible_v<Result<std::string>>);

TEST(Result, copies_and_moves_keep_what_it_holds_in_both_directions) {
  Result<std::string> value(std::string(40, 'v'));  // past the short-string buffer: a heap copy
  Result<std::string> error = refused();
  Result<std::string> copy = value;
  EXPECT_EQ(*copy, std::string(40, 'v'));
  EXPECT_EQ(*value, std::string(40, 'v'));
  copy = error;  // value to error
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.error().reply_code, 406);
  copy = value;  // error to value
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(*copy, std::string(40, 'v'));
  Result<std::string> moved = std::move(copy);
  EXPECT_EQ(*moved, std::string(40, 'v'));
  moved = refused();  // moved into, value to error
  EXPECT_EQ(moved.error().detail, "PRECONDITION_FAILED - inequivalent arg 'durable'");
  moved = Result<std::string>(std::string("back"));  // error to value
  EXPECT_EQ(*moved, "back");
  auto& same = moved;
  moved = same;  // self-assignment keeps it (a self-move leaves a valid, unspecified value, as std's types do)
  EXPECT_EQ(*moved, "back");
  auto& also_error = error;
  error = also_error;
  EXPECT_EQ(error.error().reply_code, 406);
}

TEST(Result, a_move_only_value_moves_through) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  Result<std::unique_ptr<int>> s = std::move(r);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(**s, 7);
  s = Result<std::unique_ptr<int>>(make_error(errc::timeout, "late"));
  EXPECT_FALSE(s.ok());
  s = Result<std::unique_ptr<int>>(std::make_unique<int>(8));
  std::unique_ptr<int> out = std::move(s).value();
  EXPECT_EQ(*out, 8);
}

TEST(Result, a_trivially_copied_value_reads_as_any_other) {
  Result<std::uint64_t> id(std::uint64_t{42});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 42u);
  EXPECT_THROW((void)id.error(), std::logic_error);
  Result<std::uint64_t> refused_id(make_error(errc::channel_closed, "channel 3 is closed"));
  ASSERT_FALSE(refused_id.ok());
  EXPECT_THROW((void)*refused_id, BadResultAccess);
  EXPECT_EQ(refused_id.error().detail, "channel 3 is closed");
  Result<std::uint64_t> copy = refused_id;
  EXPECT_EQ(copy.error().code, make_error_code(errc::channel_closed));
  copy = id;  // error to value
  EXPECT_EQ(*copy, 42u);
  copy = std::move(refused_id);  // value to error
  EXPECT_FALSE(copy.ok());
  EXPECT_EQ(std::move(copy).error().detail, "channel 3 is closed");
}

}  // namespace
}  // namespace warren

// Result<T> misused: reading the value of an error, or the error of a value, is a clear
// failure in every build type (issue 23, item 4: `*r` on an error was a segfault in release),
// and the value() accessor is the throwing idiom for code that would rather not check.
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace warren

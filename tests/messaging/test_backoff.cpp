// The work queue's time rules as pure functions: the delay levels, the backoff ceiling per
// attempt, full jitter rounded up to a level, and the error header's budget in a frame.
#include <gtest/gtest.h>

#include "warren/messaging/backoff.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/work_queue.hpp"
#include "warren/wire/properties.hpp"

namespace warren::messaging {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, default_levels_double_from_one_second_and_stop_at_sixty) {
  EXPECT_EQ(delay_levels({}), (std::vector<std::chrono::milliseconds>{1s, 2s, 4s, 8s, 16s, 32s, 60s}));
  EXPECT_EQ(delay_levels({.base = 5s, .max = 5s}), (std::vector<std::chrono::milliseconds>{5s}));
}

TEST(Backoff, the_ceiling_doubles_per_failed_attempt_up_to_max) {
  Backoff b;
  EXPECT_EQ(backoff_ceiling(b, 1), 1s);
  EXPECT_EQ(backoff_ceiling(b, 2), 2s);
  EXPECT_EQ(backoff_ceiling(b, 5), 16s);
  EXPECT_EQ(backoff_ceiling(b, 7), 60s);
  EXPECT_EQ(backoff_ceiling(b, 100), 60s);
}

TEST(Backoff, the_longest_allowed_max_gives_levels_without_overflow) {
  // base 1 ms doubles 32 times below 2^32 ms; the last level is max_delay itself.
  const auto levels = delay_levels({.base = std::chrono::milliseconds(1), .max = max_delay});
  ASSERT_EQ(levels.size(), 33u);
  EXPECT_EQ(levels[31], std::chrono::milliseconds(std::int64_t{1} << 31));
  EXPECT_EQ(levels.back(), max_delay);
  EXPECT_EQ(backoff_ceiling({.base = std::chrono::milliseconds(1), .max = max_delay}, 1000), max_delay);
}

TEST(Backoff, the_factor_sets_how_fast_the_levels_grow) {
  const Backoff triple{.base = 100ms, .max = 5s, .factor = 3.0};
  EXPECT_EQ(delay_levels(triple), (std::vector<std::chrono::milliseconds>{100ms, 300ms, 900ms, 2700ms, 5s}));
  EXPECT_EQ(backoff_ceiling(triple, 3), 900ms);
  // A small factor still makes strictly growing levels, each at least a millisecond apart.
  const auto slow = delay_levels({.base = 1ms, .max = 10ms, .factor = 1.1});
  EXPECT_EQ(slow, (std::vector<std::chrono::milliseconds>{1ms, 2ms, 3ms, 4ms, 5ms, 6ms, 7ms, 8ms, 9ms, 10ms}));
}

TEST(Backoff, without_jitter_the_delay_is_the_ceiling) {
  const Backoff exact{.base = 100ms, .max = 5s, .factor = 3.0, .jitter = Jitter::none};
  EXPECT_EQ(retry_delay(exact, 1, 0.0), 100ms);
  EXPECT_EQ(retry_delay(exact, 2, 0.0), 300ms);
  EXPECT_EQ(retry_delay(exact, 4, 0.99), 2700ms);
  EXPECT_EQ(retry_delay(exact, 9, 0.5), 5s);
}

TEST(Backoff, full_jitter_is_rounded_up_to_a_level_within_the_ceiling) {
  Backoff b;
  EXPECT_EQ(retry_delay(b, 5, 0.0), 1s);     // never below base
  EXPECT_EQ(retry_delay(b, 5, 0.999), 16s);  // the ceiling
  EXPECT_EQ(retry_delay(b, 5, 0.3), 8s);     // 4.8 s, rounded up to the next level
  EXPECT_EQ(retry_delay(b, 5, 0.25), 4s);    // exactly a level
  EXPECT_EQ(retry_delay(b, 9, 0.6), 60s);    // 36 s: past 32, the last level is max
  for (std::uint32_t attempt = 1; attempt < 12; ++attempt)
    for (double draw = 0; draw < 1; draw += 0.01) {
      auto d = retry_delay(b, attempt, draw);
      EXPECT_LE(d, backoff_ceiling(b, attempt));
      auto levels = delay_levels(b);
      EXPECT_NE(std::find(levels.begin(), levels.end(), d), levels.end());
    }
}

TEST(ErrorBudget, the_error_fits_beside_the_other_properties_in_one_frame) {
  client::FieldTable headers{{"x-warren-attempt", std::int64_t{3}}, {"x-warren-error", ""}};
  client::Properties p{.headers = wire::TableRef(headers), .message_id = "id"};
  const auto budget = error_budget(p, 4096);
  const auto base = *wire::content_header_size(p);
  EXPECT_EQ(budget, 4096 - 8 - base);
  headers.set("x-warren-error", std::string(budget, 'e'));
  EXPECT_EQ(*wire::content_header_size(p) + 8, 4096u);  // exactly one full frame
  EXPECT_EQ(error_budget(p, 0), 4096u);                 // no broker limit: capped all the same
}

TEST(ErrorBudget, a_cut_never_splits_a_utf8_character) {
  EXPECT_EQ(cut_text("abc", 10), "abc");
  EXPECT_EQ(cut_text("abcdef", 3), "abc");
  EXPECT_EQ(cut_text("a\xC3\xA9z", 2), "a");  // é is two bytes: not cut in half
  EXPECT_EQ(cut_text("a\xC3\xA9z", 3), "a\xC3\xA9");
}

}  // namespace
}  // namespace warren::messaging

namespace warren::messaging {
namespace {

TEST(LogGap, a_jump_is_a_gap_only_when_the_asked_offset_is_below_the_oldest_retained) {
  EXPECT_TRUE(is_gap(5, 17, 17));    // trimmed: asked 5, the stream starts at 17
  EXPECT_FALSE(is_gap(5, 9, 0));     // offsets not dense (tracking chunks): no trim
  EXPECT_FALSE(is_gap(17, 17, 17));  // exactly the oldest
  EXPECT_FALSE(is_gap(20, 25, 17));  // a jump above the oldest is not a gap
}

}  // namespace
}  // namespace warren::messaging

namespace warren::messaging {
namespace {

// Only RabbitMQ 4.0-4.2 count a release's nack toward their default delivery limit of 20:
// there, and only from release_refresh_count returns on, a release sends a fresh copy.
TEST(ReleaseRefresh, only_on_4_0_to_4_2_and_only_once_the_broker_counted_enough_returns) {
  using client::BrokerVersion;
  EXPECT_FALSE(release_refreshes(std::nullopt, 100));
  EXPECT_FALSE(release_refreshes(BrokerVersion{3, 10, 8}, 100));
  EXPECT_FALSE(release_refreshes(BrokerVersion{3, 13, 7}, 100));
  EXPECT_FALSE(release_refreshes(BrokerVersion{4, 0, 0}, release_refresh_count - 1));
  EXPECT_TRUE(release_refreshes(BrokerVersion{4, 0, 0}, release_refresh_count));
  EXPECT_TRUE(release_refreshes(BrokerVersion{4, 2, 9}, 19));
  EXPECT_FALSE(release_refreshes(BrokerVersion{4, 3, 0}, 100));
}

}  // namespace
}  // namespace warren::messaging

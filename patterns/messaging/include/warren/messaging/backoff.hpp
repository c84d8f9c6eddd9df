// The work queue's retry delays as pure functions: exponential backoff with full jitter, and
// the fixed delay levels a retry is rounded up to. Each level is a retry queue of its own with
// one queue-wide TTL, so no retry ever waits behind a longer one (RabbitMQ expires only a
// queue's head). No clock and no randomness here: the caller passes a draw in [0, 1).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace warren::messaging {

// How a delay is drawn below its ceiling.
enum class Jitter {
  full,  // uniformly in [0, ceiling], rounded up to a level: retries of a burst spread out
  none,  // the ceiling itself: base, base·factor, ... exactly
};

struct Backoff {
  std::chrono::milliseconds base{1000};  // the ceiling after the first failed attempt
  std::chrono::milliseconds max{60000};  // the ceiling never grows past this
  double factor = 2.0;                   // the ceiling grows by this per failed attempt (> 1)
  Jitter jitter = Jitter::full;
};

// The longest delay level: a level is a queue's x-message-ttl, which RabbitMQ takes up to
// 2^32 - 1 ms (about 49.7 days).
inline constexpr std::chrono::milliseconds max_delay{4294967295};

// The range of Backoff::factor: above 1 (the levels must grow) and at most this.
inline constexpr double max_factor = 1000;
[[nodiscard]] constexpr bool factor_in_range(double factor) { return factor > 1.0 && factor <= max_factor; }

// The delay levels for `backoff`: base, base·factor, base·factor², ... (each rounded to a
// millisecond, and at least one more than the last) and max as the last (ascending, no
// duplicates). base 1 s, factor 2, max 60 s: 1, 2, 4, 8, 16, 32, 60 s.
[[nodiscard]] std::vector<std::chrono::milliseconds> delay_levels(const Backoff& backoff);

// The ceiling after `failed_attempt` (1-based) failures: the level at index failed_attempt-1,
// max past the last: min(max, base · factor^(failed_attempt-1)) up to rounding.
[[nodiscard]] std::chrono::milliseconds backoff_ceiling(const Backoff& backoff, std::uint32_t failed_attempt);

// Full jitter over the levels: `draw` (in [0, 1)) picks a delay uniformly in [0, ceiling],
// and the delay is rounded up to the smallest level at or above it (never below base, never
// above the ceiling, which is itself a level). Jitter::none: the ceiling, whatever the draw.
[[nodiscard]] std::chrono::milliseconds retry_delay(const Backoff& backoff, std::uint32_t failed_attempt, double draw);

}  // namespace warren::messaging

#include "warren/messaging/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace warren::messaging {

std::vector<std::chrono::milliseconds> delay_levels(const Backoff& backoff) {
  std::vector<std::chrono::milliseconds> levels;
  const auto base = std::max(backoff.base, std::chrono::milliseconds(1));
  const auto max = std::max(backoff.max, base);
  // Grown in double and compared before converting: a large factor never overflows.
  const double factor = backoff.factor > 1.0 ? backoff.factor : 2.0;
  for (auto level = base; level < max;) {
    levels.push_back(level);
    const double next = std::round(static_cast<double>(level.count()) * factor);
    if (next >= static_cast<double>(max.count())) break;
    level = std::max(level + std::chrono::milliseconds(1), std::chrono::milliseconds(static_cast<std::int64_t>(next)));
  }
  levels.push_back(max);
  return levels;
}

std::chrono::milliseconds backoff_ceiling(const Backoff& backoff, std::uint32_t failed_attempt) {
  const auto levels = delay_levels(backoff);
  // Doubling from base reaches max within levels.size() steps: past that the ceiling is max.
  const std::size_t index = std::min<std::size_t>(failed_attempt == 0 ? 0 : failed_attempt - 1, levels.size() - 1);
  return levels[index];
}

std::chrono::milliseconds retry_delay(const Backoff& backoff, std::uint32_t failed_attempt, double draw) {
  const auto ceiling = backoff_ceiling(backoff, failed_attempt);
  if (backoff.jitter == Jitter::none) return ceiling;
  draw = std::clamp(draw, 0.0, 1.0);
  const auto wanted = static_cast<std::int64_t>(draw * static_cast<double>(ceiling.count()));
  for (auto level : delay_levels(backoff))
    if (level.count() >= wanted) return std::min(level, ceiling);
  return ceiling;
}

}  // namespace warren::messaging

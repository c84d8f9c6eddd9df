// Latencies in log-linear buckets: exact below 128 ns, then 64 buckets per power of two
// (under 1.6% error), so a run of any length records in fixed memory.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace warren::cli {

class Histogram {
 public:
  void record(std::uint64_t ns) noexcept {
    ++counts_[index(ns)];
    ++total_;
  }
  [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
  void reset() noexcept {
    counts_.fill(0);
    total_ = 0;
  }
  // The smallest recorded bucket's value with at least q of the samples at or below it.
  [[nodiscard]] std::uint64_t quantile_ns(double q) const noexcept {
    if (total_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i)
      if ((seen += counts_[i]) >= rank) return value(i);
    return value(counts_.size() - 1);
  }

 private:
  static constexpr unsigned linear = 128, per_octave = 64, octaves = 40;
  static std::size_t index(std::uint64_t v) noexcept {
    if (v < linear) return v;
    unsigned shift = static_cast<unsigned>(std::bit_width(v)) - 7;  // (v >> shift) is in [64, 128)
    if (shift > octaves) return linear + octaves * per_octave - 1;
    return linear + (shift - 1) * per_octave + ((v >> shift) - per_octave);
  }
  static std::uint64_t value(std::size_t i) noexcept {
    if (i < linear) return i;
    std::size_t shift = (i - linear) / per_octave + 1;
    return (per_octave + (i - linear) % per_octave) << shift;
  }

  std::array<std::uint64_t, linear + octaves * per_octave> counts_{};
  std::uint64_t total_ = 0;
};

}  // namespace warren::cli

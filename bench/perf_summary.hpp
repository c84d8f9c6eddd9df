// The one JSON line every program of bench/compare.sh prints at the end (warren perf's keys):
// counts, the measured phase's seconds and CPU (user + system, getrusage), CPU per message
// moved, and the process's peak RSS.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "process_usage.hpp"

namespace warren::bench {

// Prints the summary of a phase that began at `start` with `cpu_start` seconds of CPU used.
inline void print_summary(std::uint64_t sent, std::uint64_t confirmed, std::uint64_t received,
                          std::chrono::steady_clock::time_point start, double cpu_start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cli::cpu_seconds() - cpu_start;
  const double per = static_cast<double>(sent > received ? sent : received);
  std::printf(
      "{\"sent\":%llu,\"confirmed\":%llu,\"received\":%llu,\"seconds\":%.6f,\"send_rate\":%.1f,\"receive_rate\":%.1f,"
      "\"cpu_seconds\":%.6f,\"cpu_us_per_msg\":%.4f,\"peak_rss_kb\":%ld}\n",
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(confirmed),
      static_cast<unsigned long long>(received), seconds, static_cast<double>(sent) / seconds,
      static_cast<double>(received) / seconds, cpu, cpu * 1e6 / per, cli::peak_rss_kb());
  std::fflush(stdout);
}

}  // namespace warren::bench

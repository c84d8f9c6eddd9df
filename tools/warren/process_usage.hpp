// The process's own CPU time and peak memory, from getrusage. warren perf and the rabbitmq-c
// program of bench/compare.sh both report through these, so the two sides of the comparison
// are measured by the same code.
#pragma once

#include <sys/resource.h>

namespace warren::cli {

// User + system CPU seconds used so far.
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Peak resident set size so far, in KiB (Linux reports ru_maxrss in KiB).
inline long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace warren::cli

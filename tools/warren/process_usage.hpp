// The process's own CPU time and peak memory, from getrusage. warren perf and the rabbitmq-c
// program of bench/compare.sh both report through these, so the two sides of the comparison
// are measured by the same code.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

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

// Resident set size now, in KiB (the second field of /proc/self/statm, in pages); 0 when it
// cannot be read. Peak RSS cannot show what a phase after the peak holds.
inline long current_rss_kb() {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  long size = 0, resident = 0;
  const bool read = std::fscanf(f, "%ld %ld", &size, &resident) == 2;
  std::fclose(f);
  return read ? resident * (sysconf(_SC_PAGESIZE) / 1024) : 0;
}

// Times the process gave up the CPU of its own accord (a wait for the loop's next event
// among them): over an idle phase, how often the loop woke up.
inline long voluntary_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw;
}

}  // namespace warren::cli

// What the client counts, for a service owner's dashboard: counters, gauges and histograms
// kept by the library and read as a snapshot from any thread, under OpenTelemetry's messaging
// names where one exists (docs/observability.md lists every series).
//
// One Metrics is shared by every connection given it (ClientOptions::metrics, and through it
// a Session's or a Pool's); null means off: one untaken branch where a figure would change,
// nothing stored per message either way. A series is a name and its labels; writers add to it
// with a relaxed atomic, so a connection on any loop thread may share it and a scrape reads it
// without stopping the loop. Nothing allocates per message: a series is made the first time
// its name and labels are seen (a new destination), then found through a per-connection cache.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace warren::client {

// An attribute of a series: OpenTelemetry's name ("messaging.destination.name") and its value.
struct MetricLabel {
  std::string name{};
  std::string value{};
  friend bool operator==(const MetricLabel&, const MetricLabel&) = default;
};
using MetricLabels = std::vector<MetricLabel>;

// A series' name and unit, both as OpenTelemetry writes them ("messaging.client.sent.messages",
// "{message}"; "s" for seconds, "By" for bytes), and a line for the reader.
struct MetricDescription {
  std::string_view name{};
  std::string_view unit{};
  std::string_view help{};
};

class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  void add(std::int64_t delta) noexcept { value_.fetch_add(delta, std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// A distribution of durations. The buckets resolve microseconds: a publish's confirm takes a
// few hundred µs on a quiet broker, where OpenTelemetry's default buckets start at 5 ms.
class Histogram {
 public:
  // Upper bounds, in nanoseconds: 50 µs to 10 s, then +Inf.
  static constexpr std::array<std::uint64_t, 17> bounds_ns{
      50'000,        100'000,       250'000,       500'000,       1'000'000,     2'500'000,
      5'000'000,     10'000'000,    25'000'000,    50'000'000,    100'000'000,   250'000'000,
      500'000'000,   1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
  // `count` observations of `d` each (a range of publishes settled together).
  void record(std::chrono::nanoseconds d, std::uint64_t count = 1) noexcept;
  [[nodiscard]] std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t sum_ns() const noexcept { return sum_ns_.load(std::memory_order_relaxed); }
  // Observations in bucket i (not cumulative); i == bounds_ns.size() is +Inf.
  [[nodiscard]] std::uint64_t bucket(std::size_t i) const noexcept { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, bounds_ns.size() + 1> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

enum class MetricKind : std::uint8_t { counter, gauge, histogram };

// One series as read by snapshot().
struct MetricPoint {
  MetricKind kind = MetricKind::counter;
  std::string name{};
  std::string unit{};
  std::string help{};
  MetricLabels labels{};
  double value = 0;  // a counter's or a gauge's; a histogram's sum, in seconds
  // A histogram's cumulative counts, one per Histogram::bounds_ns then +Inf (the last is the
  // count of observations).
  std::vector<std::uint64_t> cumulative{};
};

struct MetricsSnapshot {
  std::vector<MetricPoint> points{};
  // The series called `name` whose labels include every one of `labels`; null if none.
  [[nodiscard]] const MetricPoint* find(std::string_view name, const MetricLabels& labels = {}) const;
  // The sum of the values of every series `find` would match (0 when none): a counter's total
  // over its destinations, say.
  [[nodiscard]] double total(std::string_view name, const MetricLabels& labels = {}) const;
};

// Prometheus's text exposition format (version 0.0.4): OpenTelemetry's names with each dot an
// underscore, the unit as a suffix (_seconds, _bytes; a {annotation} unit adds none), and
// _total after a counter's name.
[[nodiscard]] std::string to_prometheus_text(const MetricsSnapshot& snapshot);
// The name a series has there: "messaging.client.sent.messages" + counter ->
// "messaging_client_sent_messages_total".
[[nodiscard]] std::string prometheus_name(std::string_view name, std::string_view unit, MetricKind kind);

class Metrics {
 public:
  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The series with this name and labels, made the first time it is asked for; the reference
  // lasts as long as the Metrics. For the layers above the client and for an application's own
  // figures too. Asking for one name as two kinds is a programming error (it throws).
  Counter& counter(const MetricDescription& description, const MetricLabels& labels = {});
  Gauge& gauge(const MetricDescription& description, const MetricLabels& labels = {});
  Histogram& histogram(const MetricDescription& description, const MetricLabels& labels = {});

  // Every series, in the order they were made. Safe from any thread.
  [[nodiscard]] MetricsSnapshot snapshot() const;
  [[nodiscard]] std::string prometheus_text() const { return to_prometheus_text(snapshot()); }

 private:
  struct Series {
    MetricKind kind;
    std::string name, unit, help;
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  Series& series(MetricKind kind, const MetricDescription& description, const MetricLabels& labels);

  mutable std::mutex mutex_;
  std::deque<Series> series_;  // stable: handed-out references never move
  std::unordered_map<std::string, std::size_t> index_;  // name + labels -> series_
};

}  // namespace warren::client

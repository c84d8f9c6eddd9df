#include "warren/client/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace warren::client {

void Histogram::record(std::chrono::nanoseconds d, std::uint64_t count) noexcept {
  if (count == 0) return;
  const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(d.count(), 0));
  const auto i = static_cast<std::size_t>(std::lower_bound(bounds_ns.begin(), bounds_ns.end(), ns) - bounds_ns.begin());
  buckets_[i].fetch_add(count, std::memory_order_relaxed);
  count_.fetch_add(count, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns * count, std::memory_order_relaxed);
}

namespace {

std::string series_key(std::string_view name, const MetricLabels& labels) {
  std::string key(name);
  for (const auto& l : labels) {
    key += '\0';
    key += l.name;
    key += '\0';
    key += l.value;
  }
  return key;
}

bool has_labels(const MetricPoint& p, const MetricLabels& wanted) {
  return std::all_of(wanted.begin(), wanted.end(), [&](const MetricLabel& w) {
    return std::find(p.labels.begin(), p.labels.end(), w) != p.labels.end();
  });
}

// Prometheus names and label names: [a-zA-Z_:][a-zA-Z0-9_:]* — OpenTelemetry's dots become _.
std::string prometheus_word(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':')) c = '_';
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  return out;
}

std::string_view unit_suffix(std::string_view unit) {
  if (unit == "s") return "seconds";
  if (unit == "ms") return "milliseconds";
  if (unit == "By") return "bytes";
  return {};  // "1", "{message}", ...: an annotation adds nothing
}

void append_escaped(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[64];
  for (int precision = 15; precision <= 17; ++precision) {  // the shortest that reads back as v
    std::snprintf(text, sizeof text, "%.*g", precision, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

void append_labels(std::string& out, const MetricLabels& labels, const MetricLabel* extra = nullptr) {
  if (labels.empty() && !extra) return;
  out += '{';
  bool first = true;
  const auto one = [&](const MetricLabel& l) {
    if (!first) out += ',';
    first = false;
    out += prometheus_word(l.name);
    out += "=\"";
    append_escaped(out, l.value);
    out += '"';
  };
  for (const auto& l : labels) one(l);
  if (extra) one(*extra);
  out += '}';
}

}  // namespace

Metrics::Series& Metrics::series(MetricKind kind, const MetricDescription& d, const MetricLabels& labels) {
  const std::string key = series_key(d.name, labels);
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    auto& s = series_[it->second];
    if (s.kind != kind) throw std::logic_error("warren: metric " + std::string(d.name) + " asked for as another kind");
    return s;
  }
  for (const auto& s : series_)
    if (s.name == d.name && (s.kind != kind || s.unit != d.unit))
      throw std::logic_error("warren: metric " + std::string(d.name) + " asked for as another kind or unit");
  auto& s = series_.emplace_back(Series{kind, std::string(d.name), std::string(d.unit), std::string(d.help), labels, {}, {}, {}});
  switch (kind) {
    case MetricKind::counter: s.counter = std::make_unique<Counter>(); break;
    case MetricKind::gauge: s.gauge = std::make_unique<Gauge>(); break;
    case MetricKind::histogram: s.histogram = std::make_unique<Histogram>(); break;
  }
  index_.emplace(key, series_.size() - 1);
  return s;
}

Counter& Metrics::counter(const MetricDescription& d, const MetricLabels& labels) {
  return *series(MetricKind::counter, d, labels).counter;
}
Gauge& Metrics::gauge(const MetricDescription& d, const MetricLabels& labels) {
  return *series(MetricKind::gauge, d, labels).gauge;
}
Histogram& Metrics::histogram(const MetricDescription& d, const MetricLabels& labels) {
  return *series(MetricKind::histogram, d, labels).histogram;
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot snap;
  std::lock_guard lock(mutex_);
  snap.points.reserve(series_.size());
  for (const auto& s : series_) {
    MetricPoint p{s.kind, s.name, s.unit, s.help, s.labels, 0, {}};
    switch (s.kind) {
      case MetricKind::counter: p.value = static_cast<double>(s.counter->value()); break;
      case MetricKind::gauge: p.value = static_cast<double>(s.gauge->value()); break;
      case MetricKind::histogram: {
        // Buckets first, then the count: a scrape racing a writer may see an observation in a
        // bucket before the count, never a count its buckets do not reach. The +Inf bucket is
        // the buckets' own total, so the rendered series stays consistent.
        std::uint64_t running = 0;
        for (std::size_t i = 0; i <= Histogram::bounds_ns.size(); ++i) {
          running += s.histogram->bucket(i);
          p.cumulative.push_back(running);
        }
        p.value = static_cast<double>(s.histogram->sum_ns()) / 1e9;
        break;
      }
    }
    snap.points.push_back(std::move(p));
  }
  return snap;
}

const MetricPoint* MetricsSnapshot::find(std::string_view name, const MetricLabels& labels) const {
  for (const auto& p : points)
    if (p.name == name && has_labels(p, labels)) return &p;
  return nullptr;
}

double MetricsSnapshot::total(std::string_view name, const MetricLabels& labels) const {
  double sum = 0;
  for (const auto& p : points)
    if (p.name == name && has_labels(p, labels)) sum += p.kind == MetricKind::histogram ? static_cast<double>(p.cumulative.back()) : p.value;
  return sum;
}

std::string prometheus_name(std::string_view name, std::string_view unit, MetricKind kind) {
  std::string out = prometheus_word(name);
  if (const auto suffix = unit_suffix(unit); !suffix.empty() && !out.ends_with("_" + std::string(suffix)))
    out += "_" + std::string(suffix);
  if (kind == MetricKind::counter) out += "_total";
  return out;
}

std::string to_prometheus_text(const MetricsSnapshot& snapshot) {
  std::string out;
  std::vector<std::string> described;  // a family's HELP and TYPE once, before its first series
  // A family's series together, in the order the families first appear.
  std::unordered_map<std::string_view, std::size_t> first_seen;
  for (std::size_t i = 0; i < snapshot.points.size(); ++i) first_seen.emplace(snapshot.points[i].name, i);
  std::vector<const MetricPoint*> ordered;
  ordered.reserve(snapshot.points.size());
  for (const auto& p : snapshot.points) ordered.push_back(&p);
  std::stable_sort(ordered.begin(), ordered.end(), [&](const MetricPoint* a, const MetricPoint* b) {
    return first_seen.at(a->name) < first_seen.at(b->name);
  });
  for (const MetricPoint* p : ordered) {
    const std::string name = prometheus_name(p->name, p->unit, p->kind);
    if (std::find(described.begin(), described.end(), name) == described.end()) {
      described.push_back(name);
      out += "# HELP " + name + " ";
      for (char c : p->help) {  // the format's two escapes in HELP (not the quote: it is unquoted)
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
      }
      out += "\n# TYPE " + name + " ";
      out += p->kind == MetricKind::counter ? "counter" : p->kind == MetricKind::gauge ? "gauge" : "histogram";
      out += '\n';
    }
    if (p->kind != MetricKind::histogram) {
      out += name;
      append_labels(out, p->labels);
      out += ' ' + format_number(p->value) + '\n';
      continue;
    }
    for (std::size_t i = 0; i < p->cumulative.size(); ++i) {
      const double le = i < Histogram::bounds_ns.size() ? static_cast<double>(Histogram::bounds_ns[i]) / 1e9 : INFINITY;
      const MetricLabel bound{"le", format_number(le)};
      out += name + "_bucket";
      append_labels(out, p->labels, &bound);
      out += ' ' + std::to_string(p->cumulative[i]) + '\n';
    }
    out += name + "_sum";
    append_labels(out, p->labels);
    out += ' ' + format_number(p->value) + '\n';
    out += name + "_count";
    append_labels(out, p->labels);
    out += ' ' + std::to_string(p->cumulative.back()) + '\n';
  }
  return out;
}

}  // namespace warren::client

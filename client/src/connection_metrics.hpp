// Internal: the series one connection writes (metrics.hpp), found once when the connection is
// made, so the hot paths add to a counter through a pointer. What this connection added to a
// gauge (open channels, publishes in flight, being connected or blocked) it takes back when it
// goes, so a dropped connection leaves no figure behind. Loop thread only. Not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "warren/client/metrics.hpp"
#include "warren/engine/events.hpp"
#include "warren/error.hpp"

namespace warren::client::detail {

// What a subscription counts: its deliveries and the time its application's callback took.
struct SubscriptionMetrics {
  Counter* consumed = nullptr;
  Histogram* process = nullptr;
};

class ConnectionMetrics {
 public:
  explicit ConnectionMetrics(std::shared_ptr<Metrics> metrics);
  ConnectionMetrics(const ConnectionMetrics&) = delete;
  ConnectionMetrics& operator=(const ConnectionMetrics&) = delete;
  ~ConnectionMetrics();

  void connected();
  void ended();  // closed or failed: its gauges go back to what they were without it
  void channel_opened();
  void channel_closed();
  void blocked(engine::Instant now);
  void unblocked(engine::Instant now);
  void received_bytes(std::size_t n) { received_bytes_->add(n); }
  void sent_bytes(std::size_t n) { sent_bytes_->add(n); }

  void published(std::string_view exchange);
  void publish_refused(std::string_view exchange, const Error& why);
  void settled(const engine::PublishDone& done, engine::Instant now);

  [[nodiscard]] SubscriptionMetrics subscription(std::string_view queue);
  void got(std::string_view queue);  // a basic.get that returned a message
  enum class Settle : std::uint8_t { ack, nack, reject };
  void settled_delivery(Settle how, bool requeue);

 private:
  Counter& sent_to(std::string_view exchange);

  std::shared_ptr<Metrics> metrics_;
  Gauge* connections_;
  Gauge* channels_;
  Gauge* blocked_;
  Histogram* blocked_time_;
  Gauge* in_flight_;
  Counter* received_bytes_;
  Counter* sent_bytes_;
  Counter* outcomes_[6];  // by engine::PublishOutcome
  Histogram* publish_duration_;
  Counter* settles_[3][2];  // by Settle, then requeue
  // The last destination published to: a publisher sends to one exchange, most of the time.
  std::string last_exchange_;
  Counter* last_sent_ = nullptr;

  // This connection's own share of the gauges.
  bool connected_ = false;
  std::int64_t channels_open_ = 0;
  std::int64_t publishes_in_flight_ = 0;
  std::optional<engine::Instant> blocked_since_;
};

}  // namespace warren::client::detail

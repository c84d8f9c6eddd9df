// The messaging patterns layer (work queue, direct; see docs/messaging.md): what every
// pattern shares. The options and the broker names they imply, the layer's channels (one for
// declares and confirmed publishes, one per subscription), the two exchanges, healthy(), and
// close(). Built on the public client API only; it never closes the connection it was given.
//
// A channel-level error (404, 406) closes only that channel: the layer forgets it and opens
// another on the next call. A subscription whose channel closed, or whose queue the broker
// cancelled, subscribes again after a backoff (healthy() false meanwhile, logged once). A
// closed connection ends every subscription for good: the layer was given a plain connection,
// and nothing can be reopened on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/client/session.hpp"

namespace warren::messaging {

// Something the layer reports once per episode: "consumer.closed" (a subscription lost its
// channel or its queue and will subscribe again), "consumer.recovered", "connection" (the
// connection closed: every subscription is unhealthy for good), "retry-levels" (a worker's
// work queue could not declare its retry queues, e.g. their node is down).
struct Event {
  std::string what{};
  std::string subject{};  // the queue, where there is one
  Error cause{};
};

struct Options {
  std::string prefix = "warren";      // every exchange and queue is named "<prefix>.<...>"
  std::string queue_type = "quorum";  // x-queue-type of work queues and their dead-letter queues
  std::chrono::milliseconds inbox_ttl{60000};  // x-expires of a service group's shared queue
  std::uint64_t stream_max_bytes = 0;  // a log's stream: 0 means no x-max-length-bytes
  std::function<void(const Event&)> on_event{};  // optional: the layer's log
  // Told the layer's records (docs/observability.md): its events above, and each retry,
  // dead-letter and log gap. The connection's own records come from ClientOptions::observer
  // (or the Session's); this may be the same observer. Null: off.
  std::shared_ptr<client::Observer> observer{};
  // Where the layer counts what it does (warren.work.retries, warren.work.dead_letters, by work
  // queue: docs/observability.md); the connection's own figures come from
  // ClientOptions::metrics, which may be the same Metrics. Null: off.
  std::shared_ptr<client::Metrics> metrics{};
  // Seeds every draw the layer makes (resubscribe jitter, retry jitter, UUIDs), so a test on
  // a virtual clock replays exactly; unset: random_device.
  std::optional<std::uint64_t> random_seed{};
};

// Where the layer's channels come from: a plain connection, or a Session (whose connection
// comes back after a loss). Tests plug in their own.
class ChannelSource {
 public:
  virtual ~ChannelSource() = default;
  virtual void open_channel(client::Callback<client::Channel> done) = 0;
  [[nodiscard]] virtual bool is_open() const = 0;
  // Whether a connection that is not open now will be again (a Session that has not closed):
  // then subscriptions wait for it instead of ending.
  [[nodiscard]] virtual bool recovers() const { return false; }
  [[nodiscard]] virtual std::uint32_t frame_max_bytes() const = 0;
  [[nodiscard]] virtual client::Driver& driver() const = 0;
  // The broker's version (server-properties), where behaviour differs by release; nothing
  // when unknown (then the layer behaves as on 3.x).
  [[nodiscard]] virtual std::optional<client::BrokerVersion> broker_version() const { return std::nullopt; }
};

class Subscription;

class Messaging : public std::enable_shared_from_this<Messaging> {
 public:
  // The layer over a connection the caller keeps (and closes). Bad options: invalid_argument.
  [[nodiscard]] static Result<std::shared_ptr<Messaging>> create(std::shared_ptr<client::Connection> connection,
                                                                 Options options = {});
  // The layer over a Session the caller keeps (and closes): it survives reconnects.
  [[nodiscard]] static Result<std::shared_ptr<Messaging>> create(std::shared_ptr<client::Session> session,
                                                                 Options options = {});
  [[nodiscard]] static Result<std::shared_ptr<Messaging>> create(std::unique_ptr<ChannelSource> source,
                                                                 Options options = {});
  ~Messaging();
  Messaging(const Messaging&) = delete;
  Messaging& operator=(const Messaging&) = delete;

  [[nodiscard]] const Options& options() const noexcept { return options_; }
  // "<prefix>.<suffix>": every name the layer uses on the broker.
  [[nodiscard]] std::string name(std::string_view suffix) const;
  [[nodiscard]] std::string backplane_exchange() const { return name("bp"); }
  [[nodiscard]] std::string direct_exchange() const { return name("direct"); }

  // The layer's channel for declares and confirmed publishes, in confirm mode, with the two
  // exchanges declared. Opened on first use; once closed (a 404, a 406) it is forgotten and
  // the next call opens another.
  void control_channel(client::Callback<client::Channel> done);
  // A channel of its own (for one subscription); close() closes it.
  void consumer_channel(client::Callback<client::Channel> done);

  // The connection is open and every subscription is consuming.
  [[nodiscard]] bool healthy() const;
  // Ends every subscription and closes the channels the layer opened; never the connection.
  void close(client::Callback<void> done);
  [[nodiscard]] bool closed() const noexcept { return closed_; }

  [[nodiscard]] client::Driver& driver() const { return source_->driver(); }
  [[nodiscard]] std::uint32_t frame_max_bytes() const { return source_->frame_max_bytes(); }
  [[nodiscard]] bool connection_open() const { return source_->is_open(); }
  [[nodiscard]] bool recovers() const { return source_->recovers(); }
  [[nodiscard]] std::optional<client::BrokerVersion> broker_version() const { return source_->broker_version(); }
  // A fresh random UUID (version 4) as text: message ids, inbox names.
  [[nodiscard]] std::string make_uuid();

  // ---- for the patterns
  void track(const std::shared_ptr<Subscription>& subscription);
  void report(Event event);
  // One record to Options::observer, if there is one (its connection field is empty: the
  // layer's records concern the layer, the connection's own name their host).
  void observe(std::string_view name, client::Level level, std::string_view subject, const Error* cause = nullptr) const {
    if (options_.observer) options_.observer->on_record(client::Record{name, level, {}, 0, cause, subject});
  }
  // One more in the layer's counter `description` for `queue`, if it counts.
  void count(const client::MetricDescription& description, std::string_view queue) const {
    if (options_.metrics) options_.metrics->counter(description, {{"messaging.destination.name", std::string(queue)}}).add();
  }
  void connection_lost(const Error& cause);  // once: every subscription is over for good
  // A seed for a pattern's own generator, drawn from the layer's (see Options::random_seed).
  [[nodiscard]] std::uint32_t draw_seed() { return static_cast<std::uint32_t>(random_()); }

 private:
  Messaging(std::unique_ptr<ChannelSource> source, Options options);
  void prepare_control(client::Channel ch);
  void settle_control(const Result<client::Channel>& r);

  std::unique_ptr<ChannelSource> source_;
  Options options_;
  std::optional<client::Channel> control_;
  bool control_opening_ = false;
  std::vector<client::Callback<client::Channel>> control_waiters_;
  std::vector<client::Channel> opened_;  // every channel this layer opened (closed on close())
  std::vector<std::weak_ptr<Subscription>> subscriptions_;
  bool closed_ = false;
  bool connection_reported_ = false;
  std::mt19937_64 random_;
};

// Options checked as the layer checks them (create() calls it): a prefix that is a valid
// name part, a known queue type, a positive inbox_ttl.
[[nodiscard]] Result<void> check_options(const Options& options);

}  // namespace warren::messaging

// A connection on an event loop: the engine driven through a Driver. Callback-first and
// loop-agnostic; one connection belongs to one loop thread (hand work in with Driver::post).
// A callback never runs inside an engine call: events are polled, then dispatched, and a
// callback may publish, ack or close. A message's views are valid during its callback.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "warren/client/broker_version.hpp"
#include "warren/client/channel.hpp"
#include "warren/client/connect_options.hpp"
#include "warren/client/credentials.hpp"
#include "warren/client/driver.hpp"
#include "warren/client/metrics.hpp"
#include "warren/client/observer.hpp"
#include "warren/client/options.hpp"
#include "warren/client/url.hpp"
#include "warren/engine/connection.hpp"

namespace warren::client {

namespace detail {
class HeldDeliveries;
struct ChannelCore;
class ConnectionMetrics;
class ConnectionSpans;
class ConsumerCore;
struct LoopThread;
}  // namespace detail

struct ClientOptions {
  engine::ConnectionOptions engine{};  // user, password, vhost and the URL's parameters override
  // The whole dial of one host (resolve, TCP, TLS). Unset: the method timeout
  // (engine.request_timeout), so one setting bounds every wait. The URL's connection_timeout wins.
  std::optional<engine::Duration> connect_timeout{};
  std::string ca_pem{};           // amqps: trusted CAs (PEM text); empty: the system store
  std::string client_cert_pem{};  // amqps: for EXTERNAL
  std::string client_key_pem{};
  // Adaptive by default (driver.hpp): batched only while reads bring bursts. A consumer that
  // cares for CPU per message more than for each message's latency asks for throughput mode,
  // e.g. {.min_bytes = 32768, .max_wait = std::chrono::milliseconds(2)}; {} turns it off.
  ReadBatching read_batching = adaptive_read_batching;
  // Told every event of this connection (observer.hpp); null: off.
  std::shared_ptr<Observer> observer{};
  // Where this connection counts what it does (metrics.hpp); one may serve many connections.
  // Null: off.
  std::shared_ptr<Metrics> metrics{};
  // Where the user name and secret come from when they expire (credentials.hpp): asked before
  // every connect, refreshed in place ahead of expiry. Null: the URL's (or engine's) user and
  // password, for the connection's life.
  std::shared_ptr<CredentialsProvider> credentials{};

  // Viewed (connect_options.hpp), for a call that takes the inline-safe form.
  operator ConnectOptions() const;  // NOLINT: implicit by design
};

class Connection : public std::enable_shared_from_this<Connection>, private StreamEvents {
 public:
  using Done = Callback<void>;
  using Answer = std::function<void(const Error* error, const wire::Method* reply)>;
  using Settled = std::function<void(engine::PublishOutcome outcome, const Error& cause)>;
  using OnMessage = std::function<void(const engine::Message& message)>;
  // A subscription ended: nullptr when our cancel was confirmed; otherwise why (the broker
  // cancelled it, its channel closed, the connection closed).
  using OnEnded = std::function<void(const Error* cause)>;

  // Dials the URL's hosts in turn; `on_ready` runs once, when the handshake is done or every
  // host failed (with the last host's error).
  [[nodiscard]] static std::shared_ptr<Connection> connect(Driver& driver, const ConnectionUrl& url,
                                                           ClientOptions options, Done on_ready);
  ~Connection() override;

  std::function<void(const Error& cause)> on_closed;  // once, after on_ready succeeded
  std::function<void(std::string_view reason)> on_blocked;
  std::function<void()> on_unblocked;
  // The output fell back under ClientOptions::engine.output_limit_bytes after congested()
  // was true: a publisher that paused can go on.
  std::function<void()> on_writable;
  // A mandatory publish no queue took (basic.return), in confirm mode or not: the message as
  // the broker handed it back, and why (errc::unroutable, reply 312 NO_ROUTE). In confirm
  // mode its publish's callback is told errc::unroutable too.
  std::function<void(const Delivery& returned, const Error& why)> on_returned;
  // An open channel closed: the broker closed it (404, 406, ...), a request on it timed out,
  // or the application's close_channel finished (reply code 200). Not called for a channel
  // still opening (its open_channel callback is told) nor when the whole connection ends.
  std::function<void(engine::ChannelId channel, const Error& cause)> on_channel_closed;
  // Every settled range of publishes (PublishDone), after the per-publish callbacks. With the
  // callback-free publish this is how a high-rate publisher counts confirms without a
  // callback stored per message.
  std::function<void(const engine::PublishDone& done)> on_publish_done;
  // A delivery of a subscription that named ConsumeOptions::ack_timeout has been held unsettled
  // past three quarters of it: settle it (or give it back) before the broker closes the channel.
  // Once per delivery, after the `consumer.ack_late` record.
  std::function<void(engine::ChannelId channel, std::string_view consumer_tag, std::uint64_t delivery_tag,
                     engine::Duration held_for)>
      on_ack_late;

  // A channel handle carrying every verb (see channel.hpp).
  void open_channel(Callback<Channel> done);

  void close(Done done);

  // connection.update-secret: the broker re-authenticates this connection's user with `secret`
  // (a fresh OAuth 2 token) in place of the one it logged in with; channels and consumers go on
  // undisturbed. `done` once the broker took it. A broker that refuses it closes the connection
  // (403 or 530 by its words): `done` and on_closed are told. With ClientOptions::credentials
  // warren does this itself ahead of expiry; this is for applications that schedule it.
  void update_secret(std::string_view secret, std::string_view reason, Done done);

  [[nodiscard]] bool is_open() const noexcept { return engine_ && engine_->is_open(); }
  // The frame size both sides agreed on (connection.tune-ok), 0 before the handshake: what a
  // content header must fit in (a dead-letter envelope's headers are budgeted against it).
  [[nodiscard]] std::uint32_t frame_max_bytes() const noexcept { return engine_ ? engine_->frame_max_bytes() : 0; }
  // The broker's server-properties from connection.start (product, version, platform,
  // capabilities, ...): empty before the handshake.
  [[nodiscard]] const wire::FieldTable& server_properties() const noexcept { return server_properties_; }
  // Its "version" parsed (see broker_version.hpp); nothing before the handshake or when the
  // broker sent none or an unreadable one.
  [[nodiscard]] std::optional<BrokerVersion> broker_version() const;
  // Output (and publishes waiting on a blocked connection) over the limit: pause publishing
  // until on_writable.
  [[nodiscard]] bool congested() const noexcept { return engine_ && engine_->congested(); }
  [[nodiscard]] const Endpoint& endpoint() const { return url_.endpoints[endpoint_index_]; }
  [[nodiscard]] Driver& driver() const noexcept { return driver_; }  // the loop this connection runs on

 private:
  friend class Channel;
  friend class Delivery;
  friend class Message;
  friend class detail::ConsumerCore;

  // ---- the id-based verbs under the handles. Not public: a channel number outlives its
  // channel (the broker reuses it), so users reach a channel only through its Channel.
  void open_channel(std::function<void(const Error*, engine::ChannelId)> done);
  void close_channel(engine::ChannelId channel, Answer done);
  // Every request answered by one method its wire type names (exchange and queue verbs, qos,
  // flow, recover): one path, the engine's.
  void request(engine::ChannelId channel, const wire::Method& m, Answer done);
  void cancel(engine::ChannelId channel, std::string_view consumer_tag, Answer done);
  // basic.get: `done` gets the message, or nullptr when the queue was empty.
  void get(engine::ChannelId channel, const wire::BasicGet& m,
           std::function<void(const Error* error, const engine::Message* message)> done);
  // The same, with the number of messages left in the queue.
  void get(engine::ChannelId channel, const wire::BasicGet& m,
           std::function<void(const Error* error, const engine::Message* message, std::uint32_t message_count)> done);
  void confirm_select(engine::ChannelId channel, Answer done);
  // In confirm mode `done` reports the broker's outcome; otherwise, that it was written.
  void publish(engine::ChannelId channel, const wire::BasicPublish& m, const wire::BasicProperties& properties,
               std::span<const std::byte> body, Settled done);
  // The same with options by name: `{.timeout = 2s}` bounds this publish alone (wait while
  // blocked, write, confirm) instead of its channel's timeout.
  void publish(engine::ChannelId channel, const wire::BasicPublish& m, const wire::BasicProperties& properties,
               std::span<const std::byte> body, Settled done, const engine::PublishOptions& options);
  // The timeout of the requests and publishes made on this channel from now on, in place of
  // ClientOptions::engine.request_timeout.
  [[nodiscard]] Result<void> set_channel_timeout(engine::ChannelId channel, engine::Duration timeout);
  // What bounds a request on `channel`: its own timeout, else request_timeout.
  [[nodiscard]] Result<engine::Duration> channel_timeout(engine::ChannelId channel);
  // The same without a per-message callback: the outcome arrives through on_publish_done,
  // keyed by the returned id. Nothing is stored per message.
  [[nodiscard]] Result<engine::PublishId> publish(engine::ChannelId channel, const wire::BasicPublish& m,
                                                  const wire::BasicProperties& properties,
                                                  std::span<const std::byte> body);
  [[nodiscard]] Result<engine::PublishId> publish(engine::ChannelId channel, const wire::BasicPublish& m,
                                                  const wire::BasicProperties& properties,
                                                  std::span<const std::byte> body, const engine::PublishOptions& options);
  // `on_message` runs for each delivery; `done` once consume-ok (or the failure) is in.
  void consume(engine::ChannelId channel, const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch,
               OnMessage on_message, Answer done);
  // Where `on_message` puts a delivery: into the application's callback (its time is the
  // delivery's processing time), or into a buffer the application reads later (it is not).
  enum class Handing : std::uint8_t { to_callback, to_buffer };
  // The same, and `on_ended` runs once when the subscription ends (see OnEnded).
  // `ack_timeout`: the broker's consumer_timeout, to warn before it (on_ack_late).
  void consume(engine::ChannelId channel, const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch,
               OnMessage on_message, OnEnded on_ended, Answer done, Handing handing = Handing::to_callback,
               std::optional<engine::Duration> ack_timeout = std::nullopt);
  [[nodiscard]] Result<void> ack(engine::ChannelId channel, std::uint64_t delivery_tag, bool multiple = false);
  [[nodiscard]] Result<void> nack(engine::ChannelId channel, std::uint64_t delivery_tag, bool multiple, bool requeue);
  [[nodiscard]] Result<void> reject(engine::ChannelId channel, std::uint64_t delivery_tag, bool requeue);

  Connection(Driver& driver, ConnectionUrl url, ClientOptions options, Done on_ready);
  // A Channel's subscription (push or stream) on the consumer core it was given.
  void subscribe(engine::ChannelId channel, const ConsumeOptions& options, std::shared_ptr<detail::ConsumerCore> consumer,
                 Callback<Consumer> done);
  // A stream consumer's buffer is full (+1) or drained (-1): read only while none is full.
  void hold_input(int delta);
  void close_cores(const Error& cause);  // every Channel handle's channel is gone
  void dial_next();
  // connection_credentials.cpp: with ClientOptions::credentials, the provider is asked first.
  void fetch_credentials_then_dial();
  void schedule_refresh(engine::Duration after);
  // At two thirds of the life of the secret in use, or after `at_least` if that is later.
  void schedule_refresh_of_secret(engine::Duration at_least);
  void refresh_credentials();
  void pump();   // poll and dispatch events, write, re-arm the timer
  void flush();  // write what is pending, if no write is in flight
  void tell_replies_owed();  // a deep confirm window batches the stream's reads
  void dispatch(const engine::Event& e);
  void finish(const Error& cause);  // the end: settle every waiter once, then on_closed
  void later(std::function<void()> fn);  // a callback that must not run inside the caller's call
  // One record to the observer, if there is one.
  void observe(std::string_view name, Level level, engine::ChannelId channel = 0, const Error* cause = nullptr,
               std::string_view subject = {}) const {
    if (options_.observer)
      options_.observer->on_record(Record{name, level, peer_, channel, cause, subject});
  }
  template <class Verb>
  void request(Verb verb, Answer done);
  // A publish (either form) handed to the engine, counted (with metrics on), its span begun or
  // ended (with spans on); not written yet: the caller pumps.
  Result<engine::PublishId> counted_publish(engine::ChannelId channel, const wire::BasicPublish& m,
                                            const wire::BasicProperties& properties, std::span<const std::byte> body,
                                            const engine::PublishOptions& options);
  // Channel::publish's callback-free form, whole (the handle holds no reference: see
  // ChannelCore::live_here); observed_publish is its form with spans, metrics or a trace.
  Result<engine::PublishId> publish_of_handle(engine::ChannelId channel, const Publish& p,
                                              std::span<const std::byte> body);
  Result<engine::PublishId> observed_publish(engine::ChannelId channel, const Publish& p,
                                             std::span<const std::byte> body);
  // A publish's span and counters, when spans or metrics are on.
  void observe_publish(engine::ChannelId channel, const Result<engine::PublishId>& r, const wire::BasicPublish& m,
                       const wire::BasicProperties& properties, std::size_t body_bytes);
  // The context a publish writes: the caller's (Publish::trace), or with spans on its own
  // span's, a child of the caller's, else of the context its headers already carry, else a new
  // root: a context is never replaced. Asked right before the publish it is for.
  [[nodiscard]] TraceContext send_trace(const Publish& publish);
  // Whether a publish's properties gain trace headers: with spans on, or a context of the
  // caller's. Otherwise they go as they are, and send_trace need not be asked.
  [[nodiscard]] bool traces(const Publish& publish) const noexcept { return spans_ != nullptr || publish.trace.valid(); }
  // The span of the callback running for this delivery, with spans on.
  [[nodiscard]] std::optional<TraceContext> processing_span(engine::ChannelId channel, std::uint64_t delivery_tag) const;
  // A command whose result is known at once (ack, nack, reject, a callback-free publish).
  template <class Verb>
  [[nodiscard]] auto immediate(Verb verb) -> std::invoke_result_t<Verb&, engine::Connection&>;

  // StreamEvents
  void on_connected() override;
  void on_bytes(std::span<const std::byte> bytes) override;
  void on_written(std::size_t bytes) override;
  void on_stream_error(Error cause) override;

  Driver& driver_;
  ConnectionUrl url_;
  ClientOptions options_;
  Done on_ready_;
  std::size_t endpoint_index_ = 0;
  std::optional<Error> last_dial_error_;
  std::string peer_;  // "host:port" of the host dialled last: what records name
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Timer> timer_;
  std::optional<engine::Instant> timer_at_;  // what timer_ is armed for (nullopt: not armed)
  std::optional<engine::Connection> engine_;
  wire::FieldTable server_properties_;  // copied from Connected
  bool dispatching_ = false;
  std::size_t write_in_flight_ = 0;  // bytes of the write in flight, 0 when none
  bool reading_ = true;
  bool replies_owed_ = false;  // told to the stream: a deep confirm window (ReadBatching::owed_confirms)
  std::size_t deliveries_in_read_ = 0;  // completed by the bytes on_bytes was handed: told to the stream
  bool ready_reported_ = false;
  bool closed_reported_ = false;  // finish() ran: nothing is reported after it
  bool close_asked_ = false;      // close() was called
  bool redial_ = false;           // this host failed its handshake: dial the next after this turn
  std::vector<Done> close_waiters_;

  std::unordered_map<engine::RequestId, Answer> answers_;
  using GetDone = std::function<void(const Error*, const engine::Message*, std::uint32_t)>;
  std::unordered_map<engine::RequestId, GetDone> gets_;
  // The open channels' handles' state, indexed by channel id (null: none). The engine numbers
  // channels from the lowest free, so the array is as long as the most channels open at once:
  // 16 bytes a channel where a hash map's node and bucket took about 56 (issue 40).
  std::vector<std::shared_ptr<detail::ChannelCore>> cores_;
  [[nodiscard]] std::shared_ptr<detail::ChannelCore>* core_slot(engine::ChannelId channel) noexcept {
    return channel < cores_.size() && cores_[channel] ? &cores_[channel] : nullptr;
  }
  std::shared_ptr<detail::LoopThread> loop_thread_;
  int input_holds_ = 0;
  void watch_held_input();  // while input is held, a read now and then (see connection.cpp)
  void drop_timers();       // the engine's timer and the held input's, with the stream
  std::unique_ptr<Timer> peek_timer_;
  std::unique_ptr<Timer> refresh_timer_;  // with a provider whose secret expires
  std::optional<engine::Duration> secret_expires_in_;  // the secret in use: its life when fetched
  engine::Instant secret_fetched_at_{};
  unsigned refresh_attempts_ = 0;  // failed fetches since the last refresh
  bool refreshing_ = false;        // a fetch or an update-secret is under way
  bool peek_armed_ = false;
  bool peek_ = false;  // one read is let through the hold
  std::uint16_t heartbeat_s_ = 0;  // negotiated
  std::unordered_map<engine::ChannelId, std::function<void(const Error*, engine::ChannelId)>> opening_;
  std::map<std::pair<engine::ChannelId, engine::PublishId>, Settled> publishes_;
  struct Subscription {
    // What only an observer, the metrics, the spans or ConsumeOptions::ack_timeout read.
    struct Observed {
      std::string queue{};
      Counter* consumed = nullptr;   // with metrics on
      Histogram* process = nullptr;  // with metrics on, for a callback's deliveries
      std::shared_ptr<detail::HeldDeliveries> held{};  // with ConsumeOptions::ack_timeout only
    };
    engine::ChannelId channel{};
    Handing handing = Handing::to_callback;
    std::string tag{};
    OnMessage on_message{};
    OnEnded on_ended{};
    // Null without any of them: a subscription is 112 bytes, not 176 (issue 40: a consumer on
    // each of 2,000 channels).
    std::unique_ptr<Observed> observed{};
    [[nodiscard]] detail::HeldDeliveries* held() const noexcept { return observed ? observed->held.get() : nullptr; }
    [[nodiscard]] std::string_view queue() const noexcept { return observed ? std::string_view(observed->queue) : std::string_view(); }
  };
  std::size_t held_watches_ = 0;  // subscriptions with `held`: settles look for them only then
  std::unique_ptr<Timer> held_timer_;
  bool held_armed_ = false;  // held_timer_ is armed for a warning still due
  void note_settled(engine::ChannelId channel, std::uint64_t delivery_tag, bool multiple);
  void arm_held_timer();  // for the earliest warning still due, if any
  void warn_held();       // the deliveries held past their warning, told once each
  Subscription subscription(engine::ChannelId channel, std::string tag, std::string_view queue, OnMessage on_message,
                            OnEnded on_ended, Handing handing, std::shared_ptr<detail::HeldDeliveries> held);
  std::unique_ptr<detail::ConnectionMetrics> metrics_;  // null when ClientOptions::metrics is
  std::unique_ptr<detail::ConnectionSpans> spans_;      // null unless the observer wants spans
  void end_subscriptions(engine::ChannelId channel, const Error& cause);  // channel 0: all
  // Sorted by channel, in the order they were made within one: a delivery's subscription is
  // found by a binary search on its channel (a connection with a consumer on each of 2,000
  // channels walked 1,000 of them a delivery, a tenth of its CPU), and one of few is found as
  // fast as by a walk. An array of pointers (issue 40): with the subscriptions inline, the
  // array's doublings while 2,000 channels set up at once left their old arrays (up to 115 KiB)
  // as holes among what the channels keep. Not a deque: the 512 bytes one allocates when
  // constructed cost each connection of one consumer about 0.7 KiB of RSS.
  using Subscriptions = std::vector<std::unique_ptr<Subscription>>;
  Subscriptions consumers_;
  Subscription& add_subscription(Subscription s);
  Subscriptions::iterator subscription_at(engine::ChannelId channel, std::string_view tag);  // end() if none
  Subscription* find_subscription(engine::ChannelId channel, std::string_view tag);

  // Every callback still owed an answer, taken out of the connection at its end (finish) or
  // its destruction, and told once, in one order: channels, gets, requests, publishes,
  // subscriptions, on_ready, then the close waiters.
  struct Waiters {
    Done on_ready{};  // only if it was never called
    std::vector<std::pair<engine::ChannelId, std::function<void(const Error*, engine::ChannelId)>>> opening;
    std::vector<GetDone> gets{};
    std::vector<Answer> answers{};
    std::vector<Settled> publishes{};
    std::vector<OnEnded> ended{};
    std::vector<Done> close_waiters{};
    [[nodiscard]] bool empty() const noexcept;
    void settle(const Error& cause, bool close_succeeded);
  };
  [[nodiscard]] Waiters take_waiters();
};

}  // namespace warren::client

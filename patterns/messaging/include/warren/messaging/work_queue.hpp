// The work queue: a `queue_type` queue "<prefix>.<name>" that workers consume with a prefetch
// per consumer channel, its dead-letter queue "<prefix>.<name>.dlq" (same type), and one
// retry queue per delay level "<prefix>.<name>.retry.<ms>" (durable classic, a queue-wide
// x-message-ttl of <ms>, dead-lettering back into the work queue), so a short delay never
// waits behind a longer one.
//
// The attempt travels in the x-warren-attempt header (1 on put). retry() republishes with the
// attempt + 1 through the retry level its backoff picked, or, once the attempts are spent,
// into the dead-letter queue with why; either republish is confirmed before the original is
// acked, so a crash in between duplicates a message rather than loses it. release() is a
// plain requeue: no attempt counted. Headers the layer adds are budgeted against the
// negotiated frame_max: an error text that would not fit is cut.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "warren/client/message.hpp"
#include "warren/messaging/backoff.hpp"
#include "warren/messaging/messaging.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::messaging {

inline constexpr std::string_view attempt_header = "x-warren-attempt";
// On a dead-lettered message: why, the last error (cut to fit), the attempts made, and the
// routing key it was first published with.
inline constexpr std::string_view reason_header = "x-warren-reason";
inline constexpr std::string_view error_header = "x-warren-error";
inline constexpr std::string_view attempts_header = "x-warren-attempts";
inline constexpr std::string_view original_routing_key_header = "x-warren-original-routing-key";
// On a retry or dead-letter copy of a message that carried a user_id: that user_id. The copy
// itself carries none: RabbitMQ refuses (406, closing the channel) a publish whose user_id is
// not the publishing connection's user, and the worker is rarely the original publisher.
inline constexpr std::string_view original_user_id_header = "x-warren-original-user-id";

struct WorkQueueOptions {
  std::string name{};          // the queue is "<prefix>.<name>"
  std::uint32_t attempts = 5;  // a message is tried this many times, then dead-lettered
  Backoff backoff{};           // 1 s → 60 s: also fixes the retry queues' delay levels
  // Uniform draws in [0, 1) for the jitter; unset: a generator seeded by the layer.
  std::function<double()> random{};
};

// The options of a verb (put, retry, dead_letter) are views, as the client's are
// (client/options.hpp): the verb copies what it needs before it returns, and written inline in
// a co_await they are safe with GCC 12 (everything here is trivially destructible).
struct PutOptions {
  std::string_view body{};
  client::Arguments headers{};      // x-warren-attempt is set to 1
  std::string_view message_id{};    // empty: a fresh UUID
  std::optional<engine::Duration> timeout{};  // the confirm's deadline; unset: the channel's
  // The caller's trace context, written into the message's headers as Publish::trace writes
  // it (in place of a traceparent in `headers`); none: the headers go as they are.
  client::TraceContext trace{};
};

struct WorkerOptions {
  std::uint16_t prefetch = 1;  // unacked messages per consumer channel
};

// What happened to a message handed back with retry().
struct Retried {
  bool dead_lettered = false;
  std::chrono::milliseconds delay{0};  // the retry level it waits in (0 when dead-lettered)
};

struct RetryOptions {
  std::string_view error{};       // why this attempt failed (cut to fit the frame)
  client::Arguments headers{};    // more headers for the retried or dead-lettered message
};

class WorkQueue;

// One message handed to a worker. Move-only: it is settled once.
class WorkItem {
 public:
  WorkItem(std::shared_ptr<WorkQueue> queue, client::Message message);
  WorkItem(WorkItem&&) noexcept = default;
  WorkItem& operator=(WorkItem&&) noexcept = default;

  [[nodiscard]] std::uint32_t attempt() const noexcept { return attempt_; }  // 1-based
  [[nodiscard]] std::string_view message_id() const noexcept;
  [[nodiscard]] const client::Message& message() const noexcept { return message_; }
  [[nodiscard]] std::string_view body() const noexcept { return message_.body_text(); }
  [[nodiscard]] client::Driver& driver() const;  // the loop it runs on

  // Done: the message is acked.
  [[nodiscard]] Result<void> done();
  // Back to the queue as it is (requeue): the attempt is not counted. On RabbitMQ 4.0-4.2, a
  // message the broker already counted release_refresh_count returns for goes back as a fresh
  // copy instead (see release_refreshes): if that copy is not confirmed, the original is
  // requeued after all.
  [[nodiscard]] Result<void> release();
  // This attempt failed: republished through a retry level, or into the dead-letter queue
  // once `attempts` are spent; the original is acked only after the broker confirmed that.
  // Not confirmed (an error here): the original is requeued as it was, to be tried again,
  // after the delay this retry was to wait (a dead-letter: after the backoff's base).
  void retry(RetryOptions options, client::Callback<Retried> done);
  // Straight into the dead-letter queue, with `reason`.
  void dead_letter(std::string reason, RetryOptions options, client::Callback<void> done);

 private:
  std::shared_ptr<WorkQueue> queue_;
  client::Message message_;
  std::uint32_t attempt_ = 1;
};

class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
 public:
  [[nodiscard]] static Result<std::shared_ptr<WorkQueue>> create(std::shared_ptr<Messaging> layer,
                                                                 WorkQueueOptions options);

  [[nodiscard]] const std::string& queue() const noexcept { return queue_; }
  [[nodiscard]] const std::string& dead_letter_queue() const noexcept { return dlq_; }
  [[nodiscard]] std::string retry_queue(std::chrono::milliseconds level) const;
  [[nodiscard]] const WorkQueueOptions& options() const noexcept { return options_; }
  [[nodiscard]] const std::shared_ptr<Messaging>& layer() const noexcept { return layer_; }

  // Declares the work queue, its dead-letter queue and its retry levels (idempotent).
  void declare(client::Callback<void> done);
  // Declares the topology (once per WorkQueue), then publishes one message, confirmed.
  void put(const PutOptions& options, client::Callback<void> done);
  // A worker: its own channel with `prefetch`, one call of `on_item` per message.
  void consume(WorkerOptions options, std::function<void(WorkItem)> on_item,
               client::Callback<std::shared_ptr<Subscription>> done);

  // ---- for WorkItem
  // `only_ours`: of the message's headers and `headers`, only the x-warren-* ones (and a W3C
  // trace context) are kept.
  void republish(const client::Message& original, std::string routing_key, client::FieldTable headers,
                 std::string_view error, bool only_ours, client::Callback<void> done);
  // The message republished with `add` over its headers (and an x-warren-error when
  // `with_error`, cut to what is left) fits one content header frame.
  [[nodiscard]] bool fits(const client::Message& original, const client::FieldTable& add, bool with_error) const;
  // The original's properties as a copy carries them: persistent, no per-message expiration
  // (it would expire in a retry or dead-letter queue), no user_id (see
  // original_user_id_header); headers not set.
  [[nodiscard]] static client::Properties republished_properties(const client::Message& original);
  [[nodiscard]] static client::FieldTable republished_headers(const client::Message& original,
                                                             const client::FieldTable& add, bool only_ours);
  [[nodiscard]] double draw();
  // Declares the topology first (on a channel of its own) if a republish found a queue missing
  // (it came back unroutable: a level or the dead-letter queue deleted, or lost with its node)
  // or the first declare failed; callers meanwhile share that declare, and one that failed is
  // not made again before the backoff's base has passed. Its failure is passed on, and a caller
  // may publish anyway: the level it needs may be there though another is not.
  void declare_again(client::Callback<void> done);
  void level_missing() noexcept { levels_missing_ = true; }
  // A republish that was not confirmed: the original goes back to the queue `pause` from now,
  // not at once, or a level or dead-letter queue that refuses at once would bounce it between
  // the broker and this worker in a loop. It holds its prefetch slot meanwhile.
  void requeue_after(std::shared_ptr<client::Message> original, std::chrono::milliseconds pause);
  // The worker is closing: what requeue_after holds goes back now, and from now on at once (the
  // timer would otherwise keep an Asio loop running for up to a retry's delay).
  void hand_back_held();

 private:
  WorkQueue(std::shared_ptr<Messaging> layer, WorkQueueOptions options);
  void declare_on(const client::Channel& ch, client::Callback<void> done, bool with_levels = true);

  std::shared_ptr<Messaging> layer_;
  WorkQueueOptions options_;
  std::string queue_, dlq_;
  bool declared_ = false;        // the whole topology, once (what put() needs)
  bool levels_missing_ = false;  // a republish came back unroutable since
  std::vector<client::Callback<void>> declaring_;  // waiting for declare_again's declare
  std::optional<Error> declare_failed_;  // declare_again's last, until declare_again_at_
  engine::Instant declare_again_at_{};
  void declared_again(const Result<void>& r);
  bool holding_ = true;  // false once hand_back_held ran
  std::multimap<engine::Instant, std::shared_ptr<client::Message>> requeue_at_;
  std::unique_ptr<client::Timer> requeue_timer_;
  void requeue_due();
  std::mt19937_64 random_;
};

// RabbitMQ 4.0-4.2 count every return of a quorum queue message, release()'s requeue included,
// and dead-letter it (without the layer's headers) at the default x-delivery-limit of 20.
// There, a release of a message already returned this often republishes a fresh copy (same
// attempt, confirmed) and acks the original instead, so the broker's count starts again. 3.x
// has no default limit and 4.3+ does not count a nack(requeue): a plain requeue suffices.
inline constexpr std::int64_t release_refresh_count = 10;
[[nodiscard]] bool release_refreshes(std::optional<client::BrokerVersion> broker, std::int64_t delivery_count) noexcept;

// The largest error text that fits beside `properties` in one content header frame of
// `frame_max_bytes` (0: no limit from the broker; capped at 4096 bytes all the same).
[[nodiscard]] std::size_t error_budget(const client::Properties& properties, std::uint32_t frame_max_bytes);
// `text` cut to at most `limit` bytes on a UTF-8 boundary.
[[nodiscard]] std::string cut_text(std::string_view text, std::size_t limit);

}  // namespace warren::messaging

// The RabbitMQ transport of a pipeline: a queue as the source (manual acks, the prefetch
// bounds what is in flight), an exchange as the destination (one long-lived confirm channel,
// mandatory), dead-letter publishing, and the worker's status. Built on the public client API.
//
// Settlement, one delivery at a time (never a multiple ack), once its outcome is known:
//   completed, skipped  -> ack
//   dead_lettered       -> the envelope is published (confirmed, mandatory) and then the
//                          delivery acked; a failed dead-letter publish requeues it instead.
//                          With native_dead_letter: nack without requeue (the queue's DLX).
//   requeued, stop, rethrow -> nack with requeue, or reject without requeue (FailureSettle).
// A delivery whose channel died is never settled on another: its outcome is dropped (counted)
// and the broker redelivers it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/pipeline/core.hpp"

namespace warren::pipeline {

// How a failed delivery goes back: nack with requeue (tried again; see docs/pipeline.md for
// the hot-loop on a classic queue), or reject without requeue (dropped, or the queue's DLX).
enum class FailureSettle : std::uint8_t { requeue, reject };

struct SourceOptions {
  std::string queue{};
  std::optional<std::uint16_t> prefetch{};  // unset: the pipeline's concurrency
  // Take at most this many deliveries (0: no limit): then the subscription is cancelled and
  // any delivery still arriving is handed back unstarted (nack with requeue).
  std::uint64_t limit = 0;
};

struct DestinationOptions {
  std::string exchange{};
  std::string routing_key{};
  std::function<std::string(const Record&)> route{};  // set: the routing key comes from the record
  bool mandatory = true;  // unroutable is the record's error
  bool confirms = true;   // the step completes on the broker's confirm
  engine::Duration timeout = std::chrono::seconds(30);  // the publish's whole deadline
};

struct DeadLetterOptions {
  std::string exchange{};     // "" is the default exchange (routing_key then names the queue)
  std::string routing_key{};  // "": the source message's own routing key
  engine::Duration timeout = std::chrono::seconds(30);
};

struct QueuePipelineOptions {
  PipelineOptions core{};  // name, concurrency, error policy
  SourceOptions source{};
  std::optional<DestinationOptions> destination{};  // unset: the stages are the end
  std::optional<DeadLetterOptions> dead_letter{};   // where dead-lettered records are published
  // The user the connection logged in as (a URL's user; empty when not known, as with
  // EXTERNAL). A source message's user_id that is this user is kept in what the pipeline
  // publishes (output and envelope); any other is moved to the x-pipeline-original-user-id
  // header (dead_letter.hpp), since RabbitMQ refuses a publish that claims another user.
  std::string login_user{};
  bool native_dead_letter = false;  // dead-lettered: nack without requeue, the queue's own DLX
  FailureSettle on_requeued = FailureSettle::requeue;
  // A requeued outcome's nack is held back this long (0: at once). The delivery keeps its
  // prefetch slot meanwhile, so a record that fails every time comes back at most
  // prefetch / requeue_delay times a second instead of in a hot loop. A drain sends it at once.
  engine::Duration requeue_delay{0};
  FailureSettle on_stop = FailureSettle::requeue;
  FailureSettle on_rethrow = FailureSettle::requeue;
  engine::Duration drain_timeout = std::chrono::seconds(30);  // after a stop outcome
  // Each record's outcome, once its delivery was settled (a dead-letter: once its envelope's
  // publish was started), or its outcome dropped. Set here, so nothing runs before it is in place.
  std::function<void(const Record& record, const Finished& finished)> on_outcome{};
  // Where each outcome is counted (warren.pipeline.records, by pipeline name and outcome;
  // docs/observability.md). Null: off.
  std::shared_ptr<client::Metrics> metrics{};
  // Once, when the pipeline stopped: nullopt after a drain asked for; otherwise why (a stop or
  // rethrow outcome's record error, the source or publishing channel's loss).
  std::function<void(const std::optional<std::string>& failure)> on_stopped{};
  // RabbitMQ closes a channel (406) whose delivery stays unacked past its consumer_timeout
  // (30 min by default, checked every minute). A delivery held this long is reported once,
  // before that happens: on_slow_delivery(delivery tag, how long it has been held), and counted.
  engine::Duration slow_delivery_warning = std::chrono::minutes(25);
  std::function<void(std::uint64_t delivery_tag, engine::Duration held)> on_slow_delivery{};
};

enum class State : std::uint8_t { starting, running, draining, stopped };
[[nodiscard]] const char* to_string(State state) noexcept;

struct Status {
  std::string pipeline{};
  std::string queue{};
  State state = State::starting;
  std::size_t in_flight = 0;  // deliveries taken and not yet settled
  std::uint64_t completed = 0, skipped = 0, dead_lettered = 0;
  std::uint64_t failed = 0;   // requeued or rejected: requeued/stop/rethrow, a failed dead-letter
  std::uint64_t dropped = 0;  // outcomes of a dead channel's deliveries (the broker redelivers)
  std::uint64_t slow = 0;     // deliveries held past slow_delivery_warning
};

class QueuePipeline : public std::enable_shared_from_this<QueuePipeline> {
 public:
  // Opens the publishing channel (confirm mode) and the source channel, and consumes; `ready`
  // runs once consuming began, or with the failure (then nothing stays open).
  [[nodiscard]] static std::shared_ptr<QueuePipeline> start(std::shared_ptr<client::Connection> connection,
                                                            QueuePipelineOptions options, std::vector<Stage> stages,
                                                            client::Callback<void> ready);
  ~QueuePipeline();

  [[nodiscard]] Status status() const;

  // Stops consuming, hands back what never started (nack with requeue), lets what is in
  // flight reach its outcome within `deadline`, then closes its channels (the broker
  // requeues what was still unsettled). `done` runs once it stopped.
  void drain(engine::Duration deadline, client::Callback<void> done);

 private:
  struct Pending {
    client::Message message{};
    std::uint32_t attempt = 1;
    engine::Instant taken_at{};
    bool warned = false;
    std::unique_ptr<client::Timer> requeue_timer{};  // a requeue held back (requeue_delay)
  };
  QueuePipeline(std::shared_ptr<client::Connection> connection, QueuePipelineOptions options, std::vector<Stage> stages);
  void open(client::Callback<void> ready);
  void deliver(const client::Delivery& delivery);
  void settle(std::uint64_t id, Record& record, const Finished& finished);
  // A record's outcome to QueuePipelineOptions::metrics and on_outcome; a dropped one (its
  // delivery was lost first) is counted as such.
  enum class Dropped : std::uint8_t { no, yes };
  void report(const Record& record, const Finished& finished, Dropped dropped);
  void publish_record(Record& record, StageDone done);
  void dead_letter(std::uint64_t id, const Finished& finished);
  // Settles and forgets a pending delivery; counts a dead channel's as dropped.
  void settle_pending(std::uint64_t id, bool ack, FailureSettle how);
  // Settles a failed delivery `how`; a requeue waits requeue_delay first (while running), so a
  // record that fails the same way at once does not become a hot requeue loop.
  void settle_failed(std::uint64_t id, FailureSettle how);
  void fail_stop(std::string why);
  void begin_drain(engine::Duration deadline);
  void maybe_finished();
  void close_all();
  void check_slow();  // reports deliveries held past slow_delivery_warning; re-arms itself

  std::shared_ptr<client::Connection> conn_;
  QueuePipelineOptions options_;
  std::unique_ptr<Pipeline> core_;
  client::Channel source_, publisher_;
  client::Consumer consumer_;
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_id_ = 0;
  std::uint64_t taken_ = 0;
  bool cancelled_ = false;  // our own cancel: the subscription's end is no failure
  Status status_;
  std::unique_ptr<client::Timer> drain_timer_, slow_timer_;
  std::vector<std::unique_ptr<client::Timer>> retired_timers_;  // fired requeue delays
  std::vector<client::Callback<void>> drain_waiters_;
  std::optional<std::string> failure_;
  bool stopped_reported_ = false;
};

}  // namespace warren::pipeline

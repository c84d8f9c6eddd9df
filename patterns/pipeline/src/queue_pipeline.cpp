#include "warren/pipeline/queue_pipeline.hpp"

#include <chrono>

#include "warren/client/trace_context.hpp"
#include "warren/pipeline/dead_letter.hpp"
#include "warren/pipeline/mapping.hpp"

namespace warren::pipeline {

const char* to_string(State state) noexcept {
  switch (state) {
    case State::starting: return "starting";
    case State::running: return "running";
    case State::draining: return "draining";
    case State::stopped: return "stopped";
  }
  return "unknown";
}

namespace {
std::string describe(const RecordError& e) { return e.type.empty() ? e.message : e.type + ": " + e.message; }
}  // namespace

QueuePipeline::QueuePipeline(std::shared_ptr<client::Connection> connection, QueuePipelineOptions options,
                             std::vector<Stage> stages)
    : conn_(std::move(connection)), options_(std::move(options)) {
  core_ = std::make_unique<Pipeline>(options_.core, std::move(stages));
  status_.pipeline = options_.core.name;
  status_.queue = options_.source.queue;
}

QueuePipeline::~QueuePipeline() = default;

std::shared_ptr<QueuePipeline> QueuePipeline::start(std::shared_ptr<client::Connection> connection,
                                                    QueuePipelineOptions options, std::vector<Stage> stages,
                                                    client::Callback<void> ready) {
  std::shared_ptr<QueuePipeline> p(new QueuePipeline(std::move(connection), std::move(options), std::move(stages)));
  if (p->options_.destination) {
    std::weak_ptr<QueuePipeline> weak = p;
    p->core_->add(Stage::async([weak](Record& r, StageDone done) {
      auto self = weak.lock();
      if (!self) return done({.error = RecordError{"warren::pipeline", "the pipeline is gone"}});
      self->publish_record(r, std::move(done));
    }));
  }
  p->open(std::move(ready));
  return p;
}

void QueuePipeline::open(client::Callback<void> ready) {
  auto self = shared_from_this();
  auto fail = [self, ready](const std::string& what, const Error& e) {
    self->close_all();
    self->status_.state = State::stopped;
    self->stopped_reported_ = true;  // a start that failed reports through `ready` only
    Error out = e;
    out.detail = e.detail.empty() ? what : what + ": " + e.detail;
    ready(out);
  };
  conn_->open_channel([self, ready, fail](Result<client::Channel> pub) {
    if (!pub) return fail("channel.open", pub.error());
    self->publisher_ = *pub;
    const bool confirms = self->options_.dead_letter || (self->options_.destination && self->options_.destination->confirms);
    auto consume = [self, ready, fail](Result<void> selected) {
      if (!selected) return fail("confirm.select", selected.error());
      self->conn_->open_channel([self, ready, fail](Result<client::Channel> src) {
        if (!src) return fail("channel.open", src.error());
        self->source_ = *src;
        std::weak_ptr<QueuePipeline> weak = self;
        const auto prefetch = self->options_.source.prefetch.value_or(
            static_cast<std::uint16_t>(std::min<std::size_t>(self->core_->options().concurrency, 65535)));
        self->status_.state = State::running;  // deliveries may be read before consume-ok's callback
        self->check_slow();
        self->source_.consume(
            {.queue = self->options_.source.queue, .prefetch = prefetch},
            [weak](const client::Delivery& d) {
              if (auto s = weak.lock()) s->deliver(d);
            },
            [self, ready, fail, weak](Result<client::Consumer> c) {
              if (!c) return fail("consume " + self->options_.source.queue, c.error());
              self->consumer_ = std::move(*c);
              self->consumer_.on_ended([weak](const Error& cause) {
                auto s = weak.lock();
                if (!s || s->cancelled_ || s->status_.state != State::running) return;  // our own cancel
                s->fail_stop("consume " + s->options_.source.queue + ": " + cause.to_string());
              });
              if (self->options_.source.limit && self->taken_ >= self->options_.source.limit) {
                self->cancelled_ = true;  // the limit was reached before consume-ok was read
                self->consumer_.cancel(nullptr);
              }
              ready({});
            });
      });
    };
    if (confirms) self->publisher_.confirm_select(consume);
    else consume({});
  });
}

void QueuePipeline::deliver(const client::Delivery& d) {
  if (status_.state != State::running) {
    // Arrived while our cancel was on its way: it never started, so it goes straight back.
    (void)d.nack({.requeue = true});
    return;
  }
  if (options_.source.limit && taken_ >= options_.source.limit) {
    (void)d.nack({.requeue = true});
    return;
  }
  if (options_.source.limit && ++taken_ == options_.source.limit && consumer_.active()) {
    cancelled_ = true;
    consumer_.cancel(nullptr);
  }
  retired_timers_.clear();  // never inside a timer's callback here
  client::Message message = d.take();
  auto record = record_from(message);
  const std::uint64_t id = ++next_id_;
  if (!record) {
    // Headers the client cannot decode: no stage can run it, but it is a failed record like
    // any other, and the error policy decides it (dead-lettered by default, its outcome
    // reported). (Today the client's engine refuses such a content header before it becomes
    // a delivery; this keeps the pipeline whole should one get this far.)
    Record bare = record_without_headers(message);
    const RecordError error{"warren::pipeline::headers", "the headers could not be decoded: " + record.error().to_string()};
    pending_.emplace(id, Pending{std::move(message), attempt_of(bare.metadata), conn_->driver().now()});
    const Finished finished{outcome_of_failure(options_.core, bare, error), error};
    return settle(id, bare, finished);
  }
  // The stages run in a span of their own: a child of the context the message carried, which
  // is what the record's headers (and so its output) carry from here on.
  if (const auto input = client::TraceContext::from(record->headers))
    record->headers.set("traceparent", input->child().traceparent());
  // Registered as pending before the record enters the pipeline: whatever happens next, the
  // delivery has one owner that settles it once.
  pending_.emplace(id, Pending{std::move(message), attempt_of(record->metadata), conn_->driver().now()});
  std::weak_ptr<QueuePipeline> weak = weak_from_this();
  core_->submit(
      std::move(*record),
      [weak, id](Record& r, const Finished& f) {
        if (auto s = weak.lock()) s->settle(id, r, f);
      },
      id);
}

void QueuePipeline::settle_pending(std::uint64_t id, bool ack, FailureSettle how) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Result<void> r = ack ? it->second.message.ack()
                       : (how == FailureSettle::requeue ? it->second.message.nack({.requeue = true})
                                                        : it->second.message.reject({.requeue = false}));
  // A dead channel's delivery: nothing was sent, the broker redelivers it.
  if (!r) ++status_.dropped;
  // This may run inside that timer's own callback: it is destroyed later, not here.
  if (it->second.requeue_timer) retired_timers_.push_back(std::move(it->second.requeue_timer));
  pending_.erase(it);
  maybe_finished();
}

void QueuePipeline::settle(std::uint64_t id, Record& record, const Finished& f) {
  if (!pending_.contains(id)) {  // dropped by a drain past its deadline: nothing to settle
    report(record, f, Dropped::yes);
    return;
  }
  if (!source_.is_open()) {
    // Its channel died before the drain noticed: the broker has the delivery again and will
    // redeliver it, so the outcome is dropped (counted there alone) and nothing is sent for
    // it: no settle, no dead-letter envelope.
    settle_pending(id, false, FailureSettle::requeue);
    report(record, f, Dropped::yes);
    return;
  }
  switch (f.outcome) {
    case Outcome::completed:
      ++status_.completed;
      settle_pending(id, true, FailureSettle::requeue);
      break;
    case Outcome::skipped:
      ++status_.skipped;
      settle_pending(id, true, FailureSettle::requeue);
      break;
    case Outcome::dead_lettered:
      if (options_.native_dead_letter) {
        ++status_.dead_lettered;
        settle_pending(id, false, FailureSettle::reject);
      } else if (options_.dead_letter) {
        dead_letter(id, f);  // settles once the envelope is confirmed
      } else {
        ++status_.failed;  // nowhere to put it: back to the queue
        settle_pending(id, false, FailureSettle::requeue);
      }
      break;
    case Outcome::requeued:
      ++status_.failed;
      settle_failed(id, options_.on_requeued);
      break;
    case Outcome::stop:
    case Outcome::rethrow: {
      ++status_.failed;
      settle_pending(id, false, f.outcome == Outcome::stop ? options_.on_stop : options_.on_rethrow);
      std::string why = std::string(to_string(f.outcome)) + ": " + (f.error ? describe(*f.error) : std::string("no error"));
      if (f.outcome == Outcome::rethrow) fail_stop(std::move(why));
      else {
        if (!failure_) failure_ = std::move(why);
        begin_drain(options_.drain_timeout);
      }
      break;
    }
  }
  report(record, f, Dropped::no);
}

void QueuePipeline::report(const Record& record, const Finished& f, Dropped dropped) {
  if (options_.metrics) {
    static constexpr client::MetricDescription records{"warren.pipeline.records", "{record}",
                                                       "Records a pipeline finished, by outcome (dropped: its delivery was lost first)"};
    options_.metrics
        ->counter(records, {{"pipeline", options_.core.name},
                            {"outcome", dropped == Dropped::yes ? "dropped" : to_string(f.outcome)}})
        .add();
  }
  if (options_.on_outcome) options_.on_outcome(record, f);
}

void QueuePipeline::settle_failed(std::uint64_t id, FailureSettle how) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (how == FailureSettle::requeue && options_.requeue_delay > engine::Duration::zero() &&
      status_.state == State::running) {
    std::weak_ptr<QueuePipeline> weak = weak_from_this();
    auto& timer = it->second.requeue_timer;
    timer = conn_->driver().timer([weak, id] {
      if (auto s = weak.lock()) s->settle_pending(id, false, FailureSettle::requeue);
    });
    timer->arm(conn_->driver().now() + options_.requeue_delay);
    return;
  }
  settle_pending(id, false, how);
}

void QueuePipeline::publish_record(Record& r, StageDone done) {
  // The source delivery is already back with the broker: publishing would make a certain
  // duplicate of the record it redelivers.
  if (!source_.is_open())
    return done({.error = RecordError{"warren::pipeline", "the source channel closed; the broker redelivers the message"}});
  const DestinationOptions& d = *options_.destination;
  const std::string key = d.route ? d.route(r) : d.routing_key;
  // Another user's user_id cannot travel (properties_of leaves it out): named in a header.
  if (r.metadata.user_id && !carries_user_id(*r.metadata.user_id, options_.login_user) &&
      !r.headers.find(envelope::original_user_id))
    r.headers.set(std::string(envelope::original_user_id), *r.metadata.user_id);
  const client::Properties props = properties_of(r.metadata, r.headers, options_.login_user);
  std::weak_ptr<QueuePipeline> weak = weak_from_this();
  publisher_.publish({.exchange = d.exchange, .routing_key = key, .mandatory = d.mandatory, .properties = props,
                      .timeout = d.timeout},
                     client::as_bytes(r.body), [weak, done = std::move(done)](Result<engine::PublishOutcome> o) {
                       if (o) return done({});
                       done({.error = RecordError{"warren::publish", o.error().to_string()}});
                       auto s = weak.lock();
                       if (s && !s->publisher_.is_open())
                         s->fail_stop("publishing channel: " + o.error().to_string());
                     });
}

void QueuePipeline::dead_letter(std::uint64_t id, const Finished& f) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  const client::Message& m = it->second.message;
  const DeadLetterOptions& dl = *options_.dead_letter;
  auto requeue = [this, id](const std::string&) {
    ++status_.failed;
    settle_failed(id, FailureSettle::requeue);
  };
  auto original = m.headers();
  // Headers that cannot be decoded cannot travel in the envelope; the record still must.
  if (!original) original = wire::FieldTable{};
  client::Properties base = m.properties();
  base.headers.reset();
  // The source's per-message TTL must not travel on: the record would expire in the
  // dead-letter queue. The envelope names it instead.
  const std::optional<std::string_view> expiration = base.expiration;
  base.expiration.reset();
  // Nor another user's user_id: the broker refuses one that is not this connection's user.
  // Named instead. The connection's own travels as it is.
  std::optional<std::string_view> user_id;
  if (base.user_id && !carries_user_id(*base.user_id, options_.login_user)) {
    user_id = base.user_id;
    base.user_id.reset();
  }
  RecordError error = f.error.value_or(RecordError{});
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  EnvelopeFacts facts{.pipeline = options_.core.name,
                      .exchange = m.exchange(),
                      .routing_key = m.routing_key(),
                      .headers = &*original,
                      .error = &error,
                      .attempt = it->second.attempt,
                      .failed_at_s = static_cast<std::uint64_t>(now_s.count()),
                      .expiration = expiration,
                      .user_id = user_id};
  auto headers = envelope_headers(facts, base, conn_->frame_max_bytes());
  if (!headers) return requeue(headers.error().to_string());
  base.headers = wire::TableRef(*headers);
  const std::string_view key = dl.routing_key.empty() ? m.routing_key() : std::string_view(dl.routing_key);
  std::weak_ptr<QueuePipeline> weak = weak_from_this();
  // Confirmed before the source is settled: a crash between the two leaves the source
  // unacked (redelivered: at least once), never a record in neither place.
  publisher_.publish({.exchange = dl.exchange, .routing_key = key, .mandatory = true, .properties = base, .timeout = dl.timeout},
                     m.body(), [weak, id](Result<engine::PublishOutcome> o) {
                       auto s = weak.lock();
                       if (!s) return;
                       if (o) {
                         ++s->status_.dead_lettered;
                         return s->settle_pending(id, true, FailureSettle::requeue);
                       }
                       ++s->status_.failed;
                       // Not dead-lettered, so back to the queue, but not at once: a dead-letter
                       // target that refuses it (unroutable, say) would refuse it again at once.
                       s->settle_failed(id, FailureSettle::requeue);
                       if (!s->publisher_.is_open()) s->fail_stop("publishing channel: " + o.error().to_string());
                     });
}

Status QueuePipeline::status() const {
  Status s = status_;
  s.in_flight = pending_.size();
  return s;
}

void QueuePipeline::drain(engine::Duration deadline, client::Callback<void> done) {
  if (status_.state == State::stopped) {
    if (done) done({});
    return;
  }
  if (done) drain_waiters_.push_back(std::move(done));
  begin_drain(deadline);
}

void QueuePipeline::begin_drain(engine::Duration deadline) {
  if (status_.state == State::draining || status_.state == State::stopped) return;
  status_.state = State::draining;
  if (consumer_.active()) {
    cancelled_ = true;
    consumer_.cancel(nullptr);
  }
  // Requeues held back go now.
  std::vector<std::uint64_t> held_back;
  for (auto& [id, p] : pending_)
    if (p.requeue_timer) held_back.push_back(id);
  for (auto id : held_back) {
    pending_.at(id).requeue_timer->cancel();
    settle_pending(id, false, FailureSettle::requeue);
  }
  // What never started goes back at once: the core names each by the id it was submitted
  // with (a delivery settled outside the core, such as one whose headers could not be decoded
  // and is being dead-lettered, is not among them).
  for (auto& w : core_->take_waiting()) settle_pending(w.tag, false, FailureSettle::requeue);
  if (deadline <= engine::Duration::zero()) {
    // No wait (a failure stop): what is in flight is dropped now, not on a timer (on libuv a
    // timer of a loop with nothing else alive, after a lost connection, would never run).
    status_.dropped += pending_.size();
    pending_.clear();
    return maybe_finished();
  }
  std::weak_ptr<QueuePipeline> weak = weak_from_this();
  const engine::Instant give_up = conn_->driver().now() + deadline;
  constexpr auto look_every = std::chrono::milliseconds(100);
  // A timer that keeps the loop alive: a drain has a deadline and a `done` to run, and on libuv
  // a lost connection may leave nothing else alive to run it.
  drain_timer_ = conn_->driver().keepalive_timer([weak, give_up, look_every] {
    auto s = weak.lock();
    if (!s || s->status_.state != State::draining) return;
    const auto now = s->conn_->driver().now();
    // Past the deadline, or the source channel died meanwhile (its deliveries are the broker's
    // again): the outcomes still to come are dropped; closing the channel hands back the rest.
    if (now < give_up && s->source_.is_open()) return s->drain_timer_->arm(std::min(give_up, now + look_every));
    if (!s->failure_ && !s->source_.is_open())
      s->failure_ = "source channel: " + (s->source_.closed_cause() ? s->source_.closed_cause()->to_string() : "closed");
    s->status_.dropped += s->pending_.size();
    s->pending_.clear();
    s->maybe_finished();
  });
  drain_timer_->arm(std::min(give_up, conn_->driver().now() + look_every));
  maybe_finished();
}

void QueuePipeline::fail_stop(std::string why) {
  if (!failure_) failure_ = std::move(why);
  begin_drain(std::chrono::milliseconds(0));
}

void QueuePipeline::maybe_finished() {
  if (status_.state != State::draining || !pending_.empty()) return;
  status_.state = State::stopped;
  if (drain_timer_) drain_timer_->cancel();
  close_all();
  auto waiters = std::move(drain_waiters_);
  for (auto& w : waiters) w({});
  if (!stopped_reported_) {
    stopped_reported_ = true;
    if (options_.on_stopped) options_.on_stopped(failure_);
  }
}

void QueuePipeline::check_slow() {
  if (status_.state == State::stopped) return;
  const auto now = conn_->driver().now();
  for (auto& [id, p] : pending_) {
    if (p.warned || now - p.taken_at < options_.slow_delivery_warning) continue;
    p.warned = true;
    ++status_.slow;
    if (options_.on_slow_delivery) options_.on_slow_delivery(p.message.delivery_tag(), std::chrono::duration_cast<engine::Duration>(now - p.taken_at));
  }
  if (!slow_timer_) {
    std::weak_ptr<QueuePipeline> weak = weak_from_this();
    slow_timer_ = conn_->driver().timer([weak] {
      if (auto s = weak.lock()) s->check_slow();
    });
  }
  // A quarter of the warning, at most a second: a report is never late by more than that.
  const auto step = std::min<engine::Duration>(options_.slow_delivery_warning / 4, std::chrono::seconds(1));
  slow_timer_->arm(now + std::max<engine::Duration>(step, std::chrono::milliseconds(10)));
}

void QueuePipeline::close_all() {
  if (slow_timer_) slow_timer_->cancel();  // Asio's timers keep its loop running
  if (source_.is_open()) source_.close([](Result<void>) {});
  if (publisher_.is_open()) publisher_.close([](Result<void>) {});
}

}  // namespace warren::pipeline

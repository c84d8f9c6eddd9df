#include "warren/messaging/work_queue.hpp"

#include "warren/client/kept.hpp"

#include <algorithm>
#include <variant>

#include "held_trace.hpp"
#include "names.hpp"
#include "warren/client/owned_publish.hpp"
#include "warren/client/session.hpp"
#include "warren/wire/properties.hpp"

namespace warren::messaging {
namespace {

// Headers the broker writes when it dead-letters (the retry levels do, every time): dropped
// from a republish so they neither grow nor count against the frame (RabbitMQ 4 ignores
// them in a client's publish anyway).
bool broker_death_header(std::string_view key) {
  return key == "x-death" || key.starts_with("x-first-death-") || key.starts_with("x-last-death-") ||
         key == "x-delivery-count";  // a quorum queue's count of returns: a republish starts it again
}

std::int64_t delivery_count(const client::Message& m) {
  if (auto h = m.headers(); h)
    if (const auto* v = h->find("x-delivery-count"))
      if (auto n = v->integer()) return *n;
  return 0;
}

bool warren_header(std::string_view key) { return key.starts_with("x-warren-"); }
// A W3C trace context: small, and kept wherever the layer's own headers are.
bool trace_header(std::string_view key) { return key == "traceparent" || key == "tracestate"; }

constexpr client::MetricDescription retries_metric{"warren.work.retries", "{message}",
                                                   "Work items retried: republished to a delay level and confirmed, by work queue"};
constexpr client::MetricDescription dead_letters_metric{"warren.work.dead_letters", "{message}",
                                                        "Work items dead-lettered, confirmed, by work queue"};

// Declares each queue and binds it to `exchange` under its own name, one after another.
void declare_all(client::Channel ch, std::shared_ptr<std::vector<client::Kept<client::QueueDeclareOptions>>> all, std::string exchange,
                 std::size_t i, client::Callback<void> done) {
  if (i == all->size()) return done(Result<void>());
  ch.queue_declare(*(*all)[i], [ch, all, exchange, i, done](Result<client::QueueDeclared> q) {
    if (!q) return done(q.error());
    ch.queue_bind({.queue = q->name, .exchange = exchange, .routing_key = q->name}, [ch, all, exchange, i, done](Result<void> r) {
      if (!r) return done(r);
      declare_all(ch, all, exchange, i + 1, done);
    });
  });
}

// The republish was not confirmed (the broker may or may not have it): the original goes back
// to the queue as it was, to be tried again, rather than sit unacked until its channel closes;
// `pause` from now (see WorkQueue::requeue_after). The caller hears of it at once.
template <class T>
void unconfirmed(WorkQueue& queue, std::shared_ptr<client::Message> original, std::chrono::milliseconds pause,
                 const Error& why, const client::Callback<T>& done) {
  if (why.code == make_error_code(errc::unroutable)) queue.level_missing();
  queue.requeue_after(std::move(original), pause);
  done(why);
}

}  // namespace

std::size_t error_budget(const client::Properties& properties, std::uint32_t frame_max_bytes) {
  constexpr std::size_t cap = 4096;
  auto size = wire::content_header_size(properties);
  if (!size) return 0;
  if (frame_max_bytes == 0) return cap;
  constexpr std::size_t frame_overhead = 8;  // type, channel, size, frame-end
  const std::size_t room = frame_max_bytes > frame_overhead ? frame_max_bytes - frame_overhead : 0;
  if (*size >= room) return 0;
  return std::min(cap, room - *size);
}

std::string cut_text(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  std::size_t n = limit;
  // Never end inside a UTF-8 sequence: step back over continuation bytes to a lead byte.
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return std::string(text.substr(0, n));
}

// ---- WorkItem

WorkItem::WorkItem(std::shared_ptr<WorkQueue> queue, client::Message message)
    : queue_(std::move(queue)), message_(std::move(message)) {
  if (auto h = message_.headers(); h)
    if (const auto* v = h->find(attempt_header))
      if (auto n = v->integer(); n && *n >= 1) attempt_ = static_cast<std::uint32_t>(std::min<std::int64_t>(*n, 1 << 30));
}

std::string_view WorkItem::message_id() const noexcept {
  return message_.properties().message_id.value_or(std::string_view{});
}

client::Driver& WorkItem::driver() const { return queue_->layer()->driver(); }

Result<void> WorkItem::done() { return message_.ack(); }

bool release_refreshes(std::optional<client::BrokerVersion> broker, std::int64_t delivery_count) noexcept {
  return broker && *broker >= client::BrokerVersion{4, 0, 0} && *broker < client::BrokerVersion{4, 3, 0} &&
         delivery_count >= release_refresh_count;
}

Result<void> WorkItem::release() {
  if (!release_refreshes(queue_->layer()->broker_version(), delivery_count(message_)))
    return message_.nack({.requeue = true});
  auto original = std::make_shared<client::Message>(std::move(message_));
  client::FieldTable same{{std::string(attempt_header), static_cast<std::int64_t>(attempt_)}};
  queue_->republish(*original, queue_->queue(), std::move(same), {}, false, [original, queue = queue_](Result<void> r) {
    if (!r)
      return unconfirmed(*queue, original, queue->options().backoff.base, r.error(), client::Callback<void>([](Result<void>) {}));
    (void)original->ack();
  });
  return {};
}

void WorkItem::retry(RetryOptions options, client::Callback<Retried> done) {
  if (attempt_ >= queue_->options().attempts) {
    return dead_letter("attempts exhausted", std::move(options), [done](Result<void> r) {
      if (!r) return done(r.error());
      done(Retried{.dead_lettered = true});
    });
  }
  const auto delay = retry_delay(queue_->options().backoff, attempt_, queue_->draw());
  client::FieldTable headers = options.headers.to_table();
  headers.set(std::string(attempt_header), static_cast<std::int64_t>(attempt_ + 1));
  // The message's own headers leave no room for a retry's in one frame: republishing it would
  // fail every time and the message would come back forever. It goes to the dead-letter queue
  // now, with the layer's headers only (dead_letter() strips the rest).
  if (!queue_->fits(message_, headers, !options.error.empty())) {
    return dead_letter("its headers leave no room for a retry's within frame_max " +
                           std::to_string(queue_->layer()->frame_max_bytes()),
                       std::move(options), [done](Result<void> r) {
                         if (!r) return done(r.error());
                         done(Retried{.dead_lettered = true});
                       });
  }
  auto original = std::make_shared<client::Message>(std::move(message_));
  // Copied: the declare below may finish after the caller's view is gone.
  queue_->declare_again([original, delay, done, weak = std::weak_ptr<WorkQueue>(queue_), attempt = attempt_,
                         headers = std::move(headers), error = std::string(options.error)](Result<void>) mutable {
    auto queue = weak.lock();
    if (!queue) return done(make_error(errc::invalid_argument, "the work queue is gone"));
    queue->republish(*original, queue->retry_queue(delay), std::move(headers), error, false,
                     [original, delay, done, queue, attempt](Result<void> r) {
                       if (!r) return unconfirmed(*queue, original, delay, r.error(), done);
                       if (auto acked = original->ack(); !acked) return done(acked.error());
                       queue->layer()->count(retries_metric, queue->queue());
                       queue->layer()->observe("work.retried", client::Level::info,
                                               queue->queue() + ": " + client::attempt_text(attempt + 1, delay));
                       done(Retried{.dead_lettered = false, .delay = delay});
                     });
  });
}

void WorkItem::dead_letter(std::string reason, RetryOptions options, client::Callback<void> done) {
  auto original = std::make_shared<client::Message>(std::move(message_));
  client::FieldTable h = options.headers.to_table();
  h.set(std::string(attempt_header), static_cast<std::int64_t>(attempt_));
  h.set(std::string(attempts_header), static_cast<std::int64_t>(attempt_));
  h.set(std::string(reason_header), std::move(reason));
  // The routing key it was first put with (a retry level dead-letters it back under the work
  // queue's name, which is the key it was put with).
  if (auto prior = original->headers(); !prior || !prior->find(original_routing_key_header))
    h.set(std::string(original_routing_key_header), std::string(original->routing_key()));
  // Headers too big to travel with the layer's in one frame: only the x-warren-* ones go (the
  // message's other headers are dropped, and the reason says so), or it could never leave.
  const bool only_ours = !queue_->fits(*original, h, !options.error.empty());
  if (only_ours) {
    const auto* why = h.find(reason_header);
    std::string text = why ? std::get<std::string>(why->value) : std::string();
    h.set(std::string(reason_header), text + "; its other headers did not fit frame_max " +
                                          std::to_string(queue_->layer()->frame_max_bytes()) + " and were dropped");
  }
  const auto* said = h.find(reason_header);
  std::string subject = queue_->queue() + ": " + (said ? std::get<std::string>(said->value) : std::string());
  // Copied: the declare below may finish after the caller's view is gone. Weak: a declare
  // that never finishes (the loop torn down) must not keep the queue alive in a cycle.
  queue_->declare_again([original, done, weak = std::weak_ptr<WorkQueue>(queue_), h = std::move(h),
                         error = std::string(options.error), only_ours, subject = std::move(subject)](Result<void>) mutable {
    auto queue = weak.lock();
    if (!queue) return done(make_error(errc::invalid_argument, "the work queue is gone"));
    queue->republish(*original, queue->dead_letter_queue(), std::move(h), error, only_ours,
                     [original, done, queue, subject = std::move(subject)](Result<void> r) {
                       if (!r) return unconfirmed(*queue, original, queue->options().backoff.base, r.error(), done);
                       queue->layer()->count(dead_letters_metric, queue->queue());
                       queue->layer()->observe("work.dead_lettered", client::Level::warning, subject);
                       done(original->ack());
                     });
  });
}

// ---- WorkQueue

Result<std::shared_ptr<WorkQueue>> WorkQueue::create(std::shared_ptr<Messaging> layer, WorkQueueOptions options) {
  if (!layer) return make_error(errc::invalid_argument, "no messaging layer");
  if (!detail::valid_name(options.name, 180))
    return make_error(errc::invalid_argument, "work queue name '" + options.name + "': letters, digits, '.', '-', '_', ':'");
  if (options.attempts == 0) return make_error(errc::invalid_argument, "attempts must be at least 1");
  if (options.backoff.base.count() <= 0 || options.backoff.max < options.backoff.base)
    return make_error(errc::invalid_argument, "backoff: base must be positive and max at least base");
  if (!factor_in_range(options.backoff.factor))
    return make_error(errc::invalid_argument, "backoff: factor must be above 1 and at most 1000");
  if (options.backoff.max > max_delay)
    return make_error(errc::invalid_argument, "backoff: max must be at most " + std::to_string(max_delay.count()) +
                                                  " ms (a delay level is a queue's x-message-ttl)");
  return std::shared_ptr<WorkQueue>(new WorkQueue(std::move(layer), std::move(options)));
}

WorkQueue::WorkQueue(std::shared_ptr<Messaging> layer, WorkQueueOptions options)
    : layer_(std::move(layer)), options_(std::move(options)), random_(layer_->draw_seed()) {
  queue_ = layer_->name(options_.name);
  dlq_ = queue_ + ".dlq";
}

std::string WorkQueue::retry_queue(std::chrono::milliseconds level) const {
  return queue_ + ".retry." + std::to_string(level.count());
}

double WorkQueue::draw() {
  if (options_.random) return options_.random();
  return std::uniform_real_distribution<double>(0, 1)(random_);
}

void WorkQueue::declare_on(const client::Channel& ch, client::Callback<void> done, bool with_levels) {
  const auto& type = layer_->options().queue_type;
  // Everything goes through "<prefix>.direct" with the queue's name as the routing key, never
  // the default exchange: a user allowed only the names under "<prefix>." can run it (a
  // dead-letter target of "" would need write access to amq.default).
  const std::string exchange = layer_->direct_exchange();
  // Kept: the declares run one after another, long after this function returned.
  auto all = std::make_shared<std::vector<client::Kept<client::QueueDeclareOptions>>>();
  // The work queue dead-letters into the DLQ too: RabbitMQ 4.0-4.2 dead-letter a message the
  // broker returned 20 times, and a queue without a target would drop it.
  all->push_back(client::QueueDeclareOptions{
      .name = queue_,
      .durable = true,
      .arguments = {{"x-queue-type", type}, {"x-dead-letter-exchange", exchange}, {"x-dead-letter-routing-key", dlq_}}});
  all->push_back(client::QueueDeclareOptions{.name = dlq_, .durable = true, .arguments = {{"x-queue-type", type}}});
  for (auto level : with_levels ? delay_levels(options_.backoff) : std::vector<std::chrono::milliseconds>{}) {
    const std::string name = retry_queue(level);
    all->push_back(client::QueueDeclareOptions{.name = name,
                                               .durable = true,
                                               .arguments = {{"x-queue-type", "classic"},
                                                             {"x-message-ttl", static_cast<std::int64_t>(level.count())},
                                                             {"x-dead-letter-exchange", exchange},
                                                             {"x-dead-letter-routing-key", queue_}}});
  }
  ch.exchange_declare({.name = exchange, .type = "direct", .durable = true}, [ch, all, exchange, done](Result<void> r) {
    if (!r) return done(r);
    declare_all(ch, all, exchange, 0, done);
  });
}

void WorkQueue::declare(client::Callback<void> done) {
  std::weak_ptr<WorkQueue> weak = weak_from_this();
  layer_->control_channel([weak, done](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self) return done(make_error(errc::invalid_argument, "the work queue is gone"));
    if (!ch) return done(ch.error());
    self->declare_on(*ch, [weak, done](Result<void> r) {
      if (auto self = weak.lock(); self && r) self->declared_ = true;
      done(r);
    });
  });
}

void WorkQueue::declare_again(client::Callback<void> done) {
  if (declared_ && !levels_missing_) return done(Result<void>());
  // One that failed a moment ago is not made again before the backoff's base has passed: each
  // refusal (a 404, the level's node down) closes its channel.
  if (declare_failed_ && layer_->driver().now() < declare_again_at_) return done(*declare_failed_);
  declaring_.push_back(std::move(done));
  if (declaring_.size() > 1) return;
  std::weak_ptr<WorkQueue> weak = weak_from_this();
  // On a channel of its own, closed after: the control channel carries other publishes'
  // confirms, and a refused declare would close it under them.
  layer_->consumer_channel([weak](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self) return;
    if (!ch) return self->declared_again(ch.error());
    self->declare_on(*ch, [weak, channel = *ch](Result<void> r) mutable {
      if (channel.is_open()) channel.close(nullptr);
      if (auto self = weak.lock()) self->declared_again(r);
    });
  });
}

void WorkQueue::declared_again(const Result<void>& r) {
  if (r) {
    declared_ = true;
    levels_missing_ = false;
    declare_failed_.reset();
  } else {
    layer_->report({.what = "retry-levels", .subject = queue_, .cause = r.error()});
    declare_failed_ = r.error();
    declare_again_at_ = layer_->driver().now() + options_.backoff.base;
  }
  auto waiting = std::exchange(declaring_, {});
  for (auto& d : waiting) d(r);
}

void WorkQueue::hand_back_held() {
  holding_ = false;
  if (requeue_timer_) requeue_timer_->cancel();
  auto held = std::exchange(requeue_at_, {});
  for (auto& [at, original] : held) (void)original->nack({.requeue = true});
}

void WorkQueue::requeue_after(std::shared_ptr<client::Message> original, std::chrono::milliseconds pause) {
  if (!holding_) {
    (void)original->nack({.requeue = true});
    return;
  }
  auto& driver = layer_->driver();
  if (!requeue_timer_) {
    std::weak_ptr<WorkQueue> weak = weak_from_this();
    requeue_timer_ = driver.timer([weak] {
      if (auto self = weak.lock()) self->requeue_due();
    });
  }
  requeue_at_.emplace(driver.now() + pause, std::move(original));
  requeue_timer_->arm(requeue_at_.begin()->first);
}

void WorkQueue::requeue_due() {
  const auto now = layer_->driver().now();
  while (!requeue_at_.empty() && requeue_at_.begin()->first <= now) {
    auto original = std::move(requeue_at_.begin()->second);
    requeue_at_.erase(requeue_at_.begin());
    // Its channel may be gone by now: the broker has then requeued it already.
    (void)original->nack({.requeue = true});
  }
  if (!requeue_at_.empty()) requeue_timer_->arm(requeue_at_.begin()->first);
}

void WorkQueue::put(const PutOptions& options, client::Callback<void> done) {
  // Copied now: the options are views, and the publish may wait for the declare and a channel.
  auto headers = std::make_shared<client::FieldTable>(options.headers.to_table());
  headers->set(std::string(attempt_header), static_cast<std::int64_t>(1));
  auto id = std::make_shared<std::string>(options.message_id.empty() ? layer_->make_uuid() : std::string(options.message_id));
  auto body = std::make_shared<std::string>(options.body);
  auto timeout = options.timeout;
  auto trace = detail::hold(options.trace);
  std::weak_ptr<WorkQueue> weak = weak_from_this();
  auto publish = [weak, headers, id, body, timeout, trace, done](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self) return done(make_error(errc::invalid_argument, "the work queue is gone"));
    if (!ch) return done(ch.error());
    const std::string exchange = self->layer_->direct_exchange();
    ch->publish({.exchange = exchange,
                 .routing_key = self->queue_,
                 .mandatory = true,
                 .properties = {.headers = wire::TableRef(*headers), .delivery_mode = client::persistent, .message_id = *id},
                 .timeout = timeout,
                 .trace = trace->context},
                client::as_bytes(*body), [done](Result<engine::PublishOutcome> r) {
                  if (!r) return done(r.error());
                  done(Result<void>());
                });
  };
  if (declared_) return layer_->control_channel(std::move(publish));
  declare([weak, publish = std::move(publish), done](Result<void> r) mutable {
    auto self = weak.lock();
    if (!r || !self) return done(r ? Result<void>(make_error(errc::invalid_argument, "the work queue is gone")) : r);
    self->layer_->control_channel(std::move(publish));
  });
}

client::FieldTable WorkQueue::republished_headers(const client::Message& original, const client::FieldTable& add,
                                                  bool only_ours) {
  client::FieldTable headers;
  auto prior = original.headers();
  if (prior)
    for (auto& e : prior->entries)
      if (!broker_death_header(e.key) && (!only_ours || warren_header(e.key) || trace_header(e.key)))
        headers.entries.push_back(e);
  // The first copy keeps who published the original; a copy of a copy already has it.
  if (const auto user = original.properties().user_id; user && !(prior && prior->find(original_user_id_header)))
    headers.set(std::string(original_user_id_header), std::string(*user));
  for (auto& e : add.entries)
    if (!only_ours || warren_header(e.key)) headers.set(e.key, e.value);
  return headers;
}

client::Properties WorkQueue::republished_properties(const client::Message& original) {
  client::Properties properties = original.properties();
  properties.expiration.reset();
  properties.user_id.reset();
  properties.delivery_mode = client::persistent;
  properties.headers.reset();
  return properties;
}

bool WorkQueue::fits(const client::Message& original, const client::FieldTable& add, bool with_error) const {
  auto headers = republished_headers(original, add, false);
  if (with_error) headers.set(std::string(error_header), std::string());
  client::Properties properties = republished_properties(original);
  properties.headers = wire::TableRef(headers);
  auto size = wire::content_header_size(properties);
  if (!size) return false;
  const auto frame_max = layer_->frame_max_bytes();
  constexpr std::size_t frame_overhead = 8;  // type, channel, size, frame-end
  return frame_max == 0 || *size + frame_overhead <= frame_max;
}

void WorkQueue::republish(const client::Message& original, std::string routing_key, client::FieldTable add,
                          std::string_view error, bool only_ours, client::Callback<void> done) {
  auto headers = republished_headers(original, add, only_ours);
  client::Properties properties = republished_properties(original);
  if (!error.empty()) {
    headers.set(std::string(error_header), std::string());
    properties.headers = wire::TableRef(headers);
    headers.set(std::string(error_header), cut_text(error, error_budget(properties, layer_->frame_max_bytes())));
  }
  properties.headers = wire::TableRef(headers);
  // Copied whole (its strings are views into `original`): the publish may start after a
  // channel is opened, when the caller's message has moved on.
  const std::string exchange = layer_->direct_exchange();
  auto publish = std::make_shared<client::OwnedPublish>(
      client::Publish{.exchange = exchange, .routing_key = routing_key, .mandatory = true, .properties = properties},
      client::as_bytes(original.body_text()));
  if (!publish->status()) return done(publish->status().error());
  layer_->control_channel([publish, done](Result<client::Channel> ch) {
    if (!ch) return done(ch.error());
    ch->publish(publish->publish(), publish->body(), [done](Result<engine::PublishOutcome> r) {
      if (!r) return done(r.error());
      done(Result<void>());
    });
  });
}

void WorkQueue::consume(WorkerOptions options, std::function<void(WorkItem)> on_item,
                        client::Callback<std::shared_ptr<Subscription>> done) {
  if (options.prefetch == 0) return done(make_error(errc::invalid_argument, "prefetch must be at least 1"));
  std::weak_ptr<WorkQueue> weak = weak_from_this();
  // First the retry levels (this worker's backoff may name levels no put declared), on the
  // control channel: a level that cannot be declared now (its node is down) is reported, not
  // fatal; a retry into it fails unconfirmed and leaves the message in the work queue.
  declare([weak, options, on_item, done](Result<void> declared) {
    auto self = weak.lock();
    if (!self) return done(make_error(errc::invalid_argument, "the work queue is gone"));
    if (!declared) self->layer_->report({.what = "retry-levels", .subject = self->queue_, .cause = declared.error()});
    auto holder = std::make_shared<std::shared_ptr<Subscription>>();
    *holder = Subscription::start(
        self->layer_,
        {.queue = self->queue_,
         .prefetch = options.prefetch,
         .setup = [weak](const client::Channel& ch, client::Callback<void> d) {
           auto self = weak.lock();
           if (!self) return d(make_error(errc::invalid_argument, "the work queue is gone"));
           // Only what a worker cannot do without: the retry levels are classic queues, and a
           // declare of one whose node is down is a 404 that would close this channel and
           // keep the worker from a quorum queue that is still there.
           self->declare_on(ch, std::move(d), false);
         },
         .on_delivery = [weak, on_item](const client::Delivery& d) {
           if (auto self = weak.lock()) on_item(WorkItem(self, d.take()));
         }},
        [holder, done](Result<void> r) {
          auto s = std::move(*holder);
          if (!r) return done(r.error());
          done(std::move(s));
        });
  });
}

}  // namespace warren::messaging

#include "warren/client/consumer.hpp"

#include "channel_core.hpp"

namespace warren::client {

namespace detail {

namespace {
constexpr std::size_t default_buffer = 250;  // the engine's default prefetch

bool names_stream_offset(const Arguments& arguments) { return arguments.contains("x-stream-offset"); }
}  // namespace

Error ChannelCore::gone() const {
  if (cause) return *cause;
  return make_error(errc::connection_closed, "channel " + std::to_string(id) + " belonged to a connection that is gone");
}

ConsumerCore::ConsumerCore(std::shared_ptr<ChannelCore> ch, const ConsumeOptions& options,
                           std::function<void(const Delivery&)> deliver_fn)
    : channel(std::move(ch)),
      tag(options.tag),
      manual_ack(!options.auto_ack),
      stream(options.stream || names_stream_offset(options.arguments)),
      bounded(!options.auto_ack && options.prefetch != 0),
      on_delivery(std::move(deliver_fn)),
      limit_(options.prefetch && *options.prefetch != 0 ? *options.prefetch : default_buffer) {
  if (!on_delivery) {
    ring_.resize(limit_);
    pool_ = std::make_shared<MessagePool>(limit_ + 8);
  }
}

void ConsumerCore::deliver(const engine::Message& m) {
  if (on_delivery) {
    on_delivery(Delivery(m, channel));
    return;
  }
  if (ended_) return;  // a late delivery of a subscription already over: the engine handed it back
  if (count_ == ring_.size()) {
    // Only a subscription the prefetch does not bound gets here: keep the message (never
    // lose it) and stop reading until the buffer drains.
    std::vector<Message> bigger(ring_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_ = std::move(bigger);
    head_ = 0;
  }
  ring_[(head_ + count_) % ring_.size()].assign(m, channel, pool_);
  ++count_;
  // A bounded subscription is full at its prefetch and the broker waits for acks: reading on
  // would only let the heartbeats and the other channels through. Only past the bound (a
  // qos of the channel's own) or without one does the buffer stop the connection's reading.
  if (count_ > limit_ || (!bounded && count_ == limit_)) hold(true);
  drain();
}

Message ConsumerCore::pop() {
  Message m = std::move(ring_[head_]);
  head_ = (head_ + 1) % ring_.size();
  --count_;
  if (count_ < limit_ / 2 + 1) hold(false);  // resume well below the limit, not at it
  return m;
}

void ConsumerCore::hold(bool on) {
  if (holding_ == on) return;
  holding_ = on;
  if (auto c = channel->connection.lock()) c->hold_input(on ? 1 : -1);
}

void ConsumerCore::drain() {
  if (draining_) return;  // a receive inside `next`: the loop below serves it
  draining_ = true;
  auto keep = shared_from_this();
  while (waiting_ && (count_ > 0 || ended_)) {
    auto next = std::move(waiting_);
    waiting_ = nullptr;
    if (count_ > 0) next(pop());
    else next(*ended_);
  }
  draining_ = false;
}

void ConsumerCore::end(const Error* cause) {
  if (ended_) return;
  if (cause) {
    ended_ = std::make_unique<Error>(*cause);
  } else {
    // Our own cancel, confirmed: reply code 200 tells it from the broker's cancel.
    ended_ = std::make_unique<Error>(
        make_error(errc::consumer_cancelled, "consumer " + tag + " was cancelled by the application"));
    ended_->reply_code = 200;
  }
  if (cause) {
    // The channel or connection is gone (or the broker cancelled): unread deliveries cannot
    // be settled any more; the broker requeues them with the channel. Never hand them out.
    // A broker cancel leaves the channel open: hand them back now.
    // Auto-acked deliveries are the application's already: they stay readable.
    if (cause->code == make_error_code(errc::consumer_cancelled)) hand_back();
    if (manual_ack) {
      for (std::size_t i = 0; i < count_; ++i) ring_[(head_ + i) % ring_.size()] = Message{};
      count_ = 0;
      head_ = 0;
    }
  }
  hold(false);
  auto keep = shared_from_this();
  if (ended_fn_) {
    auto fn = std::move(ended_fn_);
    ended_fn_ = nullptr;
    fn(*ended_);
  }
  drain();
}

void ConsumerCore::hand_back() {
  if (count_ == 0 || !manual_ack) return;  // auto-acked: already the application's, kept readable
  auto c = channel->live();
  for (std::size_t i = 0; i < count_; ++i) {
    auto& m = ring_[(head_ + i) % ring_.size()];
    if (c && !stream) (void)c->reject(channel->id, m.delivery_tag(), true);
    m = Message{};
  }
  count_ = 0;
  head_ = 0;
}

void ConsumerCore::receive(Callback<Message> next) {
  if (!next) return;
  if (on_delivery) {
    auto d = channel->driver;
    d->post([next = std::move(next)] {
      next(make_error(errc::invalid_argument, "receive() reads a stream consumer; this one calls its on_delivery"));
    });
    return;
  }
  if (waiting_) {
    channel->driver->post([next = std::move(next)] {
      next(make_error(errc::invalid_argument, "a receive() is already waiting on this consumer"));
    });
    return;
  }
  waiting_ = std::move(next);
  drain();
}

void ConsumerCore::set_on_ended(std::function<void(const Error&)> fn) {
  if (ended_) {
    if (fn) fn(*ended_);
    return;
  }
  ended_fn_ = std::move(fn);
}

void ConsumerCore::cancel(Callback<void> done) {
  if (!done) done = [](Result<void>) {};
  auto c = channel->live();
  if (ended_ || cancelling_ || !c) {
    Result<void> r = ended_ || cancelling_ ? Result<void>() : Result<void>(channel->gone());
    channel->driver->post([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    return;
  }
  cancelling_ = true;
  // The cancel goes out first; the hand-back follows it, so no rejected message comes back
  // to this consumer (the engine hands back any delivery that raced the cancel too).
  c->cancel(channel->id, tag, [done = std::move(done)](const Error* e, const wire::Method*) {
    if (e) done(*e);
    else done(Result<void>());
  });
  hand_back();
  hold(false);
}

void ConsumerCore::cancel_quietly() {
  if (ended_ || cancelling_) return;
  cancel(nullptr);
}

}  // namespace detail

// ---- the handle

Consumer& Consumer::operator=(Consumer&& other) noexcept {
  if (this != &other) {
    if (core_) core_->cancel_quietly();
    core_ = std::move(other.core_);
  }
  return *this;
}

Consumer::~Consumer() {
  if (!core_) return;
  if (core_->channel->on_loop()) {
    core_->cancel_quietly();
  } else {
    core_->channel->driver->post([core = core_] { core->cancel_quietly(); });
  }
}

const std::string& Consumer::tag() const {
  static const std::string none;
  return core_ ? core_->tag : none;
}
bool Consumer::active() const noexcept { return core_ && core_->active(); }
std::size_t Consumer::buffered() const noexcept { return core_ ? core_->buffered() : 0; }

void Consumer::receive(Callback<Message> next) const {
  if (!core_) {
    if (next) next(make_error(errc::invalid_argument, "an empty consumer"));
    return;
  }
  core_->receive(std::move(next));
}

void Consumer::on_ended(std::function<void(const Error&)> fn) const {
  if (core_) core_->set_on_ended(std::move(fn));
}

void Consumer::cancel(Callback<void> done) const {
  if (!core_) {
    if (done) done(make_error(errc::invalid_argument, "an empty consumer"));
    return;
  }
  core_->cancel(std::move(done));
}

}  // namespace warren::client

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
      on_delivery(std::move(deliver_fn)) {
  if (!on_delivery)
    buffer_ = std::make_unique<ConsumerBuffer>(options.prefetch && *options.prefetch != 0 ? *options.prefetch
                                                                                          : default_buffer);
}

ConsumerBuffer::ConsumerBuffer(std::size_t limit_messages)
    : limit(limit_messages), ring(limit_messages), pool(std::make_shared<MessagePool>(limit_messages + 8)) {}

void ConsumerCore::deliver(const engine::Message& m) {
  if (on_delivery) {
    on_delivery(Delivery(m, channel));
    return;
  }
  if (ended_) return;  // a late delivery of a subscription already over: the engine handed it back
  ConsumerBuffer& b = *buffer_;
  if (b.count == b.ring.size()) {
    // Only a subscription the prefetch does not bound gets here: keep the message (never
    // lose it) and stop reading until the buffer drains.
    std::vector<Message> bigger(b.ring.size() * 2);
    for (std::size_t i = 0; i < b.count; ++i) bigger[i] = std::move(b.unread(i));
    b.ring = std::move(bigger);
    b.head = 0;
  }
  b.unread(b.count).assign(m, channel, b.pool);
  ++b.count;
  // A bounded subscription is full at its prefetch and the broker waits for acks: reading on
  // would only let the heartbeats and the other channels through. Only past the bound (a
  // qos of the channel's own) or without one does the buffer stop the connection's reading.
  if (b.count > b.limit || (!bounded && b.count == b.limit)) hold(true);
  drain();
}

Message ConsumerCore::pop() {
  ConsumerBuffer& b = *buffer_;
  Message m = std::move(b.unread(0));
  b.head = (b.head + 1) % b.ring.size();
  --b.count;
  if (b.count < b.limit / 2 + 1) hold(false);  // resume well below the limit, not at it
  return m;
}

void ConsumerCore::hold(bool on) {
  if (!buffer_ || buffer_->holding == on) return;  // push mode never holds
  buffer_->holding = on;
  if (auto c = channel->connection.lock()) c->hold_input(on ? 1 : -1);
}

void ConsumerCore::drain() {
  if (!buffer_ || buffer_->draining) return;  // a receive inside `next`: the loop below serves it
  ConsumerBuffer& b = *buffer_;
  b.draining = true;
  auto keep = shared_from_this();
  while (b.waiting && (b.count > 0 || ended_)) {
    auto next = std::move(b.waiting);
    b.waiting = nullptr;
    if (b.count > 0) next(pop());
    else next(*ended_);
  }
  b.draining = false;
}

void ConsumerCore::clear_buffer() noexcept {
  if (!buffer_) return;
  ConsumerBuffer& b = *buffer_;
  for (std::size_t i = 0; i < b.count; ++i) b.unread(i) = Message{};
  b.count = 0;
  b.head = 0;
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
    if (manual_ack) clear_buffer();
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
  if (buffered() == 0 || !manual_ack) return;  // auto-acked: already the application's, kept readable
  ConsumerBuffer& b = *buffer_;
  if (auto c = channel->live(); c && !stream)
    for (std::size_t i = 0; i < b.count; ++i) (void)c->reject(channel->id, b.unread(i).delivery_tag(), true);
  clear_buffer();
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
  if (buffer_->waiting) {
    channel->driver->post([next = std::move(next)] {
      next(make_error(errc::invalid_argument, "a receive() is already waiting on this consumer"));
    });
    return;
  }
  buffer_->waiting = std::move(next);
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

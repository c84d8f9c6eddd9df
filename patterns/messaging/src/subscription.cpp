#include "warren/messaging/subscription.hpp"

namespace warren::messaging {

std::shared_ptr<Subscription> Subscription::start(std::shared_ptr<Messaging> layer, SubscriptionSpec spec,
                                                  client::Callback<void> ready) {
  std::shared_ptr<Subscription> s(new Subscription(layer, std::move(spec), std::move(ready)));
  layer->track(s);
  s->subscribe();
  return s;
}

Subscription::Subscription(std::shared_ptr<Messaging> layer, SubscriptionSpec spec, client::Callback<void> ready)
    : layer_(layer), driver_(layer->driver()), spec_(std::move(spec)), ready_(std::move(ready)), random_(layer->draw_seed()) {}

Subscription::~Subscription() {
  if (timer_) timer_->cancel();
  if (channel_.is_open()) channel_.close(nullptr);
}

void Subscription::subscribe() {
  auto layer = layer_.lock();
  if (!layer || over_) return;
  std::weak_ptr<Subscription> weak = weak_from_this();
  auto on_channel = [weak](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self || self->over_) {
      // Cancelled or dropped while the channel was on its way: it is nobody's, so it closes.
      if (ch && !(self && self->channel_.is_open() && self->channel_.id() == ch->id())) ch->close(nullptr);
      return;
    }
    if (!ch) return self->subscribed(ch.error());
    self->channel_ = *ch;
    self->spec_.setup(*ch, [weak, ch = *ch](Result<void> r) {
      auto self = weak.lock();
      if (!self || self->over_) return;
      if (!r) return self->subscribed(r);
      const client::FieldTable arguments = self->spec_.arguments ? self->spec_.arguments() : client::FieldTable{};
      const client::ConsumeOptions options{.queue = self->spec_.queue, .prefetch = self->spec_.prefetch,
                                           .arguments = arguments, .stream = self->spec_.stream};
      ch.consume(options,
                 [weak](const client::Delivery& d) {
                   auto self = weak.lock();
                   if (self && !self->over_) return self->spec_.on_delivery(d);
                   // Sent before our basic.cancel reached the broker: back to the queue at once
                   // rather than held until the channel closes (a stream's are only ever acked).
                   if (self && self->stopped_ && !self->spec_.stream) (void)d.nack({.requeue = true});
                 },
                 [weak](Result<client::Consumer> c) {
                   auto self = weak.lock();
                   if (!self || self->over_) return;
                   if (!c) return self->subscribed(c.error());
                   self->consumer_ = std::move(*c);
                   self->consumer_.on_ended([weak](const Error& cause) {
                     if (auto self = weak.lock()) self->ended(cause);
                   });
                   self->subscribed(Result<void>());
                 });
    });
  };
  // A channel the broker only cancelled our consumer on is still good; a closed one is not.
  if (channel_.is_open()) return on_channel(channel_);
  layer->consumer_channel(on_channel);
}

void Subscription::subscribed(Result<void> r) {
  if (r) {
    consuming_ = true;
    failures_ = 0;
    if (reported_) {
      reported_ = false;
      ++resubscribed_;
      if (auto layer = layer_.lock())
        layer->report({.what = "consumer.recovered", .subject = spec_.queue, .cause = Error{}});
    }
    if (auto ready = std::move(ready_)) {
      ready_ = nullptr;
      ready(Result<void>());
    }
    return;
  }
  if (auto ready = std::move(ready_)) {  // the first setup failed: the caller's to fix
    ready_ = nullptr;
    over_ = true;
    if (channel_.is_open()) channel_.close(nullptr);
    return ready(r.error());
  }
  ended(r.error());
}

void Subscription::ended(const Error& cause) {
  if (over_) return;
  consuming_ = false;
  auto layer = layer_.lock();
  if (!layer || layer->closed()) return;
  // A plain connection that closed will not come back; a Session's will, and the next
  // subscribe waits for it (Session::open_channel).
  if (!layer->connection_open() && !layer->recovers()) return layer->connection_lost(cause);
  if (!reported_) {  // once per episode, however many tries it takes
    reported_ = true;
    layer->report({.what = "consumer.closed", .subject = spec_.queue, .cause = cause});
  }
  const auto delay = retry_delay(spec_.resubscribe, ++failures_, std::uniform_real_distribution<double>(0, 1)(random_));
  std::weak_ptr<Subscription> weak = weak_from_this();
  if (!timer_)
    timer_ = layer->driver().timer([weak] {
      if (auto self = weak.lock()) self->subscribe();
    });
  timer_->arm(layer->driver().now() + delay);
}

void Subscription::end(const Error& cause) {
  if (over_) return;
  over_ = true;
  consuming_ = false;
  if (timer_) timer_->cancel();
  if (auto ready = std::move(ready_)) {
    ready_ = nullptr;
    ready(cause);
  }
  if (auto on_over = std::move(spec_.on_over)) {
    spec_.on_over = nullptr;
    on_over(cause);
  }
}

void Subscription::cancel(client::Callback<void> done) {
  if (stopped_ && channel_.is_open()) {  // stop_consuming() kept the channel for the settles
    stopped_ = false;
    auto ch = channel_;
    return ch.close([done](Result<void>) {
      if (done) done(Result<void>());
    });
  }
  if (over_) {
    if (auto layer = layer_.lock()) return layer->driver().post([done] { if (done) done(Result<void>()); });
    if (done) done(Result<void>());
    return;
  }
  end(make_error(errc::consumer_cancelled, "cancelled"));
  auto ch = channel_;
  consumer_.cancel([ch, done](Result<void>) {
    if (!ch.is_open()) {
      if (done) done(Result<void>());
      return;
    }
    ch.close([done](Result<void>) {
      if (done) done(Result<void>());
    });
  });
}

void Subscription::stop_consuming(client::Callback<void> done) {
  if (over_) {
    if (auto layer = layer_.lock()) return layer->driver().post([done] { if (done) done(Result<void>()); });
    if (done) done(Result<void>());
    return;
  }
  end(make_error(errc::consumer_cancelled, "stopped consuming"));
  stopped_ = true;
  consumer_.cancel([done](Result<void>) {
    if (done) done(Result<void>());
  });
}

}  // namespace warren::messaging

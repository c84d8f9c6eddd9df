// Every channel verb on one path: check the handle's channel is still the live one, convert
// the named options to the wire method, and convert the broker's reply to the typed result.
#include "warren/client/channel.hpp"

#include "channel_core.hpp"
#include "publish_wire.hpp"
#include "traced_properties.hpp"

namespace warren::client {

using detail::ChannelCore;

namespace {

// A result that must not be delivered inside the caller's call.
template <class T>
void later(const std::shared_ptr<ChannelCore>& core, Callback<T> done, Error e) {
  if (!done) return;
  core->driver->post([done = std::move(done), e = std::move(e)]() mutable { done(std::move(e)); });
}

// The handle's connection while its channel is open; otherwise `done` is told why (an empty
// handle at once: it has no loop to defer to) and nothing is returned.
template <class T>
std::shared_ptr<Connection> live_or_fail(const std::shared_ptr<ChannelCore>& core, Callback<T>& done) {
  if (!core) {
    if (done) done(make_error(errc::invalid_argument, "an empty channel handle"));
    return nullptr;
  }
  auto c = core->live();
  if (!c) later<T>(core, std::move(done), core->gone());
  return c;
}

// The one request path: `send` issues the wire request on the live connection; `convert`
// turns the broker's reply method into the typed result.
template <class T, class Send, class Convert>
void call(const std::shared_ptr<ChannelCore>& core, Callback<T> done, Send send, Convert convert) {
  auto c = live_or_fail(core, done);
  if (!c) return;
  send(*c, core->id, [done = std::move(done), convert](const Error* e, const wire::Method* reply) {
    if (!done) return;
    if (e) {
      done(*e);
      return;
    }
    done(convert(reply));
  });
}

Result<void> nothing(const wire::Method*) { return {}; }

}  // namespace

engine::ChannelId Channel::id() const noexcept { return core_ ? core_->id : 0; }
Driver* Channel::driver() const noexcept { return core_ ? core_->driver : nullptr; }
bool Channel::is_open() const noexcept { return core_ && core_->open.load() && !core_->connection.expired(); }
std::optional<Error> Channel::closed_cause() const {
  if (!core_) return make_error(errc::invalid_argument, "an empty channel handle");
  if (is_open()) return std::nullopt;
  return core_->gone();
}

void Channel::exchange_declare(ExchangeDeclareOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::ExchangeDeclare{.exchange = o.name, .type = o.type, .passive = o.passive,
                                                 .durable = o.durable, .auto_delete = o.auto_delete,
                                                 .internal = o.internal, .arguments = o.arguments.to_table()},
                       std::move(answer));
  }, nothing);
}

void Channel::exchange_delete(ExchangeDeleteOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::ExchangeDelete{.exchange = o.name, .if_unused = o.if_unused}, std::move(answer));
  }, nothing);
}

void Channel::exchange_bind(ExchangeBindOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::ExchangeBind{.destination = o.destination, .source = o.source,
                                           .routing_key = o.routing_key, .arguments = o.arguments.to_table()},
                    std::move(answer));
  }, nothing);
}

void Channel::exchange_unbind(ExchangeBindOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::ExchangeUnbind{.destination = o.destination, .source = o.source,
                                               .routing_key = o.routing_key, .arguments = o.arguments.to_table()},
                      std::move(answer));
  }, nothing);
}

void Channel::queue_declare(QueueDeclareOptions o, Callback<QueueDeclared> done) const {
  call<QueueDeclared>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::QueueDeclare{.queue = o.name, .passive = o.passive, .durable = o.durable,
                                           .exclusive = o.exclusive, .auto_delete = o.auto_delete,
                                           .arguments = o.arguments.to_table()},
                    std::move(answer));
  }, [](const wire::Method* reply) -> Result<QueueDeclared> {
    const auto* ok = reply ? std::get_if<wire::QueueDeclareOk>(reply) : nullptr;
    if (!ok) return make_error(errc::protocol_error, "queue.declare was not answered by declare-ok");
    return QueueDeclared{std::string(ok->queue), ok->message_count, ok->consumer_count};
  });
}

void Channel::queue_bind(QueueBindOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::QueueBind{.queue = o.queue, .exchange = o.exchange, .routing_key = o.routing_key,
                                     .arguments = o.arguments.to_table()},
                 std::move(answer));
  }, nothing);
}

void Channel::queue_unbind(QueueBindOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::QueueUnbind{.queue = o.queue, .exchange = o.exchange, .routing_key = o.routing_key,
                                         .arguments = o.arguments.to_table()},
                   std::move(answer));
  }, nothing);
}

void Channel::queue_purge(QueuePurgeOptions o, Callback<std::uint32_t> done) const {
  call<std::uint32_t>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::QueuePurge{.queue = o.queue}, std::move(answer));
  }, [](const wire::Method* reply) -> Result<std::uint32_t> {
    const auto* ok = reply ? std::get_if<wire::QueuePurgeOk>(reply) : nullptr;
    return ok ? ok->message_count : 0u;
  });
}

void Channel::queue_delete(QueueDeleteOptions o, Callback<std::uint32_t> done) const {
  call<std::uint32_t>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::QueueDelete{.queue = o.queue, .if_unused = o.if_unused, .if_empty = o.if_empty},
                   std::move(answer));
  }, [](const wire::Method* reply) -> Result<std::uint32_t> {
    const auto* ok = reply ? std::get_if<wire::QueueDeleteOk>(reply) : nullptr;
    return ok ? ok->message_count : 0u;
  });
}

void Channel::qos(QosOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::BasicQos{.prefetch_size = o.prefetch_size, .prefetch_count = o.prefetch_count,
                                   .global = o.global},
                std::move(answer));
  }, nothing);
}

void Channel::flow(FlowOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::ChannelFlow{.active = o.active}, std::move(answer));
  }, nothing);
}

void Channel::recover(RecoverOptions o, Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.request(id, wire::BasicRecover{.requeue = o.requeue}, std::move(answer));
  }, nothing);
}

void Channel::confirm_select(Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.confirm_select(id, std::move(answer));
  }, nothing);
}

void Channel::get(GetOptions o, Callback<std::optional<Message>> done) const {
  auto c = live_or_fail(core_, done);
  if (!c) return;
  c->get(core_->id, wire::BasicGet{.queue = o.queue, .no_ack = o.auto_ack},
         [core = core_, done = std::move(done)](const Error* e, const engine::Message* m, std::uint32_t left) {
           if (!done) return;
           if (e) return done(*e);
           if (!m) return done(std::optional<Message>{});
           Message owned;
           owned.assign(*m, core, nullptr, left);
           done(std::optional<Message>(std::move(owned)));
         });
}

namespace {

Result<engine::PublishOutcome> outcome_result(engine::PublishOutcome o, const Error& cause) {
  switch (o) {
    case engine::PublishOutcome::written:
    case engine::PublishOutcome::confirmed:
      return o;
    case engine::PublishOutcome::nacked: {
      Error e = cause;
      e.code = make_error_code(errc::nacked);
      if (e.detail.empty()) e.detail = "the broker nacked the message";
      return e;
    }
    case engine::PublishOutcome::returned: {
      Error e = cause;
      e.code = make_error_code(errc::unroutable);
      return e;
    }
    case engine::PublishOutcome::timed_out:
    case engine::PublishOutcome::failed:
      return cause;
  }
  return cause;
}

// Out of line, so that Channel::publish is tests and a call and sets up no frame of its own.
WARREN_NOINLINE Result<engine::PublishId> unpublishable(const std::shared_ptr<detail::ChannelCore>& core) {
  if (!core) return make_error(errc::invalid_argument, "an empty channel handle");
  return core->gone();
}

}  // namespace

void Channel::publish(const Publish& p, Body body, Callback<engine::PublishOutcome> done) const {
  auto c = live_or_fail(core_, done);
  if (!c) return;
  Connection::Settled settled;
  if (done)
    settled = [done = std::move(done)](engine::PublishOutcome o, const Error& cause) { done(outcome_result(o, cause)); };
  const engine::PublishOptions options{.timeout = p.timeout};
  if (!c->traces(p)) return c->publish(core_->id, detail::to_wire(p), p.properties, body, std::move(settled), options);
  const detail::TracedProperties properties(p, c->send_trace(p));
  c->publish(core_->id, detail::to_wire(p), properties.get(), body, std::move(settled), options);
}

Result<engine::PublishId> Channel::publish(const Publish& p, Body body) const {
  if (core_) [[likely]]
    if (Connection* const c = core_->live_here()) [[likely]]
      return c->publish_of_handle(core_->id, p, body);
  return unpublishable(core_);
}

void Channel::consume(ConsumeOptions o, std::function<void(const Delivery&)> on_delivery, Callback<Consumer> done) const {
  if (!on_delivery && core_) {
    later<Consumer>(core_, std::move(done),
                    make_error(errc::invalid_argument, "consume needs an on_delivery callback (or use the stream form)"));
    return;
  }
  subscribe(std::move(o), std::move(on_delivery), std::move(done));
}

void Channel::consume(ConsumeOptions o, Callback<Consumer> done) const {
  subscribe(std::move(o), nullptr, std::move(done));
}

// Both forms: without on_delivery the consumer buffers (the stream form).
void Channel::subscribe(ConsumeOptions o, std::function<void(const Delivery&)> on_delivery, Callback<Consumer> done) const {
  auto c = live_or_fail(core_, done);
  if (!c) return;
  auto consumer = std::make_shared<detail::ConsumerCore>(core_, o, std::move(on_delivery));
  c->subscribe(core_->id, o, consumer, std::move(done));
}

void Channel::close(Callback<void> done) const {
  call<void>(core_, std::move(done), [&](Connection& c, engine::ChannelId id, auto answer) {
    c.close_channel(id, std::move(answer));
  }, nothing);
}

Result<void> Channel::set_timeout(engine::Duration timeout) const {
  if (!core_) return make_error(errc::invalid_argument, "an empty channel handle");
  auto c = core_->live();
  if (!c) return core_->gone();
  return c->set_channel_timeout(core_->id, timeout);
}

Result<engine::Duration> Channel::timeout() const {
  if (!core_) return make_error(errc::invalid_argument, "an empty channel handle");
  auto c = core_->live();
  if (!c) return core_->gone();
  return c->channel_timeout(core_->id);
}

}  // namespace warren::client

#include "warren/client/rpc.hpp"

#include <charconv>
#include <cstdio>
#include <random>

#include "channel_core.hpp"

namespace warren::client {
namespace {

// Unique enough that two clients' ids never meet on one reply-to channel by chance, and
// never predictable from another process's ids.
std::string random_prefix() {
  std::random_device device;
  std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device();
  char text[20];
  std::snprintf(text, sizeof text, "%016llx.", static_cast<unsigned long long>(bits));
  return text;
}

}  // namespace

RpcClient::RpcClient(Channel channel, Callback<void> ready)
    : driver_(*channel.driver()), channel_(std::move(channel)), id_prefix_(random_prefix()), on_ready_(std::move(ready)) {}

// Dropped: the calls in flight and an unreported start are still told, from the loop (this
// may run inside one of the application's callbacks). The channel is the client's: it is
// closed, so a call's publish that still waits in the client (behind connection.blocked)
// never reaches the broker after the reply consumer is gone (RabbitMQ would answer 406).
RpcClient::~RpcClient() {
  channel_.close(nullptr);
  auto ready = std::move(on_ready_);
  std::vector<Callback<Message>> calls;
  for (auto& [id, call] : calls_) calls.push_back(std::move(call.done));
  if (!ready && calls.empty()) return;
  driver_.post([ready = std::move(ready), calls = std::move(calls)]() mutable {
    const Error cause = make_error(errc::channel_closed, "the RPC client was destroyed");
    if (ready) ready(cause);
    for (auto& done : calls) done(cause);
  });
}

std::shared_ptr<RpcClient> RpcClient::start(Channel channel, Callback<void> ready) {
  if (!ready) ready = [](Result<void>) {};
  if (!channel.driver()) {
    ready(make_error(errc::invalid_argument, "RpcClient::start needs an open channel"));
    return nullptr;
  }
  std::shared_ptr<RpcClient> self(new RpcClient(std::move(channel), std::move(ready)));
  std::weak_ptr<RpcClient> weak = self;
  self->timer_ = self->driver_.timer([weak] {
    if (auto s = weak.lock()) s->on_timer();
  });
  self->channel_.confirm_select([weak](Result<void> r) {
    auto s = weak.lock();
    if (!s) return;
    if (!r) return s->on_started(r.error());
    // auto_ack is what direct reply-to requires: the broker refuses an acking consumer.
    s->channel_.consume({.queue = std::string(direct_reply_to), .auto_ack = true},
                        [weak](const Delivery& m) {
                          if (auto s = weak.lock()) s->on_reply(m);
                        },
                        [weak](Result<Consumer> c) {
                          auto s = weak.lock();
                          if (!s) return;
                          if (!c) return s->on_started(c.error());
                          s->replies_ = std::move(*c);
                          s->replies_.on_ended([weak](const Error& cause) {
                            if (auto s = weak.lock()) s->on_ended(cause);
                          });
                          s->on_started(Result<void>());
                        });
  });
  return self;
}

// The reply consumer is in place, or will never be: the calls made meanwhile are sent, or
// fail with the cause; then `ready` is told.
void RpcClient::on_started(Result<void> outcome) {
  auto self = shared_from_this();  // a callback below may drop the application's reference
  auto ready = std::move(on_ready_);
  on_ready_ = nullptr;
  if (!outcome) {
    on_ended(outcome.error());
  } else {
    ready_ = true;
    auto ids = std::move(unsent_);
    unsent_.clear();
    for (const auto id : ids) {
      auto it = calls_.find(id);
      if (it == calls_.end() || !it->second.unsent) continue;  // timed out while it waited
      OwnedPublish unsent = std::move(*it->second.unsent);
      it->second.unsent.reset();
      send(id, unsent.publish(), unsent.body());
    }
  }
  if (ready) ready(std::move(outcome));
}

void RpcClient::call(const RpcCall& call, Body body, Callback<Message> done) {
  if (!done) done = [](Result<Message>) {};
  if (gone_) {
    driver_.post([done = std::move(done), cause = *gone_] { done(cause); });
    return;
  }
  const std::uint64_t id = ++next_id_;
  const std::string correlation_id = id_prefix_ + std::to_string(id);
  Publish p{.exchange = call.exchange, .routing_key = call.routing_key, .mandatory = true, .properties = call.properties,
            .trace = call.trace};
  p.properties.reply_to = direct_reply_to;
  p.properties.correlation_id = correlation_id;
  std::optional<OwnedPublish> unsent;
  if (!ready_) {
    unsent.emplace(p, body);
    if (!unsent->status().ok()) {
      driver_.post([done = std::move(done), cause = unsent->status().error()] { done(cause); });
      return;
    }
    unsent_.push_back(id);
  }
  // Unset: the channel's (a closed channel fails the call at once anyway, through gone_).
  engine::Duration timeout = engine::ConnectionOptions{}.request_timeout;
  if (call.timeout) timeout = *call.timeout;
  else if (auto t = channel_.timeout(); t.ok()) timeout = *t;
  auto deadline = deadlines_.emplace(driver_.now() + timeout, id);
  calls_.emplace(id, Call{std::move(done), deadline, std::move(unsent), timeout});
  rearm();
  if (ready_) send(id, p, body);
}

void RpcClient::send(std::uint64_t id, const Publish& publish, std::span<const std::byte> body) {
  std::weak_ptr<RpcClient> weak = weak_from_this();
  channel_.publish(publish, body, [weak, id](Result<engine::PublishOutcome> outcome) {
    auto s = weak.lock();
    if (!s || outcome.ok()) return;
    s->finish(id, std::move(outcome).error());
  });
}

void RpcClient::on_reply(const Delivery& reply) {
  const auto correlation_id = reply.properties().correlation_id;
  const auto id = correlation_id ? call_of(*correlation_id) : std::nullopt;
  if (!id || !calls_.contains(*id)) {
    ++dropped_;
    return;
  }
  finish(*id, reply.take());
}

std::optional<std::uint64_t> RpcClient::call_of(std::string_view correlation_id) const {
  if (!correlation_id.starts_with(id_prefix_)) return std::nullopt;
  const auto digits = correlation_id.substr(id_prefix_.size());
  std::uint64_t id = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return id;
}

void RpcClient::finish(std::uint64_t id, Result<Message> outcome) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;  // already answered, timed out or failed
  auto done = std::move(it->second.done);
  deadlines_.erase(it->second.deadline);
  calls_.erase(it);
  rearm();
  done(std::move(outcome));
}

void RpcClient::on_ended(const Error& cause) {
  if (!gone_) gone_ = cause;
  std::vector<Callback<Message>> failing;
  for (auto& [id, call] : calls_) failing.push_back(std::move(call.done));
  calls_.clear();
  unsent_.clear();
  deadlines_.clear();
  rearm();
  for (auto& done : failing) done(*gone_);
}

void RpcClient::on_timer() {
  const auto now = driver_.now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const std::uint64_t id = deadlines_.begin()->second;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(calls_.at(id).timeout).count();
    finish(id, make_error(errc::timeout, "no reply to call " + id_prefix_ + std::to_string(id) + " within " + std::to_string(ms) + " ms"));
  }
  rearm();
}

void RpcClient::rearm() {
  if (deadlines_.empty()) timer_->cancel();
  else timer_->arm(deadlines_.begin()->first);
}

// ---- server

RpcServer::RpcServer(Channel channel, Handler handler) : channel_(std::move(channel)), handler_(std::move(handler)) {}

std::shared_ptr<RpcServer> RpcServer::start(Channel channel, std::string queue, Handler handler, Callback<void> ready) {
  if (!ready) ready = [](Result<void>) {};
  std::shared_ptr<RpcServer> self(new RpcServer(std::move(channel), std::move(handler)));
  std::weak_ptr<RpcServer> weak = self;
  self->channel_.consume({.queue = std::move(queue)},
                         [weak](const Delivery& m) {
                           if (auto s = weak.lock()) s->on_request(m);
                         },
                         [weak, ready = std::move(ready)](Result<Consumer> c) {
                           auto s = weak.lock();
                           // Dropped meanwhile: the consumer (if it started) is dropped with
                           // this handle, and ready still runs once.
                           if (!s) return ready(make_error(errc::channel_closed, "the RPC server was destroyed before it started"));
                           if (!c) return ready(c.error());
                           s->requests_ = std::move(*c);
                           s->requests_.on_ended([weak](const Error& cause) {
                             // Only a dropped server cancels its own consumer, and then it is gone.
                             auto s = weak.lock();
                             if (s && s->on_ended) s->on_ended(cause);
                           });
                           ready(Result<void>());
                         });
  return self;
}

void RpcServer::on_request(const Delivery& request) {
  const auto reply_to = request.properties().reply_to;
  if (!reply_to || reply_to->empty()) {
    ++dropped_;
    (void)request.ack();
    return;
  }
  std::string answer = handler_(request);
  // The reply continues the request's trace in a span of the server's (a child, not a copy).
  const auto trace = request.trace();
  // The ack follows the answer on the same channel, so the broker sees the answer first.
  (void)channel_.publish({.routing_key = *reply_to,
                          .properties = {.correlation_id = request.properties().correlation_id},
                          .trace = trace ? trace->child() : TraceContext{}},
                         as_bytes(answer));
  if (request.settles()) (void)request.ack();  // not what the handler settled or took
  ++answered_;
}

}  // namespace warren::client

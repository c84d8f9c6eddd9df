#include "warren/client/rpc.hpp"

#include <cstdio>
#include <random>

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

RpcClient::RpcClient(Driver& driver, std::shared_ptr<Connection> connection, engine::ChannelId channel)
    : driver_(driver), connection_(std::move(connection)), channel_(channel), id_prefix_(random_prefix()) {}

std::shared_ptr<RpcClient> RpcClient::start(Driver& driver, std::shared_ptr<Connection> connection,
                                            engine::ChannelId channel, Connection::Done ready) {
  std::shared_ptr<RpcClient> self(new RpcClient(driver, std::move(connection), channel));
  std::weak_ptr<RpcClient> weak = self;
  self->timer_ = driver.timer([weak] {
    if (auto s = weak.lock()) s->on_timer();
  });
  auto shared_ready = std::make_shared<Connection::Done>(std::move(ready));
  self->connection_->confirm_select(channel, [weak, shared_ready](const Error* e, const wire::Method*) {
    auto s = weak.lock();
    if (!s) return;
    if (e) {
      s->gone_ = *e;  // later calls fail at once: there is no reply consumer
      return (*shared_ready)(e);
    }
    // no_ack is what direct reply-to requires: the broker refuses an acking consumer.
    s->connection_->consume(
        s->channel_, wire::BasicConsume{direct_reply_to, "", false, true}, std::nullopt,
        [weak](const engine::Message& m) {
          if (auto s = weak.lock()) s->on_reply(m);
        },
        [weak](const Error* cause) {
          if (auto s = weak.lock()) s->on_ended(cause);
        },
        [weak, shared_ready](const Error* e, const wire::Method*) {
          if (auto s = weak.lock(); s && e && !s->gone_) s->gone_ = *e;
          (*shared_ready)(e);
        });
  });
  return self;
}

void RpcClient::call(std::string_view exchange, std::string_view routing_key, wire::BasicProperties properties,
                     std::span<const std::byte> body, engine::Duration timeout, Reply done) {
  if (gone_) {
    Error cause = *gone_;
    driver_.post([done = std::move(done), cause] { done(&cause, nullptr); });
    return;
  }
  std::string id = id_prefix_ + std::to_string(++next_id_);
  properties.reply_to = direct_reply_to;
  properties.correlation_id = id;
  auto deadline = deadlines_.emplace(driver_.now() + timeout, id);
  calls_.emplace(id, Call{std::move(done), deadline});
  rearm();
  std::weak_ptr<RpcClient> weak = weak_from_this();
  connection_->publish(channel_, wire::BasicPublish{exchange, routing_key, true}, properties, body,
                       [weak, id](engine::PublishOutcome outcome, const Error& cause) {
                         auto s = weak.lock();
                         if (!s || outcome == engine::PublishOutcome::confirmed) return;
                         s->finish(id, &cause, nullptr);
                       });
}

void RpcClient::on_reply(const engine::Message& reply) {
  const auto id = reply.properties ? reply.properties->correlation_id : std::nullopt;
  if (!id || !calls_.contains(std::string(*id))) {
    ++dropped_;
    return;
  }
  finish(std::string(*id), nullptr, &reply);
}

void RpcClient::finish(const std::string& id, const Error* error, const engine::Message* reply) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;  // already answered, timed out or failed
  Reply done = std::move(it->second.done);
  deadlines_.erase(it->second.deadline);
  calls_.erase(it);
  rearm();
  done(error, reply);
}

void RpcClient::on_ended(const Error* cause) {
  gone_ = cause ? *cause : make_error(errc::consumer_cancelled, "the reply consumer was cancelled");
  std::vector<Reply> failing;
  for (auto& [id, call] : calls_) failing.push_back(std::move(call.done));
  calls_.clear();
  deadlines_.clear();
  rearm();
  for (auto& done : failing) done(&*gone_, nullptr);
}

void RpcClient::on_timer() {
  const auto now = driver_.now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    std::string id = deadlines_.begin()->second;
    Error cause = make_error(errc::timeout, "no reply to call " + id);
    finish(id, &cause, nullptr);
  }
  rearm();
}

void RpcClient::rearm() {
  if (deadlines_.empty()) timer_->cancel();
  else timer_->arm(deadlines_.begin()->first);
}

// ---- server

RpcServer::RpcServer(std::shared_ptr<Connection> connection, engine::ChannelId channel, Handler handler)
    : connection_(std::move(connection)), channel_(channel), handler_(std::move(handler)) {}

std::shared_ptr<RpcServer> RpcServer::start(std::shared_ptr<Connection> connection, engine::ChannelId channel,
                                            std::string queue, Handler handler, Connection::Done ready) {
  std::shared_ptr<RpcServer> self(new RpcServer(std::move(connection), channel, std::move(handler)));
  std::weak_ptr<RpcServer> weak = self;
  self->connection_->consume(
      channel, wire::BasicConsume{queue}, std::nullopt,
      [weak](const engine::Message& m) {
        if (auto s = weak.lock()) s->on_request(m);
      },
      [weak](const Error* cause) {
        auto s = weak.lock();
        if (s && cause && s->on_ended) s->on_ended(*cause);
      },
      [ready = std::move(ready)](const Error* e, const wire::Method*) { ready(e); });
  return self;
}

void RpcServer::on_request(const engine::Message& request) {
  const auto reply_to = request.properties ? request.properties->reply_to : std::nullopt;
  if (!reply_to || reply_to->empty()) {
    ++dropped_;
    (void)connection_->ack(channel_, request.delivery_tag);
    return;
  }
  std::string answer = handler_(request);
  wire::BasicProperties properties;
  properties.correlation_id = request.properties->correlation_id;
  // The ack follows the answer on the same channel, so the broker sees the answer first.
  connection_->publish(channel_, wire::BasicPublish{"", *reply_to}, properties,
                       std::as_bytes(std::span{answer.data(), answer.size()}), nullptr);
  (void)connection_->ack(channel_, request.delivery_tag);
  ++answered_;
}

}  // namespace warren::client

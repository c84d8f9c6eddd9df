// Request/reply over RabbitMQ's direct reply-to (amq.rabbitmq.reply-to): no reply queue to
// declare, leak or clean up. The caller side owns the no-ack reply consumer on its channel
// and has it in place before start() reports ready, so no fast reply finds nobody listening.
// Replies are matched by a correlation id the client generates (a random prefix per client
// and a counter), so concurrent calls on one channel are told apart; a reply for an id not in
// flight (stray, late, duplicate) is dropped and counted. Each call has its own deadline. If
// the reply consumer ends (the broker cancels it, its channel or connection closes) every call
// in flight fails at once, and later calls fail without being sent.
//
// Requests are published mandatory on a channel in confirm mode, so a request nobody can
// receive (no such queue) fails at once with the broker's 312 NO_ROUTE instead of waiting
// out its timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "warren/client/connection.hpp"

namespace warren::client {

inline constexpr std::string_view direct_reply_to = "amq.rabbitmq.reply-to";

struct RpcCall {
  std::string_view exchange;  // empty: the default exchange, routing_key names the queue
  std::string_view routing_key;
  Properties properties;  // reply_to and correlation_id are set by the call
  engine::Duration timeout{30000};
};

class RpcClient : public std::enable_shared_from_this<RpcClient> {
 public:
  // Puts `channel` (opened by the caller, used for nothing else) in confirm mode and starts
  // the reply consumer; `ready` runs once both are in place, or with the error.
  [[nodiscard]] static std::shared_ptr<RpcClient> start(Channel channel, Callback<void> ready);

  // Sends `body` per `call` with reply_to and a fresh correlation_id, and runs `done` once:
  // with the reply (owned), or with the failure (timeout, unroutable, nacked, reply consumer
  // gone).
  void call(const RpcCall& call, std::span<const std::byte> body, Callback<Message> done);

  [[nodiscard]] std::size_t in_flight() const noexcept { return calls_.size(); }
  [[nodiscard]] std::uint64_t dropped_replies() const noexcept { return dropped_; }

 private:
  struct Call {
    Callback<Message> done;
    std::multimap<engine::Instant, std::string>::iterator deadline;
  };
  explicit RpcClient(Channel channel);
  void on_reply(const Delivery& reply);
  void on_ended(const Error& cause);
  void finish(const std::string& id, Result<Message> outcome);
  void on_timer();
  void rearm();

  Driver& driver_;
  Channel channel_;
  Consumer replies_;
  std::string id_prefix_;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::string, Call> calls_;
  std::multimap<engine::Instant, std::string> deadlines_;
  std::unique_ptr<Timer> timer_;
  std::optional<Error> gone_;  // why the reply consumer ended; calls fail with it
  std::uint64_t dropped_ = 0;
};

// The serving side: consumes `queue` on `channel` with manual acks, answers each request
// with what `handler` returns, sent to the request's reply_to with its correlation_id, and
// acks the request once the answer is written. A request without reply_to is acked and
// counted as dropped.
class RpcServer : public std::enable_shared_from_this<RpcServer> {
 public:
  using Handler = std::function<std::string(const Delivery& request)>;

  [[nodiscard]] static std::shared_ptr<RpcServer> start(Channel channel, std::string queue, Handler handler,
                                                        Callback<void> ready);
  // Runs when the subscription ends for any reason but our own cancel.
  std::function<void(const Error& cause)> on_ended;

  [[nodiscard]] std::uint64_t answered() const noexcept { return answered_; }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  RpcServer(Channel channel, Handler handler);
  void on_request(const Delivery& request);

  Channel channel_;
  Consumer requests_;
  Handler handler_;
  std::uint64_t answered_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace warren::client

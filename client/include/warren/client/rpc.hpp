// Request/reply over RabbitMQ's direct reply-to (amq.rabbitmq.reply-to): no reply queue to
// declare, leak or clean up. The caller side owns the no-ack reply consumer on its channel
// and has it in place before start() reports ready, so no fast reply finds nobody listening.
// A call made before ready waits in the client (its deadline running) and is sent once the
// consumer is in place: RabbitMQ closes the channel (406) for a publish that names
// amq.rabbitmq.reply-to from a channel not consuming it. If start fails, every call made so
// far fails with its cause at once, and later calls fail without being sent.
// Replies are matched by a correlation id the client generates (a random prefix per client
// and a counter), so concurrent calls on one channel are told apart; a reply for an id not in
// flight (stray, late, duplicate) is dropped and counted. Each call has its own deadline. If
// the reply consumer ends (the broker cancels it, its channel or connection closes) every call
// in flight fails at once, and later calls fail without being sent. Dropping the client
// fails its calls in flight (channel_closed), from the loop, and an unreported start with
// them: every callback handed in runs exactly once.
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
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/client/owned_publish.hpp"

namespace warren::client {

inline constexpr std::string_view direct_reply_to = "amq.rabbitmq.reply-to";

struct RpcCall {
  std::string_view exchange{};  // empty: the default exchange, routing_key names the queue
  std::string_view routing_key{};
  Properties properties{};  // reply_to and correlation_id are set by the call
  // The whole call's deadline. Unset: as long as any request on the client's channel may take
  // (Channel::timeout: its set_timeout, else the connection's request_timeout).
  std::optional<engine::Duration> timeout{};
  // The caller's trace context, written into the request's headers (as Publish::trace); the
  // server's reply continues it.
  TraceContext trace{};
};

class RpcClient : public std::enable_shared_from_this<RpcClient> {
 public:
  // Puts `channel` (opened by the caller, used for nothing else) in confirm mode and starts
  // the reply consumer; `ready` runs once both are in place, or with the error.
  [[nodiscard]] static std::shared_ptr<RpcClient> start(Channel channel, Callback<void> ready);

  // Sends `body` per `call` with reply_to and a fresh correlation_id, and runs `done` once:
  // with the reply (owned), or with the failure (timeout, unroutable, nacked, reply consumer
  // gone).
  void call(const RpcCall& call, Body body, Callback<Message> done);

  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  [[nodiscard]] std::size_t in_flight() const noexcept { return calls_.size(); }
  [[nodiscard]] std::uint64_t dropped_replies() const noexcept { return dropped_; }
  // The reply consumer is in place: calls are sent at once.
  [[nodiscard]] bool ready() const noexcept { return ready_; }

 private:
  struct Call {
    Callback<Message> done{};
    std::multimap<engine::Instant, std::uint64_t>::iterator deadline;
    std::optional<OwnedPublish> unsent{};  // a call made before ready, copied until it is sent
    engine::Duration timeout{};            // its deadline, for the error that says it passed
  };
  explicit RpcClient(Channel channel, Callback<void> ready);
  void on_started(Result<void> outcome);
  void send(std::uint64_t call, const Publish& publish, std::span<const std::byte> body);
  void on_reply(const Delivery& reply);
  void on_ended(const Error& cause);
  void finish(std::uint64_t call, Result<Message> outcome);
  // The call a correlation id of this client names, if it does.
  [[nodiscard]] std::optional<std::uint64_t> call_of(std::string_view correlation_id) const;
  void on_timer();
  void rearm();

  Driver& driver_;
  Channel channel_;
  Consumer replies_;
  std::string id_prefix_;
  std::uint64_t next_id_ = 0;
  // By call number (the correlation id is the prefix and the number): in call order, so
  // calls that fail together are told in the order they were made.
  std::map<std::uint64_t, Call> calls_;
  std::vector<std::uint64_t> unsent_;  // calls made before ready, in call order
  std::multimap<engine::Instant, std::uint64_t> deadlines_;
  std::unique_ptr<Timer> timer_;
  Callback<void> on_ready_;  // start's `ready`, until it has been told
  bool ready_ = false;
  std::optional<Error> gone_;  // why the reply consumer ended (or never started); calls fail with it
  std::uint64_t dropped_ = 0;
};

// The serving side: consumes `queue` on `channel` with manual acks, answers each request
// with what `handler` returns, sent to the request's reply_to with its correlation_id, and
// acks the request once the answer is written, unless the handler settled it or took it
// (message.hpp: whoever holds the settle settles it). A request without reply_to is acked and
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

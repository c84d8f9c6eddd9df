// The sans-I/O connection engine: a state machine over the codec. Bytes and time come in
// (handle_*), bytes, deadlines and events go out (pending_output, poll_timeout, poll_event),
// commands are verbs. No sockets, no threads, no clock, and it never calls out.
//
// A driver's loop: after handle_bytes, drain poll_event() until it returns nullopt,
// dispatching each event before polling the next; write pending_output() (one gathered
// write) and consume_output() what was written; re-arm a timer for poll_timeout(); call
// handle_timeout() when it fires. Feed bytes only once poll_event() has returned nullopt
// (the engine reads frames lazily, so views in events point into the bytes it was given).
// Close the socket once finished() is true.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "warren/engine/events.hpp"
#include "warren/engine/options.hpp"
#include "warren/engine/types.hpp"
#include "warren/result.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/output_queue.hpp"
#include "warren/wire/properties.hpp"

namespace warren::engine {

struct PublishOptions {
  // The publish's one deadline (wait while blocked, write, and in confirm mode the broker's
  // answer). Unset: its channel's timeout (set_channel_timeout), else request_timeout.
  std::optional<Duration> timeout{};
};

class Connection {
 public:
  Connection(ConnectionOptions options, Instant now);  // queues the protocol header
  ~Connection();
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;

  // ---- inputs
  void handle_bytes(std::span<const std::byte> bytes, Instant now);
  void handle_eof(Instant now);      // the transport lost the stream
  // The same, saying why ("read: connection reset by peer"), so the cause reaches the user.
  void handle_eof(Instant now, std::string_view why);
  void handle_timeout(Instant now);  // extra calls are harmless

  // ---- outputs
  [[nodiscard]] std::optional<Event> poll_event();
  [[nodiscard]] wire::OutputView pending_output() const;
  [[nodiscard]] std::size_t pending_output_bytes() const noexcept;
  void consume_output(std::size_t written_bytes);
  [[nodiscard]] std::optional<Instant> poll_timeout() const;

  // ---- state
  [[nodiscard]] bool is_open() const noexcept;      // handshake done, nothing latched
  [[nodiscard]] bool finished() const noexcept;     // closed or failed, and its output written
  [[nodiscard]] bool is_blocked() const noexcept;   // between connection.blocked and unblocked
  [[nodiscard]] bool wants_input() const noexcept;  // false: stop reading for now
  [[nodiscard]] bool congested() const noexcept;    // output (and blocked publishes) over the limit
  [[nodiscard]] const Error* error() const noexcept;  // the latched cause, once there is one
  [[nodiscard]] std::uint32_t frame_max_bytes() const noexcept;
  // Publishes in confirm mode, over every channel, whose outcome is not known yet (no ack,
  // nack or timeout): the depth of the publishers' windows (the client batches reads while it
  // is deep).
  [[nodiscard]] std::size_t unconfirmed_publishes() const noexcept;

  // ---- commands. Each registers what will settle it before it queues its frame. A request
  // returns its RequestId (0 for no_wait: nothing will answer). After the latch, every
  // command returns the latched error.
  [[nodiscard]] Result<ChannelId> open_channel(Instant now);
  [[nodiscard]] Result<RequestId> close_channel(ChannelId channel, Instant now);
  // The one path of every request answered by a single method its wire type names
  // (`using Ok = ...`): channel.flow, the exchange and queue verbs, basic.qos, basic.recover.
  // Another method is refused with invalid_argument. Adding such a verb is naming its Ok.
  [[nodiscard]] Result<RequestId> request(ChannelId channel, const wire::Method& m, Instant now);
  // The same, by name.
  [[nodiscard]] Result<RequestId> channel_flow(ChannelId channel, const wire::ChannelFlow& m, Instant now);
  [[nodiscard]] Result<RequestId> exchange_declare(ChannelId channel, const wire::ExchangeDeclare& m, Instant now);
  [[nodiscard]] Result<RequestId> exchange_delete(ChannelId channel, const wire::ExchangeDelete& m, Instant now);
  [[nodiscard]] Result<RequestId> exchange_bind(ChannelId channel, const wire::ExchangeBind& m, Instant now);
  [[nodiscard]] Result<RequestId> exchange_unbind(ChannelId channel, const wire::ExchangeUnbind& m, Instant now);
  [[nodiscard]] Result<RequestId> queue_declare(ChannelId channel, const wire::QueueDeclare& m, Instant now);
  [[nodiscard]] Result<RequestId> queue_bind(ChannelId channel, const wire::QueueBind& m, Instant now);
  [[nodiscard]] Result<RequestId> queue_unbind(ChannelId channel, const wire::QueueUnbind& m, Instant now);
  [[nodiscard]] Result<RequestId> queue_purge(ChannelId channel, const wire::QueuePurge& m, Instant now);
  [[nodiscard]] Result<RequestId> queue_delete(ChannelId channel, const wire::QueueDelete& m, Instant now);
  // The application's own qos: from then on, subscriptions on this channel that name no
  // prefetch send none.
  [[nodiscard]] Result<RequestId> basic_qos(ChannelId channel, const wire::BasicQos& m, Instant now);
  // A subscription. Without `prefetch` and without an application qos on the channel, the
  // engine sends basic.qos(default_prefetch) first; with `prefetch`, basic.qos(prefetch)
  // (0 = unlimited). The qos and the consume go out together. The RequestId settles with
  // consume-ok.
  [[nodiscard]] Result<RequestId> basic_consume(ChannelId channel, const wire::BasicConsume& m,
                                                std::optional<std::uint16_t> prefetch, Instant now);
  [[nodiscard]] Result<RequestId> basic_cancel(ChannelId channel, std::string_view consumer_tag, Instant now);
  [[nodiscard]] Result<RequestId> basic_get(ChannelId channel, const wire::BasicGet& m, Instant now);
  [[nodiscard]] Result<RequestId> basic_recover(ChannelId channel, const wire::BasicRecover& m, Instant now);
  [[nodiscard]] Result<RequestId> confirm_select(ChannelId channel, Instant now);
  // A publish: one deadline (the channel's request timeout) covers waiting while blocked,
  // writing and, in confirm mode, the broker's answer. Settles with PublishDone.
  [[nodiscard]] Result<PublishId> publish(ChannelId channel, const wire::BasicPublish& m,
                                          const wire::BasicProperties& properties,
                                          std::span<const std::byte> body, Instant now);
  [[nodiscard]] Result<PublishId> publish(ChannelId channel, const wire::BasicPublish& m,
                                          const wire::BasicProperties& properties,
                                          std::span<const std::byte> body, Instant now, const PublishOptions& options);
  // This channel's timeout for the requests and publishes made on it from now on, in place
  // of the connection's request_timeout.
  [[nodiscard]] Result<void> set_channel_timeout(ChannelId channel, Duration timeout);
  // What bounds a request on `channel`: its own timeout, else request_timeout.
  [[nodiscard]] Result<Duration> channel_timeout(ChannelId channel);
  // Settling a delivery: `{.delivery_tag = t, .multiple = true}`, `{.delivery_tag = t, .requeue = false}`.
  [[nodiscard]] Result<void> ack(ChannelId channel, const wire::BasicAck& m);
  [[nodiscard]] Result<void> nack(ChannelId channel, const wire::BasicNack& m);
  [[nodiscard]] Result<void> reject(ChannelId channel, const wire::BasicReject& m);
  // connection.update-secret (RabbitMQ): the broker re-authenticates the connection's user with
  // `new_secret` (a fresh OAuth 2 token, say) in place of the one it logged in with. Settles
  // with RequestDone{channel 0, update-secret-ok}; a broker that refuses closes the whole
  // connection (Closed says why). Answers pair by order on channel 0, so one that does not
  // come within request_timeout ends the connection (errc::timeout): a late one could not be
  // told from the next. The secret is never printed (wire::to_string shows <hidden>).
  [[nodiscard]] Result<RequestId> update_secret(std::string_view new_secret, std::string_view reason, Instant now);
  // connection.close; finished once the broker's close-ok arrives (or close_timeout passes).
  [[nodiscard]] Result<void> close(Instant now, std::uint16_t reply_code = 200, std::string_view reply_text = "");

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace warren::engine

// A channel handle: every verb of a channel, options by name, typed replies. Cheap to copy;
// all copies name one channel of one connection. Once that channel is closed (by the broker,
// by a timed-out request, by close(), or with its connection) every verb on the handle fails
// with the channel's cause: a handle never reaches a newer channel that reused the number.
//
// Callbacks follow the client's one convention (Callback<T>: a Result<T>), run on the
// connection's loop thread, and never inside the call that started them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "warren/client/consumer.hpp"
#include "warren/client/message.hpp"
#include "warren/client/options.hpp"
#include "warren/engine/events.hpp"

namespace warren::client {

class Driver;

struct QueueDeclared {
  std::string name{};  // the broker's name for a server-named queue
  std::uint32_t message_count = 0;
  std::uint32_t consumer_count = 0;
};

class Channel {
 public:
  Channel() = default;  // an empty handle: every verb fails with invalid_argument
  explicit Channel(std::shared_ptr<detail::ChannelCore> core) noexcept : core_(std::move(core)) {}

  [[nodiscard]] engine::ChannelId id() const noexcept;
  [[nodiscard]] bool is_open() const noexcept;
  // Why the channel closed; nullopt while it is open.
  [[nodiscard]] std::optional<Error> closed_cause() const;

  void exchange_declare(ExchangeDeclareOptions options, Callback<void> done) const;
  void exchange_delete(ExchangeDeleteOptions options, Callback<void> done) const;
  void exchange_bind(ExchangeBindOptions options, Callback<void> done) const;
  void exchange_unbind(ExchangeBindOptions options, Callback<void> done) const;
  void queue_declare(QueueDeclareOptions options, Callback<QueueDeclared> done) const;
  void queue_bind(QueueBindOptions options, Callback<void> done) const;
  void queue_unbind(QueueBindOptions options, Callback<void> done) const;
  // Both complete with the number of messages the queue held.
  void queue_purge(QueuePurgeOptions options, Callback<std::uint32_t> done) const;
  void queue_delete(QueueDeleteOptions options, Callback<std::uint32_t> done) const;
  void qos(QosOptions options, Callback<void> done) const;
  void flow(FlowOptions options, Callback<void> done) const;
  void recover(RecoverOptions options, Callback<void> done) const;
  // basic.get: a message, or nullopt when the queue was empty.
  void get(GetOptions options, Callback<std::optional<Message>> done) const;
  // Confirm mode: from now on each publish's outcome is the broker's answer.
  void confirm_select(Callback<void> done) const;

  // A publish whose outcome is reported: engine::PublishOutcome::confirmed in confirm mode
  // (written outside it), else an error: errc::nacked, errc::unroutable (a mandatory
  // publish returned, reply 312), errc::timeout (its deadline passed; its fate is unknown),
  // or the channel's or connection's cause (its fate is unknown).
  void publish(const Publish& publish, Body body, Callback<engine::PublishOutcome> done) const;
  // The callback-free fast path: nothing is stored per message; the outcome reaches the
  // connection's on_publish_done keyed by the returned id.
  [[nodiscard]] Result<engine::PublishId> publish(const Publish& publish, Body body) const;

  // A subscription whose deliveries go to `on_delivery` as zero-copy views, one call each.
  void consume(ConsumeOptions options, std::function<void(const Delivery&)> on_delivery,
               Callback<Consumer> done) const;
  // A subscription that is a stream: deliveries are copied into the consumer's buffer
  // (bounded by the prefetch) and read with Consumer::receive.
  void consume(ConsumeOptions options, Callback<Consumer> done) const;

  // channel.close; the handle (and every copy) is closed once it completes.
  void close(Callback<void> done) const;
  // The timeout of the requests and publishes made on this channel from now on.
  [[nodiscard]] Result<void> set_timeout(engine::Duration timeout) const;
  // What bounds a request on this channel: set_timeout's, else the connection's
  // request_timeout. An error once the channel is closed.
  [[nodiscard]] Result<engine::Duration> timeout() const;

  // The loop its connection runs on; null for an empty handle.
  [[nodiscard]] Driver* driver() const noexcept;

 private:
  void subscribe(ConsumeOptions options, std::function<void(const Delivery&)> on_delivery, Callback<Consumer> done) const;
  std::shared_ptr<detail::ChannelCore> core_;
};

}  // namespace warren::client

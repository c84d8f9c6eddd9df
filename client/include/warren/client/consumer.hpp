// A subscription, as an object. Two ways to read it:
// - push: the channel's consume(options, on_delivery, done) calls on_delivery with a
//   zero-copy Delivery per message;
// - stream: consume(options, done) keeps deliveries in a buffer and receive() hands them out
//   one at a time as owned Messages (on Asio, `co_await consumer.receive(token)`).
//
// The buffer is bounded by the subscription's prefetch: the broker sends no more than that
// many unacknowledged deliveries. A subscription without that bound (auto_ack, or prefetch 0)
// stops the connection's reading while its buffer holds `prefetch or 250` messages, until
// receive() drains it.
//
// cancel() (or dropping the last Consumer handle) ends the subscription, and every delivery
// that reached the buffer and was never read is rejected with requeue, so another consumer
// gets it now rather than when this channel closes (a stream subscription's are left to the
// channel instead: RabbitMQ 3.10-3.12 closes the connection for a reject of a stream
// delivery). When the channel closes, the buffer is dropped unread (the broker requeues those
// messages itself) and receive() reports the cause: a delivery from a dead channel, or from
// before a Session reconnected, is never handed out.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "warren/client/message.hpp"
#include "warren/client/options.hpp"

namespace warren::client {

namespace detail {
class ConsumerCore;
}

class Consumer {
 public:
  Consumer() = default;
  explicit Consumer(std::shared_ptr<detail::ConsumerCore> core) noexcept : core_(std::move(core)) {}
  Consumer(Consumer&&) noexcept = default;
  Consumer& operator=(Consumer&& other) noexcept;
  Consumer(const Consumer&) = delete;  // one owner: dropping it cancels the subscription
  Consumer& operator=(const Consumer&) = delete;
  ~Consumer();

  [[nodiscard]] const std::string& tag() const;
  [[nodiscard]] bool active() const noexcept;  // not cancelled and not ended
  [[nodiscard]] std::size_t buffered() const noexcept;  // stream: delivered, not yet received

  // The next message, or once the subscription ended and the buffer is empty, the cause:
  // errc::consumer_cancelled (our cancel, or the broker's), or the channel's or connection's
  // error. One receive waits at a time; `next` may run before receive() returns when a
  // message is already buffered.
  void receive(Callback<Message> next) const;

  // Runs once when the subscription ends (at once if it already has): the cause. Our own
  // cancel, confirmed, is errc::consumer_cancelled with reply code 200; the broker's cancel
  // (its queue was deleted) is errc::consumer_cancelled with reply code 0.
  void on_ended(std::function<void(const Error& cause)> fn) const;

  // basic.cancel; completes on cancel-ok. Unread buffered deliveries are handed back first.
  void cancel(Callback<void> done) const;

 private:
  std::shared_ptr<detail::ConsumerCore> core_;
};

}  // namespace warren::client

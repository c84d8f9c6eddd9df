// A subscription as an Asio stream: `co_await consumer.receive(asio::use_awaitable)` yields
// a Result<client::Message> per delivery, and once the subscription has ended (our cancel,
// the broker's, the channel's or connection's end) and its buffer is read, the cause.
// Wraps client::Consumer (see warren/client/consumer.hpp for the buffer, its bound and the
// cancel hand-back). One owner, like client::Consumer: dropping the last handle cancels the
// subscription, and a receive waiting on it completes with errc::consumer_cancelled.
// Reading costs no heap allocation per message in steady state (receive_slot.hpp).
#pragma once

#include <memory>
#include <string>

#include "warren/asio/initiate.hpp"
#include "warren/asio/receive_slot.hpp"
#include "warren/client/consumer.hpp"

namespace warren::asio_driver {

class Consumer {
 public:
  Consumer(client::Consumer consumer, const detail::LoopExecutor& loop)
      : consumer_(std::make_shared<client::Consumer>(std::move(consumer))),
        slot_(std::make_shared<detail::ReceiveSlot>()),
        loop_(loop) {}
  Consumer(Consumer&&) noexcept = default;
  Consumer& operator=(Consumer&&) noexcept = default;
  Consumer(const Consumer&) = delete;  // one owner: dropping it cancels the subscription
  Consumer& operator=(const Consumer&) = delete;

  // The next message, or the subscription's end (errc::consumer_cancelled after a cancel,
  // else the channel's or connection's cause). One receive waits at a time; a second one
  // completes with errc::invalid_argument.
  template <class Token>
  auto receive(Token&& token) const {
    // A weak reference: a receive in flight (its initiation lives in the awaiting frame)
    // must not keep alive a subscription whose last handle was dropped.
    return asio::async_initiate<Token, void(Result<client::Message>)>(
        [consumer = std::weak_ptr<client::Consumer>(consumer_), slot = slot_, loop = loop_](auto handler) mutable {
          // Run once: the captures move on rather than being counted up and down again.
          asio::dispatch(loop, [consumer = std::move(consumer), slot = std::move(slot), loop,
                                handler = std::move(handler)]() mutable {
            auto live = consumer.lock();
            if (!live || slot->busy()) {
              detail::to_callback<client::Message>(std::move(handler), loop)(
                  live ? make_error(errc::invalid_argument, "a receive() is already waiting on this consumer")
                       : make_error(errc::consumer_cancelled, "the consumer was dropped, which cancelled it"));
              return;
            }
            live->receive(slot->start(std::move(handler), loop));
          });
        },
        token);
  }

  // basic.cancel, completing on cancel-ok; buffered deliveries never read are rejected with
  // requeue first, so another consumer gets them now.
  template <class Token>
  auto cancel(Token&& token) const {
    return detail::initiate<void>(loop_, [consumer = consumer_](client::Callback<void> done) {
      consumer->cancel(std::move(done));
    }, std::forward<Token>(token));
  }

  // Loop thread only, like client::Consumer's.
  [[nodiscard]] const std::string& tag() const { return consumer_->tag(); }
  [[nodiscard]] bool active() const noexcept { return consumer_->active(); }
  [[nodiscard]] std::size_t buffered() const noexcept { return consumer_->buffered(); }
  [[nodiscard]] const client::Consumer& raw() const noexcept { return *consumer_; }

 private:
  // Shared with a cancel in flight; a receive holds it weakly, and the slot not at all.
  std::shared_ptr<client::Consumer> consumer_;
  std::shared_ptr<detail::ReceiveSlot> slot_;
  detail::LoopExecutor loop_;
};

}  // namespace warren::asio_driver

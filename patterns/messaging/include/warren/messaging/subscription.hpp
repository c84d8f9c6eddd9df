// One subscription of the layer that keeps itself going: a channel of its own, a setup that
// declares and binds what it reads, and a consume. When the broker ends it (its channel
// closed by a 404 or 406, its queue deleted) while the connection lives, it runs setup and
// consume again after a backoff, on the same channel if that is still open, else on a new
// one; healthy() is false meanwhile and the episode is reported once. When the connection is
// gone, it is over for good, unless the layer's channels come from a Session: then it does
// the same once the session has connected again (setup re-run, nothing replayed).
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>

#include "warren/messaging/backoff.hpp"
#include "warren/messaging/messaging.hpp"

namespace warren::messaging {

struct SubscriptionSpec {
  std::string queue{};
  std::uint16_t prefetch = 10;
  // Declares (and binds) the queue on the subscription's channel; runs before every consume.
  std::function<void(const client::Channel& ch, client::Callback<void> done)> setup{};
  std::function<void(const client::Delivery& d)> on_delivery{};
  Backoff resubscribe{std::chrono::milliseconds(100), std::chrono::milliseconds(5000)};
  // The consume's arguments, asked before each consume (a log's tail resumes after the last
  // entry it saw); unset: none.
  std::function<client::FieldTable()> arguments{};
  bool stream = false;  // a stream subscription: its deliveries are only ever acked
  // Told once, when the subscription is over for good: cancel(), the layer's close(), or a
  // connection that will not come back.
  std::function<void(const Error& cause)> on_over{};
};

class Subscription : public std::enable_shared_from_this<Subscription> {
 public:
  // `ready` is told once: success when the first consume is in, else the first failure (and
  // then the subscription is over: a first setup that fails is the caller's to fix).
  [[nodiscard]] static std::shared_ptr<Subscription> start(std::shared_ptr<Messaging> layer, SubscriptionSpec spec,
                                                           client::Callback<void> ready);
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription();  // dropped: its channel is closed (the consumer goes with it)

  [[nodiscard]] const std::string& queue() const noexcept { return spec_.queue; }
  [[nodiscard]] bool healthy() const noexcept { return consuming_; }
  [[nodiscard]] bool over() const noexcept { return over_; }
  // How many times it subscribed again after the broker ended it.
  [[nodiscard]] std::uint32_t resubscribed() const noexcept { return resubscribed_; }
  // The loop it runs on: kept apart from the layer, which a subscription only holds weakly.
  [[nodiscard]] client::Driver& driver() const noexcept { return driver_; }
  // basic.cancel (unread deliveries go back to the queue) and the channel closed.
  void cancel(client::Callback<void> done);
  // basic.cancel only: nothing more is delivered (unread deliveries go back to the queue) and
  // the subscription is over, but its channel stays open, so what was handed out can still be
  // settled (a worker finishing what it runs before it leaves); cancel() or dropping the
  // subscription closes the channel then.
  void stop_consuming(client::Callback<void> done);
  // The connection is gone: over for good, nothing reopened.
  void end(const Error& cause);

 private:
  Subscription(std::shared_ptr<Messaging> layer, SubscriptionSpec spec, client::Callback<void> ready);
  void subscribe();
  void subscribed(Result<void> r);
  void ended(const Error& cause);

  std::weak_ptr<Messaging> layer_;
  client::Driver& driver_;
  SubscriptionSpec spec_;
  client::Callback<void> ready_;  // until the first outcome
  client::Channel channel_;
  client::Consumer consumer_;
  std::unique_ptr<client::Timer> timer_;
  std::mt19937 random_;  // seeded by the layer (Options::random_seed)
  std::uint32_t failures_ = 0;  // in a row, for the backoff
  std::uint32_t resubscribed_ = 0;
  bool consuming_ = false;
  bool over_ = false;
  bool stopped_ = false;  // stop_consuming(): over, its channel kept for the settles
  bool reported_ = false;  // this episode's consumer.closed was logged
};

}  // namespace warren::messaging

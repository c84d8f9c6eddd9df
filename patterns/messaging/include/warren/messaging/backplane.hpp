// The backplane: room events fanned out to every instance in the room. Per instance, one
// exclusive auto-delete queue "<prefix>.bp.<uuid>" and one consumer channel for all its rooms,
// bound and unbound per room (the room is the routing key) on the direct exchange
// "<prefix>.bp": no shared queue, and the channel count does not grow with the rooms.
// If the consumer's channel closes, the subscription declares the queue again and rebinds
// every room it is in before consuming (see subscription.hpp).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "warren/messaging/messaging.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::messaging {

struct BackplaneOptions {
  std::uint16_t prefetch = 100;
};

// An event of a room: the room, and the message (valid during the call; acked after it unless
// the callback settled or took it, as for an inbox: direct.hpp).
using OnRoomEvent = std::function<void(std::string_view room, const client::Delivery& d)>;

class Backplane : public std::enable_shared_from_this<Backplane> {
 public:
  // The instance's queue and consumer; `done` once it consumes.
  static void start(const std::shared_ptr<Messaging>& layer, BackplaneOptions options, OnRoomEvent on_event,
                    client::Callback<std::shared_ptr<Backplane>> done);

  [[nodiscard]] const std::string& queue() const noexcept { return queue_; }
  [[nodiscard]] const std::set<std::string>& rooms() const noexcept { return rooms_; }
  [[nodiscard]] bool healthy() const { return subscription_ && subscription_->healthy(); }
  [[nodiscard]] client::Driver& driver() const { return layer_->driver(); }  // the loop it runs on

  void join(std::string room, client::Callback<void> done);
  void leave(std::string room, client::Callback<void> done);
  // To every instance in `room` (confirmed; a room nobody is in takes it nowhere, no error).
  void publish(std::string_view room, std::string_view body, client::Callback<void> done);
  void close(client::Callback<void> done);

 private:
  Backplane(std::shared_ptr<Messaging> layer, std::string queue) : layer_(std::move(layer)), queue_(std::move(queue)) {}

  std::shared_ptr<Messaging> layer_;
  std::string queue_;
  std::set<std::string> rooms_;
  std::shared_ptr<Subscription> subscription_;
};

}  // namespace warren::messaging

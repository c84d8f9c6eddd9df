// Direct messaging: one exchange "<prefix>.direct", the address as the routing key.
// - An inbox is an exclusive queue "<prefix>.inbox.<uuid>" bound under its own name, which is
//   its address: it lives as long as its connection, and a reply_to can name it.
// - A service group is one durable classic queue "<prefix>.group.<address>" with x-expires
//   (the layer's inbox_ttl), bound under the address; every member consumes it, so members
//   compete. One group per address: two groups on one address would compete, not each receive.
// - send() is mandatory and confirmed: a message to an address nobody listens on fails with
//   errc::unroutable (312) for the sender to see, instead of vanishing.
// A message is acked once its callback returns, unless the callback settled it (ack, nack,
// reject) or took it (take(): then the Message settles it). copy() keeps one to read later.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "warren/messaging/messaging.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::messaging {

struct SendOptions {
  std::string_view address{};
  std::string_view body{};
  std::string_view reply_to{};      // an inbox's address, for an answer
  std::string_view correlation_id{};
  client::Arguments headers{};
  std::optional<engine::Duration> timeout{};  // the confirm's deadline; unset: the channel's
};

struct InboxOptions {
  std::uint16_t prefetch = 50;
};

struct GroupOptions {
  std::string_view address{};  // copied: the member subscribes to it again after a loss
  std::uint16_t prefetch = 10;  // per member
};

using OnDirect = std::function<void(const client::Delivery& d)>;

class Inbox {
 public:
  Inbox(std::string address, std::shared_ptr<Subscription> subscription)
      : address_(std::move(address)), subscription_(std::move(subscription)) {}
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  [[nodiscard]] bool healthy() const noexcept { return subscription_->healthy(); }
  [[nodiscard]] client::Driver& driver() const noexcept { return subscription_->driver(); }  // the loop it runs on
  void close(client::Callback<void> done) { subscription_->cancel(std::move(done)); }

 private:
  std::string address_;
  std::shared_ptr<Subscription> subscription_;
};

void open_inbox(const std::shared_ptr<Messaging>& layer, InboxOptions options, OnDirect on_message,
                client::Callback<std::shared_ptr<Inbox>> done);
// A member of the service group on `options.address`.
void join_group(const std::shared_ptr<Messaging>& layer, GroupOptions options, OnDirect on_message,
                client::Callback<std::shared_ptr<Subscription>> done);
void send(const std::shared_ptr<Messaging>& layer, const SendOptions& options, client::Callback<void> done);

}  // namespace warren::messaging

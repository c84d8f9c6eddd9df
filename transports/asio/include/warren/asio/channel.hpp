// A channel on Asio: client::Channel with every verb as a completion-token member.
//
//   auto q = co_await ch.queue_declare({.name = "orders", .durable = true}, asio::use_awaitable);
//   if (!q) return log(q.error().to_string());   // "not found: ... (404 NOT_FOUND ...)"
//
// Each verb completes with `void(Result<T>)` on the handler's executor (else the connection's
// io_context), and may be called from any thread: it is started on the loop. Options are
// views, kept (client::Kept) when the verb is called, and a publish is copied, so a deferred
// token may be launched after the caller's strings are gone, and options written inline in a
// `co_await` are safe on GCC 12 too. Cheap to copy; all copies name one channel (client::Channel).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "warren/asio/consumer.hpp"
#include "warren/asio/initiate.hpp"
#include "warren/client/owned_publish.hpp"
#include "warren/client/channel.hpp"
#include "warren/client/kept.hpp"

namespace warren::asio_driver {

class Channel {
 public:
  Channel(client::Channel channel, const detail::LoopExecutor& loop) : channel_(std::move(channel)), loop_(loop) {}

  template <class Token>
  auto exchange_declare(client::ExchangeDeclareOptions options, Token&& token) const {
    return call(&client::Channel::exchange_declare, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto exchange_delete(client::ExchangeDeleteOptions options, Token&& token) const {
    return call(&client::Channel::exchange_delete, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto exchange_bind(client::ExchangeBindOptions options, Token&& token) const {
    return call(&client::Channel::exchange_bind, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto exchange_unbind(client::ExchangeBindOptions options, Token&& token) const {
    return call(&client::Channel::exchange_unbind, std::move(options), std::forward<Token>(token));
  }
  // Completes with the queue's name (the broker's, for a server-named queue) and counts.
  template <class Token>
  auto queue_declare(client::QueueDeclareOptions options, Token&& token) const {
    return call(&client::Channel::queue_declare, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto queue_bind(client::QueueBindOptions options, Token&& token) const {
    return call(&client::Channel::queue_bind, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto queue_unbind(client::QueueBindOptions options, Token&& token) const {
    return call(&client::Channel::queue_unbind, std::move(options), std::forward<Token>(token));
  }
  // Completes with the number of messages purged.
  template <class Token>
  auto queue_purge(client::QueuePurgeOptions options, Token&& token) const {
    return call(&client::Channel::queue_purge, std::move(options), std::forward<Token>(token));
  }
  // Completes with the number of messages the queue held.
  template <class Token>
  auto queue_delete(client::QueueDeleteOptions options, Token&& token) const {
    return call(&client::Channel::queue_delete, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto qos(client::QosOptions options, Token&& token) const {
    return call(&client::Channel::qos, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto flow(client::FlowOptions options, Token&& token) const {
    return call(&client::Channel::flow, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto recover(client::RecoverOptions options, Token&& token) const {
    return call(&client::Channel::recover, std::move(options), std::forward<Token>(token));
  }
  // basic.get: an owned message, or nullopt when the queue was empty.
  template <class Token>
  auto get(client::GetOptions options, Token&& token) const {
    return call(&client::Channel::get, std::move(options), std::forward<Token>(token));
  }
  template <class Token>
  auto confirm_select(Token&& token) const {
    return start<void>([](const client::Channel& ch, client::Callback<void> done) { ch.confirm_select(std::move(done)); },
                       std::forward<Token>(token));
  }
  // channel.close; every copy of the handle is closed once it completes.
  template <class Token>
  auto close(Token&& token) const {
    return start<void>([](const client::Channel& ch, client::Callback<void> done) { ch.close(std::move(done)); },
                       std::forward<Token>(token));
  }

  // The broker's outcome: confirmed in confirm mode (written outside it), else errc::nacked,
  // errc::unroutable (a mandatory publish returned: reply code 312 and text in the Error),
  // errc::timeout (its deadline passed), or the channel's or connection's cause.
  template <class Token>
  auto publish(const client::Publish& publish, client::Body body, Token&& token) const {
    return start<engine::PublishOutcome>(
        [owned = client::OwnedPublish(publish, body)](const client::Channel& ch, client::Callback<engine::PublishOutcome> done) {
          if (!owned.status().ok()) return done(owned.status().error());
          ch.publish(owned.publish(), owned.body(), std::move(done));
        },
        std::forward<Token>(token));
  }
  // Publishes every body with the same `publish` options at once and completes when each has
  // its outcome, in order: N confirms in one round trip's time instead of N awaited one by one.
  // The bodies are copied before it returns. The outer Result fails only for the channel
  // itself (an empty or closed handle); each publish's own failure is in its place.
  template <class Token>
  auto publish_all(const client::Publish& publish, std::span<const std::span<const std::byte>> bodies, Token&& token) const {
    using Outcomes = std::vector<Result<engine::PublishOutcome>>;
    auto owned = std::make_shared<std::vector<client::OwnedPublish>>();
    owned->reserve(bodies.size());
    for (auto body : bodies) owned->emplace_back(publish, body);
    return start<Outcomes>(
        [owned](const client::Channel& ch, client::Callback<Outcomes> done) {
          if (!ch.is_open()) return done(ch.closed_cause().value_or(make_error(errc::channel_closed, "the channel is closed")));
          struct Batch {
            Outcomes outcomes;
            std::size_t left = 0;
            client::Callback<Outcomes> done;
            void settle(std::size_t i, Result<engine::PublishOutcome> r) {
              outcomes[i] = std::move(r);
              if (--left == 0) done(std::move(outcomes));
            }
          };
          auto batch = std::make_shared<Batch>();
          batch->outcomes.assign(owned->size(), Result<engine::PublishOutcome>(make_error(errc::timeout, "no outcome")));
          batch->left = owned->size();
          batch->done = std::move(done);
          if (batch->left == 0) return batch->done(std::move(batch->outcomes));
          for (std::size_t i = 0; i < owned->size(); ++i) {
            const auto& p = (*owned)[i];
            if (!p.status().ok()) {
              batch->settle(i, p.status().error());
              continue;
            }
            ch.publish(p.publish(), p.body(),
                       [batch, owned, i](Result<engine::PublishOutcome> r) { batch->settle(i, std::move(r)); });
          }
        },
        std::forward<Token>(token));
  }
  // The callback-free fast path (loop thread only): nothing is stored per message, the body
  // is copied before it returns, and the outcome reaches the connection's on_publish_done.
  [[nodiscard]] Result<engine::PublishId> publish(const client::Publish& publish, client::Body body) const {
    return channel_.publish(publish, body);
  }

  // A stream subscription: read it with Consumer::receive.
  template <class Token>
  auto consume(client::ConsumeOptions options, Token&& token) const {
    return start<Consumer>(
        [kept = client::Kept<client::ConsumeOptions>(options), loop = loop_](const client::Channel& ch,
                                                                              client::Callback<Consumer> done) {
          ch.consume(*kept, wrap_consumer(std::move(done), loop));
        },
        std::forward<Token>(token));
  }
  // A push subscription: `on_delivery` gets each delivery as a zero-copy view, on the loop.
  template <class Token>
  auto consume(client::ConsumeOptions options, std::function<void(const client::Delivery&)> on_delivery,
               Token&& token) const {
    return start<Consumer>(
        [kept = client::Kept<client::ConsumeOptions>(options), fn = std::move(on_delivery), loop = loop_](
            const client::Channel& ch, client::Callback<Consumer> done) mutable {
          ch.consume(*kept, std::move(fn), wrap_consumer(std::move(done), loop));
        },
        std::forward<Token>(token));
  }

  [[nodiscard]] const client::Channel& raw() const noexcept { return channel_; }
  [[nodiscard]] engine::ChannelId id() const noexcept { return channel_.id(); }
  [[nodiscard]] bool is_open() const noexcept { return channel_.is_open(); }
  [[nodiscard]] const detail::LoopExecutor& loop() const noexcept { return loop_; }

 private:
  // `fn(channel, done)` on the loop, with this handle held by value.
  template <class T, class Fn, class Token>
  auto start(Fn fn, Token&& token) const {
    return detail::initiate<T>(loop_, [ch = channel_, fn = std::move(fn)](client::Callback<T> done) mutable {
      fn(ch, std::move(done));
    }, std::forward<Token>(token));
  }
  // A verb that takes its options and answers a Result<T>: one line per verb above.
  template <class T, class Options, class Token>
  auto call(void (client::Channel::*verb)(Options, client::Callback<T>) const, std::type_identity_t<Options> options,
            Token&& token) const {
    return start<T>([verb, kept = client::Kept<Options>(options)](const client::Channel& ch, client::Callback<T> done) {
      (ch.*verb)(*kept, std::move(done));
    }, std::forward<Token>(token));
  }
  static client::Callback<client::Consumer> wrap_consumer(client::Callback<Consumer> done, detail::LoopExecutor loop) {
    return [done = std::move(done), loop](Result<client::Consumer> r) {
      done(detail::map<Consumer>(std::move(r), [&](client::Consumer c) { return Consumer(std::move(c), loop); }));
    };
  }

  client::Channel channel_;
  detail::LoopExecutor loop_;
};

namespace detail {
// The client's callback for an open_channel (a connection's, a session's) that completes an
// Asio operation with the asio_driver::Channel on the same loop.
inline client::Callback<client::Channel> to_channel_callback(client::Callback<Channel> done, const LoopExecutor& loop) {
  return [done = std::move(done), loop](Result<client::Channel> r) {
    done(map<Channel>(std::move(r), [&](client::Channel ch) { return Channel(std::move(ch), loop); }));
  };
}
}  // namespace detail

}  // namespace warren::asio_driver

// Request/reply (client::RpcClient, over direct reply-to) on Asio, as completion tokens:
//
//   auto rpc = co_await asio_driver::RpcClient::async_start(conn, ch, asio::use_awaitable);
//   auto reply = co_await rpc->call({.routing_key = "rpc"}, client::as_bytes("2+2"), asio::use_awaitable);
//
// A reply is an owned client::Message (its correlation id, properties and body); there is
// nothing to settle on it (direct reply-to is no-ack). Completions as everywhere in
// warren/asio: `void(Result<T>)`, callable from any thread.
#pragma once

#include <memory>
#include <span>

#include "warren/asio/channel.hpp"
#include "warren/asio/initiate.hpp"
#include "warren/client/owned_publish.hpp"
#include "warren/client/rpc.hpp"

namespace warren::asio_driver {

class RpcClient {
 public:
  RpcClient(std::shared_ptr<client::RpcClient> rpc, const detail::LoopExecutor& loop) : rpc_(std::move(rpc)), loop_(loop) {}

  // Puts `channel` (used for nothing else) in confirm mode and starts the reply consumer.
  template <class Token>
  static auto async_start(std::shared_ptr<client::Connection> connection, const Channel& channel, Token&& token) {
    const auto loop = detail::loop_executor(*connection);
    return detail::initiate<RpcClient>(
        loop,
        [connection = std::move(connection), ch = channel.raw(), loop](client::Callback<RpcClient> done) {
          // The client holds itself only weakly until it is ready: hold it here until then.
          auto holder = std::make_shared<std::shared_ptr<client::RpcClient>>();
          *holder = client::RpcClient::start(ch, [holder, loop, done = std::move(done)](Result<void> r) {
            auto rpc = std::move(*holder);
            if (!r) return done(std::move(r).error());
            done(RpcClient(std::move(rpc), loop));
          });
        },
        std::forward<Token>(token));
  }

  // Sends `request` (always mandatory; its timeout, else the channel's request timeout, which is
  // the connection's request_timeout unless set on the channel, bounds the whole call) and completes with the reply, or why there is none: errc::timeout,
  // errc::unroutable (312: nobody consumes the routing key), errc::nacked, the reply consumer's end.
  template <class Token>
  auto call(const client::Publish& request, client::Body body, Token&& token) const {
    return detail::initiate<client::Message>(
        loop_,
        [rpc = rpc_, owned = client::OwnedPublish(request, body)](client::Callback<client::Message> done) {
          if (!owned.status().ok()) return done(owned.status().error());
          const auto& p = owned.publish();
          rpc->call({.exchange = p.exchange, .routing_key = p.routing_key, .properties = p.properties,
                     .timeout = p.timeout, .trace = p.trace},
                    owned.body(), std::move(done));
        },
        std::forward<Token>(token));
  }

  [[nodiscard]] const std::shared_ptr<client::RpcClient>& raw() const noexcept { return rpc_; }

 private:
  std::shared_ptr<client::RpcClient> rpc_;
  detail::LoopExecutor loop_;
};

}  // namespace warren::asio_driver

// A Session on Asio through completion tokens: a recovering channel's confirmed publish
// (`void(Result<engine::PublishOutcome>)`), a plain channel on the session's connection
// (`void(Result<asio_driver::Channel>)`) and the session's close (`void(Result<void>)`).
// Callable from any thread; the initiation runs on the session's loop.
#pragma once

#include <memory>
#include <span>

#include "warren/asio/channel.hpp"
#include "warren/asio/initiate.hpp"
#include "warren/client/owned_publish.hpp"
#include "warren/client/session.hpp"

namespace warren::asio_driver {

// Publishes now if the channel is ready, else once it is (after a reconnect, say), as
// RecoveringChannel::publish: the publish's timeout bounds the wait, the write and the
// broker's answer. The publish and its body are copied, so a deferred token may be launched
// after the caller's strings are gone.
template <class Token>
auto async_publish(std::shared_ptr<client::RecoveringChannel> channel, const client::Publish& publish,
                   client::Body body, Token&& token) {
  const auto loop = detail::loop_executor(channel->driver());
  return detail::initiate<engine::PublishOutcome>(
      loop,
      [channel = std::move(channel), owned = client::OwnedPublish(publish, body)](
          client::Callback<engine::PublishOutcome> done) {
        if (!owned.status().ok()) return done(owned.status().error());
        channel->publish(owned.publish(), owned.body(), std::move(done));
      },
      std::forward<Token>(token));
}

// A plain channel on the session's connection (Session::open_channel): while the session is
// between connections it waits for the next, within the request timeout. The channel is not
// recovered: after a reconnect it fails with its cause and a new one is asked for.
template <class Token>
auto async_open_channel(std::shared_ptr<client::Session> session, Token&& token) {
  const auto loop = detail::loop_executor(session->driver());
  return detail::initiate<Channel>(
      loop,
      [session = std::move(session), loop](client::Callback<Channel> done) {
        session->open_channel(detail::to_channel_callback(std::move(done), loop));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_close(std::shared_ptr<client::Session> session, Token&& token) {
  const auto loop = detail::loop_executor(session->driver());
  return detail::initiate<void>(loop, [session = std::move(session)](client::Callback<void> done) {
    session->close(std::move(done));
  }, std::forward<Token>(token));
}

}  // namespace warren::asio_driver

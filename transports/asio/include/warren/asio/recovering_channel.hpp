// A Session's recovering channel whose setup is a coroutine: it runs on each new channel
// (after confirm.select) on the session's loop, and its Result marks the channel ready, or
// says why not (a 406 on a redeclare, say), as the callback form's `done` does.
//
//   auto orders = asio_driver::recovering_channel(session, [](asio_driver::Channel ch) -> asio::awaitable<Result<void>> {
//     auto q = co_await ch.queue_declare({.name = "orders", .durable = true}, asio::use_awaitable);
//     if (!q) co_return q.error();
//     co_return co_await ch.queue_bind({.queue = "orders", .exchange = "amq.topic", .routing_key = "orders.#"},
//                                      asio::use_awaitable);
//   });
//   auto sent = co_await asio_driver::async_publish(orders, {.routing_key = "orders"}, "hello", asio::use_awaitable);
//
// A setup that would rather throw may: a warren::BadResultAccess (from value()) counts as
// the Error it carries, any other exception as errc::invalid_argument with its what().
// Only with Asio's coroutines (async.hpp includes this when the compiler has them).
#pragma once

#include "warren/asio/asio_config.hpp"  // before any Asio header
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "warren/asio/channel.hpp"
#include "warren/asio/initiate.hpp"
#include "warren/client/session.hpp"

namespace warren::asio_driver {

using AsyncSetup = std::function<asio::awaitable<Result<void>>(Channel channel)>;

namespace detail {
inline Result<void> setup_outcome(std::exception_ptr thrown, Result<void> result) {
  if (!thrown) return result;
  try {
    std::rethrow_exception(thrown);
  } catch (const BadResultAccess& e) {
    return e.error();
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, std::string("the channel's setup threw: ") + e.what());
  } catch (...) {
    return make_error(errc::invalid_argument, "the channel's setup threw something that is not a std::exception");
  }
}
}  // namespace detail

// Session::channel with a coroutine for its setup. Like Session::channel, call it on the
// session's loop thread (the setup starts at once when the session is connected).
[[nodiscard]] inline std::shared_ptr<client::RecoveringChannel> recovering_channel(client::Session& session,
                                                                                  AsyncSetup setup) {
  const auto loop = detail::loop_executor(session.driver());
  return session.channel([setup = std::move(setup), loop](client::RecoveringChannel& channel, client::Callback<void> done) {
    asio::co_spawn(loop, setup(Channel(channel.channel(), loop)),
                   [done = std::move(done)](std::exception_ptr thrown, Result<void> result) {
                     done(detail::setup_outcome(thrown, std::move(result)));
                   });
  });
}

}  // namespace warren::asio_driver

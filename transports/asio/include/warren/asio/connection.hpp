// A connection's life on Asio as completion tokens: connect, open a channel, close.
//
//   auto conn = co_await asio_driver::async_connect(driver, url, asio::use_awaitable);
//   if (!conn) return fail(conn.error());   // 403, 530 and the broker's text
//   auto ch = co_await asio_driver::async_open_channel(*conn, asio::use_awaitable);
//
// Each completes with `void(Result<T>)` on the handler's executor, else the io_context the
// connection runs on, and may be called from any thread (it is started on the loop).
//
// Options are written inline, with GCC 12 as with clang:
//
//   co_await asio_driver::async_connect(driver, url, {.engine = {.heartbeat_s = 30}}, asio::use_awaitable);
//
// GCC 12 copies a braced temporary inside a co_await expression bitwise and destroys both, so
// what a token form takes inline owns nothing: ConnectOptions (client/connect_options.hpp) is
// ClientOptions viewed, copied into an owned ClientOptions at the call; a named ClientOptions
// converts to it.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "warren/asio/channel.hpp"
#include "warren/asio/initiate.hpp"
#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#endif
#include "warren/client/connection.hpp"

namespace warren::asio_driver {

// Dials the URL's hosts in turn; completes once the handshake is done or every host failed.
// The driver is the loop's, and outlives every connection on it (the client assumes as much).
template <class Token>
auto async_connect(AsioDriver& driver, client::ConnectionUrl url, client::ConnectOptions options, Token&& token) {
  using Connected = std::shared_ptr<client::Connection>;
  return detail::initiate<Connected>(
      driver.context().get_executor(),
      [&driver, url = std::move(url), options = options.owned()](client::Callback<Connected> done) mutable {
        // The connection keeps on_ready as long as it lives, and on_ready must reach the
        // connection: hold it only until the answer, or that would be a cycle.
        struct Dial {
          Connected connection{};
          bool answered = false;
        };
        auto dial = std::make_shared<Dial>();
        auto connection = client::Connection::connect(driver, url, std::move(options), [dial, done = std::move(done)](Result<void> r) {
          dial->answered = true;
          auto connection = std::move(dial->connection);
          if (!r) return done(std::move(r).error());
          done(std::move(connection));
        });
        if (!dial->answered) dial->connection = std::move(connection);
      },
      std::forward<Token>(token));
}

// With the default options.
template <class Token>
auto async_connect(AsioDriver& driver, client::ConnectionUrl url, Token&& token) {
  return async_connect(driver, std::move(url), client::ConnectOptions{}, std::forward<Token>(token));
}

template <class Token>
auto async_open_channel(std::shared_ptr<client::Connection> connection, Token&& token) {
  const auto loop = detail::loop_executor(*connection);
  return detail::initiate<Channel>(
      loop,
      [connection = std::move(connection), loop](client::Callback<Channel> done) {
        connection->open_channel(detail::to_channel_callback(std::move(done), loop));
      },
      std::forward<Token>(token));
}
template <class Token>
auto async_open_channel(client::Connection& connection, Token&& token) {
  return async_open_channel(connection.shared_from_this(), std::forward<Token>(token));
}

// connection.update-secret (Connection::update_secret): completes once the broker took the new
// secret; a refusal is the connection's close. The secret and reason are copied at the call.
template <class Token>
auto async_update_secret(std::shared_ptr<client::Connection> connection, std::string_view secret,
                         std::string_view reason, Token&& token) {
  const auto loop = detail::loop_executor(*connection);
  return detail::initiate<void>(
      loop,
      [connection = std::move(connection), secret = std::string(secret),
       reason = std::string(reason)](client::Callback<void> done) {
        connection->update_secret(secret, reason, std::move(done));
      },
      std::forward<Token>(token));
}
template <class Token>
auto async_update_secret(client::Connection& connection, std::string_view secret, std::string_view reason,
                         Token&& token) {
  return async_update_secret(connection.shared_from_this(), secret, reason, std::forward<Token>(token));
}

#if defined(ASIO_HAS_CO_AWAIT)
// A credentials provider (client/credentials.hpp) whose fetch is a coroutine, run on the
// connection's loop: it `co_return`s the Credentials; an exception is its failure (its what()
// is reported: say there what failed, not the secret).
//
//   options.credentials = asio_driver::credentials_from_coroutine(driver,
//       [&]() -> asio::awaitable<client::Credentials> { co_return co_await tokens.fetch(); });
template <class Fetch>
std::shared_ptr<client::CredentialsProvider> credentials_from_coroutine(AsioDriver& driver, Fetch fetch) {
  return client::credentials_from([&driver, fetch = std::move(fetch)](client::Callback<client::Credentials> done) {
    ::asio::co_spawn(driver.context().get_executor(), fetch(),
                     [done = std::move(done)](std::exception_ptr failed, client::Credentials got) {
                       if (!failed) return done(std::move(got));
                       std::string why = "the provider's coroutine threw";
                       try {
                         std::rethrow_exception(failed);
                       } catch (const std::exception& e) {
                         why += ": " + std::string(e.what());
                       } catch (...) {
                       }
                       done(make_error(errc::credentials_unavailable, std::move(why)));
                     });
  });
}
#endif

// connection.close: completes once the broker answered (or the connection was already gone).
template <class Token>
auto async_close(std::shared_ptr<client::Connection> connection, Token&& token) {
  const auto loop = detail::loop_executor(*connection);
  return detail::initiate<void>(
      loop,
      [connection = std::move(connection)](client::Callback<void> done) {
        connection->close(std::move(done));
      },
      std::forward<Token>(token));
}
template <class Token>
auto async_close(client::Connection& connection, Token&& token) {
  return async_close(connection.shared_from_this(), std::forward<Token>(token));
}

}  // namespace warren::asio_driver

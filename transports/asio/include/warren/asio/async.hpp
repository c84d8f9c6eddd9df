// Completion tokens for the client on Asio: `co_await async_queue_declare(c, ch, m,
// asio::use_awaitable)`, `asio::use_future`, or a plain callback. Results are owned values
// (a coroutine reads them after the callback that produced them has returned); failures are
// std::error_code in warren's category. Completions are posted to the handler's executor,
// so a coroutine never resumes inside the client's event dispatch.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/post.hpp>

#include <memory>
#include <string>

#include "warren/asio/asio_driver.hpp"
#include "warren/client/connection.hpp"

namespace warren::asio_driver {

struct QueueInfo {
  std::string name;
  std::uint32_t message_count = 0;
  std::uint32_t consumer_count = 0;
};

namespace detail {

// Calls the handler with (ec, value) on its own executor, once.
template <class Handler, class Value>
void complete(std::shared_ptr<Handler> handler, std::error_code ec, Value value) {
  auto ex = asio::get_associated_executor(*handler);
  asio::post(ex, [handler, ec, value = std::move(value)]() mutable { std::move (*handler)(ec, std::move(value)); });
}

}  // namespace detail

template <class Token>
auto async_connect(AsioDriver& driver, client::ConnectionUrl url, client::ClientOptions options, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, std::shared_ptr<client::Connection>)>(
      [&driver](auto handler, client::ConnectionUrl u, client::ClientOptions o) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto conn = std::make_shared<std::shared_ptr<client::Connection>>();
        *conn = client::Connection::connect(driver, u, std::move(o), [h, conn](const Error* e) {
          detail::complete(h, e ? e->code : std::error_code{}, e ? nullptr : *conn);
        });
      },
      token, std::move(url), std::move(options));
}

template <class Token>
auto async_open_channel(client::Connection& c, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, engine::ChannelId)>(
      [&c](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        c.open_channel([h](const Error* e, engine::ChannelId id) { detail::complete(h, e ? e->code : std::error_code{}, id); });
      },
      token);
}

template <class Token>
auto async_queue_declare(client::Connection& c, engine::ChannelId channel, const wire::QueueDeclare& m, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, QueueInfo)>(
      [&c, channel, m](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        c.queue_declare(channel, m, [h](const Error* e, const wire::Method* reply) {
          QueueInfo info;
          if (!e && reply)
            if (const auto* ok = std::get_if<wire::QueueDeclareOk>(reply))
              info = QueueInfo{std::string(ok->queue), ok->message_count, ok->consumer_count};
          detail::complete(h, e ? e->code : std::error_code{}, std::move(info));
        });
      },
      token);
}

template <class Token>
auto async_confirm_select(client::Connection& c, engine::ChannelId channel, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, bool)>(
      [&c, channel](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        c.confirm_select(channel, [h](const Error* e, const wire::Method*) {
          detail::complete(h, e ? e->code : std::error_code{}, e == nullptr);
        });
      },
      token);
}

// Completes with the broker's outcome in confirm mode (or "written" outside it). The body is
// copied into the output queue before this returns.
template <class Token>
auto async_publish(client::Connection& c, engine::ChannelId channel, const wire::BasicPublish& m,
                   const wire::BasicProperties& properties, std::span<const std::byte> body, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, engine::PublishOutcome)>(
      [&c, channel, m, &properties, body](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        c.publish(channel, m, properties, body, [h](engine::PublishOutcome o, const Error& e) {
          detail::complete(h, e.code, o);
        });
      },
      token);
}

template <class Token>
auto async_close(client::Connection& c, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, bool)>(
      [&c](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        c.close([h](const Error* e) { detail::complete(h, e ? e->code : std::error_code{}, e == nullptr); });
      },
      token);
}

}  // namespace warren::asio_driver

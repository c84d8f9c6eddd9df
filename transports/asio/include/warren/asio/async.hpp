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
#include <optional>
#include <stdexcept>
#include <string>

#include "warren/asio/asio_driver.hpp"
#include "warren/client/connection.hpp"

namespace warren::asio_driver {

struct QueueInfo {
  std::string name;
  std::uint32_t message_count = 0;
  std::uint32_t consumer_count = 0;
};

// A message copied out of the engine's buffers (basic.get through a token).
struct OwnedMessage {
  std::uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string exchange;
  std::string routing_key;
  std::optional<std::string> correlation_id;
  std::optional<std::string> reply_to;
  std::string body;
};

namespace detail {

// The loop the connection runs on: where a handler with no executor of its own completes.
// (Asio's default for a plain callback is the system executor, a thread pool of its own, where
// a callback that calls the client again would race the loop.)
inline asio::io_context::executor_type loop_executor(client::Connection& c) {
  auto* driver = dynamic_cast<AsioDriver*>(&c.driver());
  if (!driver) throw std::logic_error("warren's Asio completion tokens need a connection on an AsioDriver");
  return driver->context().get_executor();
}

// Calls the handler with (ec, value) on its own executor, or else on the loop's, once.
template <class Handler, class Value>
void complete(std::shared_ptr<Handler> handler, const asio::io_context::executor_type& loop, std::error_code ec,
              Value value) {
  auto ex = asio::get_associated_executor(*handler, loop);
  asio::post(ex, [handler, ec, value = std::move(value)]() mutable { std::move (*handler)(ec, std::move(value)); });
}

}  // namespace detail

template <class Token>
auto async_connect(AsioDriver& driver, client::ConnectionUrl url, client::ClientOptions options, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, std::shared_ptr<client::Connection>)>(
      [&driver](auto handler, client::ConnectionUrl u, client::ClientOptions o) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto conn = std::make_shared<std::shared_ptr<client::Connection>>();
        auto loop = driver.context().get_executor();
        *conn = client::Connection::connect(driver, u, std::move(o), [h, conn, loop](const Error* e) {
          detail::complete(h, loop, e ? e->code : std::error_code{}, e ? nullptr : *conn);
        });
      },
      token, std::move(url), std::move(options));
}

template <class Token>
auto async_open_channel(client::Connection& c, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, engine::ChannelId)>(
      [&c](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = detail::loop_executor(c);
        c.open_channel([h, loop](const Error* e, engine::ChannelId id) { detail::complete(h, loop, e ? e->code : std::error_code{}, id); });
      },
      token);
}

template <class Token>
auto async_queue_declare(client::Connection& c, engine::ChannelId channel, const wire::QueueDeclare& m, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, QueueInfo)>(
      [&c, channel, m](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = detail::loop_executor(c);
        c.queue_declare(channel, m, [h, loop](const Error* e, const wire::Method* reply) {
          QueueInfo info;
          if (!e && reply)
            if (const auto* ok = std::get_if<wire::QueueDeclareOk>(reply))
              info = QueueInfo{std::string(ok->queue), ok->message_count, ok->consumer_count};
          detail::complete(h, loop, e ? e->code : std::error_code{}, std::move(info));
        });
      },
      token);
}

// The verbs whose answer carries nothing: complete with the error code alone.
namespace detail {
template <class Token, class Call>
auto async_plain(client::Connection& c, Call call, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, bool)>(
      [&c, call](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = loop_executor(c);
        call(c, [h, loop](const Error* e, const wire::Method*) { complete(h, loop, e ? e->code : std::error_code{}, e == nullptr); });
      },
      token);
}
}  // namespace detail

template <class Token>
auto async_exchange_declare(client::Connection& c, engine::ChannelId ch, const wire::ExchangeDeclare& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.exchange_declare(ch, m, done); }, token);
}
template <class Token>
auto async_exchange_delete(client::Connection& c, engine::ChannelId ch, const wire::ExchangeDelete& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.exchange_delete(ch, m, done); }, token);
}
template <class Token>
auto async_exchange_bind(client::Connection& c, engine::ChannelId ch, const wire::ExchangeBind& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.exchange_bind(ch, m, done); }, token);
}
template <class Token>
auto async_exchange_unbind(client::Connection& c, engine::ChannelId ch, const wire::ExchangeUnbind& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.exchange_unbind(ch, m, done); }, token);
}
template <class Token>
auto async_queue_bind(client::Connection& c, engine::ChannelId ch, const wire::QueueBind& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.queue_bind(ch, m, done); }, token);
}
template <class Token>
auto async_queue_unbind(client::Connection& c, engine::ChannelId ch, const wire::QueueUnbind& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.queue_unbind(ch, m, done); }, token);
}
template <class Token>
auto async_queue_purge(client::Connection& c, engine::ChannelId ch, const wire::QueuePurge& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.queue_purge(ch, m, done); }, token);
}
template <class Token>
auto async_queue_delete(client::Connection& c, engine::ChannelId ch, const wire::QueueDelete& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.queue_delete(ch, m, done); }, token);
}
template <class Token>
auto async_basic_qos(client::Connection& c, engine::ChannelId ch, const wire::BasicQos& m, Token&& token) {
  return detail::async_plain(c, [ch, m](client::Connection& cc, auto done) { cc.basic_qos(ch, m, done); }, token);
}
template <class Token>
auto async_close_channel(client::Connection& c, engine::ChannelId ch, Token&& token) {
  return detail::async_plain(c, [ch](client::Connection& cc, auto done) { cc.close_channel(ch, done); }, token);
}

// basic.get: completes with the message copied out, or nullopt when the queue was empty.
template <class Token>
auto async_get(client::Connection& c, engine::ChannelId ch, const wire::BasicGet& m, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, std::optional<OwnedMessage>)>(
      [&c, ch, m](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = detail::loop_executor(c);
        c.get(ch, m, [h, loop](const Error* e, const engine::Message* msg) {
          std::optional<OwnedMessage> out;
          if (msg) {
            OwnedMessage o;
            o.delivery_tag = msg->delivery_tag;
            o.redelivered = msg->redelivered;
            o.exchange = std::string(msg->exchange);
            o.routing_key = std::string(msg->routing_key);
            if (msg->properties && msg->properties->correlation_id) o.correlation_id = std::string(*msg->properties->correlation_id);
            if (msg->properties && msg->properties->reply_to) o.reply_to = std::string(*msg->properties->reply_to);
            o.body.assign(reinterpret_cast<const char*>(msg->body.data()), msg->body.size());
            out = std::move(o);
          }
          detail::complete(h, loop, e ? e->code : std::error_code{}, std::move(out));
        });
      },
      token);
}

template <class Token>
auto async_confirm_select(client::Connection& c, engine::ChannelId channel, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, bool)>(
      [&c, channel](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = detail::loop_executor(c);
        c.confirm_select(channel, [h, loop](const Error* e, const wire::Method*) {
          detail::complete(h, loop, e ? e->code : std::error_code{}, e == nullptr);
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
        auto loop = detail::loop_executor(c);
        c.publish(channel, m, properties, body, [h, loop](engine::PublishOutcome o, const Error& e) {
          detail::complete(h, loop, e.code, o);
        });
      },
      token);
}

template <class Token>
auto async_close(client::Connection& c, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, bool)>(
      [&c](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto loop = detail::loop_executor(c);
        c.close([h, loop](const Error* e) { detail::complete(h, loop, e ? e->code : std::error_code{}, e == nullptr); });
      },
      token);
}

}  // namespace warren::asio_driver

// The quick start on Asio coroutines: connect, declare a queue, publish with a confirm,
// receive it with `co_await consumer.receive(...)`, ack it, close. Every step yields a
// warren::Result: the value, or the whole Error (the broker's reply code and text) to hand
// up. No exceptions (asio_quick_start.cpp is the same with value(), which throws).
// Usage: asio_coroutine [URL]   (else $WARREN_URL, else the local broker)
#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <cstdio>
#include <cstdlib>

#include <warren/asio/async.hpp>

asio::awaitable<warren::Result<void>> quick_start(warren::asio_driver::AsioDriver& driver, warren::client::ConnectionUrl url) {
  auto conn = co_await warren::asio_driver::async_connect(driver, url, asio::use_awaitable);
  if (!conn) co_return conn.error();
  auto ch = co_await warren::asio_driver::async_open_channel(*conn, asio::use_awaitable);
  if (!ch) co_return ch.error();
  auto queue = co_await ch->queue_declare({.exclusive = true}, asio::use_awaitable);  // the broker names it
  if (!queue) co_return queue.error();
  if (auto confirming = co_await ch->confirm_select(asio::use_awaitable); !confirming) co_return confirming.error();
  // Completes once the broker confirmed it (or with why not: nacked, unroutable, timeout).
  auto sent = co_await ch->publish({.routing_key = queue->name}, "hello", asio::use_awaitable);
  if (!sent) co_return sent.error();
  auto consumer = co_await ch->consume({.queue = queue->name}, asio::use_awaitable);
  if (!consumer) co_return consumer.error();
  auto message = co_await consumer->receive(asio::use_awaitable);  // an owned message
  if (!message) co_return message.error();
  std::printf("received \"%.*s\"\n", static_cast<int>(message->body_text().size()), message->body_text().data());
  if (auto acked = message->ack(); !acked) co_return acked.error();
  co_return co_await warren::asio_driver::async_close(*conn, asio::use_awaitable);
}

int main(int argc, char** argv) {
  const char* text = argc > 1 ? argv[1] : std::getenv("WARREN_URL");
  auto url = warren::client::parse_url(text ? text : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;
  asio::io_context io;
  warren::asio_driver::AsioDriver driver(io);
  auto done = asio::co_spawn(io, quick_start(driver, *url), asio::use_future);
  io.run();  // returns once the coroutine is done and the connection closed
  if (auto r = done.get(); !r) return std::fprintf(stderr, "failed: %s\n", r.error().to_string().c_str()), 1;
}

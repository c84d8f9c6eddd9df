// The quick start on Asio coroutines: connect, declare a queue, publish with a confirm, receive
// it, ack it, close. value() throws warren::BadResultAccess (a std::system_error carrying the
// whole warren::Error) when a step fails; asio_coroutine.cpp is the same without exceptions.
// Usage: asio_quick_start [URL]
#include <asio/co_spawn.hpp>
#include <cstdio>
#include <warren/asio/async.hpp>

using namespace warren;
using asio::use_awaitable;

asio::awaitable<void> quick_start(asio_driver::AsioDriver& driver, client::ConnectionUrl url) {
  auto conn = (co_await asio_driver::async_connect(driver, url, use_awaitable)).value();
  auto ch = (co_await asio_driver::async_open_channel(*conn, use_awaitable)).value();
  auto queue = (co_await ch.queue_declare({.exclusive = true}, use_awaitable)).value();  // named by the broker
  (co_await ch.confirm_select(use_awaitable)).value();
  (co_await ch.publish({.routing_key = queue.name}, "hello", use_awaitable)).value();  // confirmed
  auto consumer = (co_await ch.consume({.queue = queue.name}, use_awaitable)).value();
  auto message = (co_await consumer.receive(use_awaitable)).value();
  std::printf("received \"%.*s\"\n", static_cast<int>(message.body_text().size()), message.body_text().data());
  message.ack().value();
  (co_await asio_driver::async_close(*conn, use_awaitable)).value();
}

int main(int argc, char** argv) try {
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  auto url = client::parse_url(argc > 1 ? argv[1] : "amqp://guest:guest@127.0.0.1:5672/%2f").value();
  asio::co_spawn(io, quick_start(driver, url), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();  // rethrows what the coroutine threw
} catch (const std::exception& e) { return std::fprintf(stderr, "%s\n", e.what()), 1; }

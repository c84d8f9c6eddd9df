// A short Asio coroutine program: publish 10 messages and await each confirm, consume them
// with acks, close. Usage: asio_coroutine [URL]   (default amqp://guest:guest@127.0.0.1:5672/%2f)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdio>
#include <string>

#include <warren/asio/async.hpp>

using namespace warren;

int main(int argc, char** argv) {
  auto url = client::parse_url(argc > 1 ? argv[1] : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url.ok()) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  int status = 1;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto conn = co_await asio_driver::async_connect(driver, *url, {}, asio::use_awaitable);
        auto ch = co_await asio_driver::async_open_channel(*conn, asio::use_awaitable);
        co_await asio_driver::async_confirm_select(*conn, ch, asio::use_awaitable);
        auto q = co_await asio_driver::async_queue_declare(*conn, ch, wire::QueueDeclare{"", false, false, true, true},
                                                           asio::use_awaitable);
        int confirmed = 0;
        for (int i = 0; i < 10; ++i) {
          std::string body = "message " + std::to_string(i);
          auto outcome = co_await asio_driver::async_publish(*conn, ch, wire::BasicPublish{"", q.name}, {},
                                                             std::as_bytes(std::span{body.data(), body.size()}), asio::use_awaitable);
          confirmed += outcome == engine::PublishOutcome::confirmed;
        }
        int received = 0;
        conn->consume(ch, wire::BasicConsume{q.name}, std::nullopt,
                      [&](const engine::Message& m) {
                        ++received;
                        (void)conn->ack(m.channel, m.delivery_tag);
                      },
                      [](const Error*, const wire::Method*) {});
        asio::steady_timer wait(io);
        while (received < 10) {  // deliveries arrive through the callback; poll them in
          wait.expires_after(std::chrono::milliseconds(5));
          co_await wait.async_wait(asio::use_awaitable);
        }
        std::printf("%d confirmed, %d received\n", confirmed, received);
        co_await asio_driver::async_close(*conn, asio::use_awaitable);
        status = confirmed == 10 && received == 10 ? 0 : 1;
      },
      [](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          std::fprintf(stderr, "failed: %s\n", x.what());
        }
      });
  io.run();  // returns once the coroutine has finished and the connection is closed
  return status;
}

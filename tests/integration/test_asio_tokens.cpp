// Completion tokens on the Asio driver against the real broker: a C++20 coroutine that
// connects, declares, publishes with confirms and closes with `co_await ... use_awaitable`;
// asio::use_future from another thread, with work handed to the loop through post().
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <thread>

#include "support/broker_env.hpp"
#include "warren/asio/async.hpp"
#include "warren/engine/describe.hpp"

namespace warren::test {
namespace {

using namespace warren::wire;
using asio_driver::AsioDriver;

client::ConnectionUrl url() { return *client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f"); }

TEST(AsioTokens, a_coroutine_declares_publishes_and_closes) {
  asio::io_context io;
  AsioDriver driver(io);
  std::vector<std::string> log;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto conn = co_await asio_driver::async_connect(driver, url(), {}, asio::use_awaitable);
        auto ch = co_await asio_driver::async_open_channel(*conn, asio::use_awaitable);
        co_await asio_driver::async_confirm_select(*conn, ch, asio::use_awaitable);
        auto q = co_await asio_driver::async_queue_declare(*conn, ch, QueueDeclare{"", false, false, true, true}, asio::use_awaitable);
        log.push_back(q.name.rfind("amq.gen-", 0) == 0 ? "declared" : "bad name " + q.name);
        std::string body = "from a coroutine";
        auto outcome = co_await asio_driver::async_publish(*conn, ch, BasicPublish{"", q.name}, {},
                                                           std::as_bytes(std::span{body.data(), body.size()}), asio::use_awaitable);
        log.push_back(std::string(engine::to_string(outcome)));
        try {
          co_await asio_driver::async_queue_declare(*conn, ch, QueueDeclare{"warren-no-such-queue", true}, asio::use_awaitable);
          log.push_back("declared a missing queue?");
        } catch (const std::system_error& e) {
          log.push_back(e.code() == errc::not_found ? "404 as an exception" : e.what());
        }
        // The channel closed with the 404; the rest of the verbs on a fresh one.
        auto ch2 = co_await asio_driver::async_open_channel(*conn, asio::use_awaitable);
        co_await asio_driver::async_exchange_declare(*conn, ch2, ExchangeDeclare{"warren-token-x", "direct"}, asio::use_awaitable);
        co_await asio_driver::async_queue_bind(*conn, ch2, QueueBind{q.name, "warren-token-x", "k"}, asio::use_awaitable);
        co_await asio_driver::async_basic_qos(*conn, ch2, BasicQos{0, 10, false}, asio::use_awaitable);
        auto got = co_await asio_driver::async_get(*conn, ch2, BasicGet{q.name, true}, asio::use_awaitable);
        log.push_back(got ? "got: " + got->body : "empty");
        auto none = co_await asio_driver::async_get(*conn, ch2, BasicGet{q.name, true}, asio::use_awaitable);
        log.push_back(none ? "not empty?" : "then empty");
        co_await asio_driver::async_queue_unbind(*conn, ch2, QueueUnbind{q.name, "warren-token-x", "k"}, asio::use_awaitable);
        co_await asio_driver::async_exchange_delete(*conn, ch2, ExchangeDelete{"warren-token-x"}, asio::use_awaitable);
        co_await asio_driver::async_queue_purge(*conn, ch2, QueuePurge{q.name}, asio::use_awaitable);
        co_await asio_driver::async_queue_delete(*conn, ch2, QueueDelete{q.name}, asio::use_awaitable);
        co_await asio_driver::async_close_channel(*conn, ch2, asio::use_awaitable);
        co_await asio_driver::async_close(*conn, asio::use_awaitable);
        log.push_back("closed");
      },
      asio::detached);
  io.run();  // returns once the coroutine is done and the connection closed
  EXPECT_EQ(log, (std::vector<std::string>{"declared", "confirmed", "404 as an exception", "got: from a coroutine",
                                           "then empty", "closed"}));
}

// A plain callback has no executor of its own: it completes on the connection's loop, so it
// may call the client again (finding 6: it ran on Asio's system executor, another thread).
TEST(AsioTokens, a_plain_callback_completes_on_the_loop_thread) {
  asio::io_context io;
  AsioDriver driver(io);
  std::vector<std::thread::id> seen;
  std::shared_ptr<client::Connection> conn;
  asio_driver::async_connect(driver, url(), {}, [&](std::error_code ec, std::shared_ptr<client::Connection> c) {
    seen.push_back(std::this_thread::get_id());
    ASSERT_FALSE(ec) << ec.message();
    conn = c;
    asio_driver::async_open_channel(*conn, [&](std::error_code ec, engine::ChannelId) {
      seen.push_back(std::this_thread::get_id());
      EXPECT_FALSE(ec) << ec.message();
      asio_driver::async_close(*conn, [&](std::error_code, bool) { seen.push_back(std::this_thread::get_id()); });
    });
  });
  io.run();
  ASSERT_EQ(seen.size(), 3u);
  for (auto id : seen) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(AsioTokens, use_future_from_another_thread) {
  asio::io_context io;
  AsioDriver driver(io);
  auto guard = asio::make_work_guard(io);
  std::thread loop([&] { io.run(); });
  // The connection belongs to the loop thread; this thread hands work in with post(), the
  // connect included (dialled from here, the stream could report before dial() returned).
  std::promise<std::future<std::shared_ptr<client::Connection>>> connecting;
  driver.post([&] { connecting.set_value(asio_driver::async_connect(driver, url(), {}, asio::use_future)); });
  auto conn = connecting.get_future().get().get();
  ASSERT_NE(conn, nullptr);
  std::promise<std::future<engine::ChannelId>> opening;
  driver.post([&] { opening.set_value(asio_driver::async_open_channel(*conn, asio::use_future)); });
  auto ch = opening.get_future().get().get();
  EXPECT_EQ(ch, 1);
  std::promise<std::future<asio_driver::QueueInfo>> declaring;
  driver.post([&] {
    declaring.set_value(asio_driver::async_queue_declare(*conn, ch, QueueDeclare{"", false, false, true, true}, asio::use_future));
  });
  auto info = declaring.get_future().get().get();
  EXPECT_EQ(info.name.rfind("amq.gen-", 0), 0u);
  std::promise<std::future<bool>> closing;
  driver.post([&] { closing.set_value(asio_driver::async_close(*conn, asio::use_future)); });
  EXPECT_TRUE(closing.get_future().get().get());
  guard.reset();
  driver.post([&] { conn.reset(); });
  loop.join();
}

}  // namespace
}  // namespace warren::test

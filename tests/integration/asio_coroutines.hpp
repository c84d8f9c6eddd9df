// What the Asio coroutine tests share: the test broker's URL, assertions a coroutine can make
// (gtest's ASSERT_* returns, which a coroutine may not: these fail the test and co_return), and
// a runner that drives one coroutine on a fresh loop until it and every connection it opened
// are done, within a limit.
#pragma once

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <functional>

#include "support/broker_env.hpp"
#include "warren/asio/asio_driver.hpp"
#include "warren/client/url.hpp"

namespace warren::test {

inline client::ConnectionUrl url() { return *client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f"); }

#define CO_ASSERT_OK(result)                                            \
  do {                                                                  \
    if (!(result)) {                                                    \
      ADD_FAILURE() << #result << ": " << (result).error().to_string(); \
      co_return;                                                        \
    }                                                                   \
  } while (0)
#define CO_ASSERT_TRUE(condition)               \
  do {                                          \
    if (!(condition)) {                         \
      ADD_FAILURE() << #condition << " failed"; \
      co_return;                                \
    }                                           \
  } while (0)

inline void run_coroutine(const std::function<asio::awaitable<void>(asio_driver::AsioDriver&)>& body,
                          std::chrono::seconds limit) {
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  bool finished = false;
  asio::co_spawn(io, body(driver), [&](std::exception_ptr e) {
    finished = true;
    if (e) std::rethrow_exception(e);
  });
  io.run_for(limit);
  EXPECT_TRUE(finished) << "the coroutine did not finish within " << limit.count() << " s";
}

}  // namespace warren::test

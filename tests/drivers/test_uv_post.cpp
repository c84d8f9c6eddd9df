// Driver::post into a libuv loop from another thread, when the loop has nothing else to do.
// Posting does not keep a loop alive (a finished program must exit), so such a loop needs
// UvDriver::keep_alive(), libuv's counterpart of Asio's work guard.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "warren/uv/uv_driver.hpp"

namespace warren::test {
namespace {

// A loop and its driver, closed in order: the driver's handles are freed by the loop.
struct UvLoop {
  uv_loop_t loop;
  std::unique_ptr<uv::UvDriver> driver;
  UvLoop() {
    uv_loop_init(&loop);
    driver = std::make_unique<uv::UvDriver>(&loop);
  }
  ~UvLoop() {
    driver.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
};

// Finding 12: a loop with nothing open returned from uv_run at once, so work posted to it
// from another thread waited for a uv_run that might never come.
TEST(UvPost, a_keep_alive_holds_an_idle_loop_for_posts_from_another_thread) {
  UvLoop l;
  auto guard = l.driver->keep_alive();
  std::atomic<int> ran{0};
  std::thread poster([&] {
    for (int i = 0; i < 1000; ++i) l.driver->post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    guard.reset();  // from this thread: the release is posted after the work
  });
  uv_run(&l.loop, UV_RUN_DEFAULT);  // returns once the guard is released and nothing is left
  poster.join();
  EXPECT_EQ(ran.load(), 1000);
}

// Without one, the loop is free to return: a program whose work is done exits.
TEST(UvPost, without_a_keep_alive_a_loop_with_nothing_open_returns) {
  UvLoop l;
  EXPECT_EQ(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
}

}  // namespace
}  // namespace warren::test

// Driver::post is the documented way into a connection from another thread. A publisher
// thread hands 100,000 publishes in while the loop thread consumes them; every one arrives,
// on both drivers. scripts/test.sh also runs this under ThreadSanitizer (WARREN_CROSS_THREAD_COUNT
// lowers the count there).
#include <atomic>
#include <cstdlib>
#include <thread>

#include "integration/client_fixture.hpp"

namespace warren::test {
namespace {

using namespace warren::client;

int message_count() {
  const char* v = std::getenv("WARREN_CROSS_THREAD_COUNT");
  return v && *v ? std::atoi(v) : 100000;
}

TEST_P(ClientSuite, a_publisher_thread_hands_in_publishes_while_the_loop_consumes) {
  const int total = message_count();
  auto ch = open();
  auto q = temp_queue(ch);
  std::atomic<int> received{0};
  auto consumer = wait<Consumer>([&](auto done) {
    ch.consume({.queue = q, .tag = "cross-thread", .auto_ack = true},
               [&](const Delivery&) { received.fetch_add(1, std::memory_order_relaxed); }, done);
  });
  ASSERT_TRUE(consumer.ok()) << said(consumer);
  std::atomic<int> refused{0};
  auto& driver = loop.driver();
  std::thread publisher([&driver, ch, q, total, &refused] {
    for (int i = 0; i < total; ++i) {
      driver.post([ch, q, &refused] {
        static const std::string body = "from another thread";
        if (!ch.publish({.routing_key = q}, text(body)).ok()) refused.fetch_add(1);
      });
      if (i % 1000 == 999) std::this_thread::yield();  // let the loop drain as it goes
    }
  });
  const bool all = loop.run_until([&] { return received.load() + refused.load() >= total; }, 120s);
  publisher.join();
  loop.run_until([] { return false; }, 10ms);  // whatever the publisher posted last
  ASSERT_TRUE(all) << received.load() << " of " << total << " arrived";
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(received.load(), total);
}

INSTANTIATE_TEST_SUITE_P(Drivers, ClientSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

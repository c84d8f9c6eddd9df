// A Message is settled on the loop whatever thread acks it. The one client test that uses a
// second thread, so it is a program of its own: the test command's ThreadSanitizer lane builds
// this file, not the single-threaded client suites, where TSan has no race to see.
#include <gtest/gtest.h>

#include <thread>

#include "client/open_channel.hpp"
#include "client/world_channel.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {
namespace {

using OffLoopAck = WorldChannelTest;

// A Message is owned and may be acked on any thread: from another thread the ack is handed to
// the loop (nothing is written from that thread) and goes out when the loop runs it. A
// Message whose channel is gone is refused with channel_closed, on the loop or off it, and
// sends nothing: its delivery tag would name a delivery of the channel reusing the number.
TEST_F(OffLoopAck, a_message_acked_from_another_thread_is_sent_on_the_loop_and_one_of_a_gone_channel_sends_nothing) {
  std::vector<client::Message> kept;
  auto consumer = keep_all("q", kept);
  fill("q", 4);
  ASSERT_EQ(kept.size(), 4u);

  Result<void> off_loop = make_error(errc::timeout, "not run");
  std::thread([&] { off_loop = kept[0].ack(); }).join();
  EXPECT_TRUE(off_loop.ok()) << off_loop.error().to_string();
  EXPECT_TRUE(broker().settles.empty()) << "the ack was written from the other thread";
  driver.run();
  EXPECT_EQ(broker().settles, (std::vector<FakeBroker::Settle>{{"basic.ack", ch.id(), 1, false}}));

  // The broker closes the channel while the other thread's ack is on its way to the loop: the
  // ack was accepted, and the loop sends nothing once the channel is known to be gone.
  broker().close_channel(ch.id(), 406, "PRECONDITION_FAILED - inequivalent arg");
  std::thread([&] { off_loop = kept[1].ack(); }).join();
  EXPECT_TRUE(off_loop.ok());
  driver.run();
  ASSERT_FALSE(ch.is_open());
  auto fresh = open_channel_now(driver, *conn);
  ASSERT_EQ(fresh.id(), ch.id());
  std::vector<client::Message> on_fresh;
  ch = fresh;
  auto fresh_consumer = keep_all("q", on_fresh);  // the redelivered messages: tags 1, 2, 3 again
  ASSERT_EQ(on_fresh.size(), 3u);
  const auto methods_before = broker().methods;
  const auto settles_before = broker().settles;

  auto on_loop = kept[2].ack();
  ASSERT_FALSE(on_loop.ok());
  EXPECT_EQ(on_loop.error().code, make_error_code(errc::channel_closed));
  std::thread([&] { off_loop = kept[3].ack(); }).join();
  ASSERT_FALSE(off_loop.ok());
  EXPECT_EQ(off_loop.error().code, make_error_code(errc::channel_closed));
  driver.run();
  EXPECT_EQ(broker().methods, methods_before);
  EXPECT_EQ(broker().settles, settles_before);
  EXPECT_TRUE(fresh.is_open());
  EXPECT_EQ(world.queues["q"].size(), 0u);  // nothing of the fresh channel's was settled by the stale tags
}

}  // namespace
}  // namespace warren::test

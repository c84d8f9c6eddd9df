// Frame writing: a content message as one unit, bodies split at frame_max, refused writes
// leave the queue untouched, and the output queue's blocks and gathered views.
#include <gtest/gtest.h>

#include "support/encode.hpp"
#include "support/frames.hpp"

namespace warren::wire {
namespace {

using test::from_hex;
using test::to_hex;

TEST(FrameWriter, PublishIsMethodHeaderAndBodyFrames) {
  OutputQueue q;
  ASSERT_TRUE(write_content(q, 1, BasicPublish{"", "q"}, BasicProperties{}, test::as_bytes("hi"), 131072).ok());
  EXPECT_EQ(to_hex(q.to_vector()), to_hex(from_hex(
      "01 0001 0000000a 003c0028 0000 00 01 71 00 ce"
      " 02 0001 0000000e 003c 0000 0000000000000002 0000 ce"
      " 03 0001 00000002 6869 ce")));
}

TEST(FrameWriter, EmptyBodyHasNoBodyFrame) {
  OutputQueue q;
  ASSERT_TRUE(write_content(q, 1, BasicPublish{"", "q"}, BasicProperties{}, {}, 131072).ok());
  auto run = test::decode_in_pieces(q.to_vector(), {});
  ASSERT_EQ(run.frames.size(), 2u);
}

TEST(FrameWriter, BodiesSplitAtFrameMax) {
  std::string body(10000, 'z');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  OutputQueue q;
  ASSERT_TRUE(write_content(q, 9, BasicPublish{"x", "k"}, BasicProperties{}, test::as_bytes(body), 4096).ok());
  auto run = test::decode_in_pieces(q.to_vector(), {}, FrameDecoder(FrameDecoder::Peer::broker, 4096));
  ASSERT_FALSE(run.error);
  ASSERT_EQ(run.frames.size(), 5u);  // method, header, 4088 + 4088 + 1824
  std::string joined;
  for (std::size_t i = 2; i < run.frames.size(); ++i) {
    EXPECT_EQ(run.frames[i].type, FrameType::body);
    EXPECT_EQ(run.frames[i].channel, 9);
    joined += run.frames[i].payload_hex;
  }
  EXPECT_EQ(run.frames[2].payload_hex.size() / 2, 4088u);
  EXPECT_EQ(run.frames[4].payload_hex.size() / 2, 1824u);
  EXPECT_EQ(joined, to_hex(test::as_bytes(body)));
}

TEST(FrameWriter, ARefusedWriteQueuesNothing) {
  OutputQueue q;
  write_heartbeat(q);
  std::string long_key(256, 'k');
  auto r = write_content(q, 1, BasicPublish{"", long_key}, BasicProperties{}, test::as_bytes("x"), 131072);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::string_too_long);
  EXPECT_EQ(q.size_bytes(), frame_overhead_bytes);

  FieldTable big;
  big.set("k", std::string(5000, 'v'));
  auto frame = write_method_frame(q, 1, QueueDeclare{"q", false, false, false, false, false, big}, 4096);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.error().code, errc::frame_too_large);
  EXPECT_EQ(q.size_bytes(), frame_overhead_bytes);
}

TEST(OutputQueue, ViewsGatherBlocksAndConsumeRecyclesThem) {
  OutputQueue q;
  std::vector<std::byte> chunk(OutputQueue::block_bytes / 2 + 1, std::byte{7});
  for (int i = 0; i < 5; ++i) q.append(chunk);
  EXPECT_EQ(q.size_bytes(), 5 * chunk.size());
  auto v = q.view();
  EXPECT_EQ(v.bytes, q.size_bytes());
  // The small first block, then standard ones: 4 KiB + 64 KiB + 64 KiB + the rest.
  EXPECT_EQ(v.count, 4u);
  std::size_t total = 0;
  for (auto part : v) total += part.size();
  EXPECT_EQ(total, v.bytes);
  q.consume(OutputQueue::block_bytes + 10);
  EXPECT_EQ(q.size_bytes(), 5 * chunk.size() - OutputQueue::block_bytes - 10);
  q.consume(q.size_bytes());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.view().count, 0u);
  auto* p = q.append_contiguous(4);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(q.size_bytes(), 4u);
}

// An idle connection holds no write buffer: once everything queued was written, its blocks,
// spare ones included, go back; while anything is queued, nothing does.
TEST(OutputQueue, ReleaseWhenEmptyFreesEveryBlockOnlyWhenEmpty) {
  OutputQueue q;
  std::vector<std::byte> block(OutputQueue::block_bytes, std::byte{1});
  for (int i = 0; i < 3; ++i) q.append(block);
  q.consume(2 * OutputQueue::block_bytes);
  q.release_when_empty();
  EXPECT_EQ(q.size_bytes(), OutputQueue::block_bytes);
  EXPECT_GE(q.held_bytes(), OutputQueue::block_bytes);
  q.consume(q.size_bytes());
  EXPECT_GE(q.held_bytes(), 3 * OutputQueue::block_bytes);  // recycled, for the next burst
  q.release_when_empty();
  EXPECT_EQ(q.held_bytes(), 0u);
  q.append(block);  // and it works on as before
  EXPECT_EQ(q.view().bytes, OutputQueue::block_bytes);
}

TEST(OutputQueue, ViewIsCappedAtMaxParts) {
  OutputQueue q;
  std::vector<std::byte> block(OutputQueue::block_bytes, std::byte{1});
  for (std::size_t i = 0; i < OutputView::max_parts + 4; ++i) q.append(block);
  auto v = q.view();
  EXPECT_EQ(v.count, OutputView::max_parts);
  // The first part is the small first block; the others are whole standard blocks.
  EXPECT_EQ(v.parts[0].size(), OutputQueue::first_block_bytes);
  EXPECT_EQ(v.bytes, OutputQueue::first_block_bytes + (OutputView::max_parts - 1) * OutputQueue::block_bytes);
}

TEST(OutputQueue, AnOversizedPieceGetsItsOwnBlock) {
  OutputQueue q;
  auto* p = q.append_contiguous(OutputQueue::block_bytes * 2);
  std::fill(p, p + OutputQueue::block_bytes * 2, std::byte{3});
  EXPECT_EQ(q.view().count, 1u);
  EXPECT_EQ(q.view().bytes, OutputQueue::block_bytes * 2);
}

}  // namespace
}  // namespace warren::wire

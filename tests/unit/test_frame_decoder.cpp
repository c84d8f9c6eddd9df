// The resumable frame decoder: whole frames without a copy, any split of the stream, size
// checked before buffering, every framing error latched.
#include <gtest/gtest.h>

#include "support/encode.hpp"
#include "support/frames.hpp"

namespace warren::wire {
namespace {

using test::decode_in_pieces;
using test::from_hex;

std::vector<std::byte> sample_stream() {
  OutputQueue q;
  EXPECT_TRUE(write_method_frame(q, 0, ConnectionTune{2047, 131072, 60}, 131072).ok());
  std::string body(300, 'b');
  EXPECT_TRUE(write_content(q, 1, BasicDeliver{"ctag", 1, false, "", "q"}, BasicProperties{},
                            test::as_bytes(body), 4096).ok());
  write_heartbeat(q);
  EXPECT_TRUE(write_method_frame(q, 2, BasicAck{9, true}, 4096).ok());
  return q.to_vector();
}

TEST(FrameDecoder, WholeFrameIsAViewIntoTheInput) {
  auto bytes = test::encode_frame(3, BasicAck{1, false});
  FrameDecoder d;
  d.feed(bytes);
  auto r = d.next();
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->type, FrameType::method);
  EXPECT_EQ((*r)->channel, 3);
  EXPECT_EQ((*r)->payload.data(), bytes.data() + frame_header_bytes);
  EXPECT_EQ(d.buffered_bytes(), 0u);
  auto end = d.next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(FrameDecoder, EverySplitYieldsTheSameFrames) {
  auto stream = sample_stream();
  auto whole = decode_in_pieces(stream, {});
  ASSERT_FALSE(whole.error);
  ASSERT_EQ(whole.frames.size(), 6u);  // tune, deliver, header, body, heartbeat, ack
  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    auto split = decode_in_pieces(stream, {cut});
    ASSERT_FALSE(split.error) << "cut at " << cut;
    ASSERT_EQ(split.frames, whole.frames) << "cut at " << cut;
  }
  std::vector<std::size_t> every_byte;
  for (std::size_t i = 1; i < stream.size(); ++i) every_byte.push_back(i);
  EXPECT_EQ(decode_in_pieces(stream, every_byte).frames, whole.frames);
}

TEST(FrameDecoder, BuffersOnlyWhatAnIncompleteFrameNeeds) {
  auto stream = sample_stream();
  FrameDecoder d;
  auto first = test::encode_frame(0, ConnectionTune{2047, 131072, 60});
  d.feed(std::span(stream).first(first.size() + 3));  // tune and 3 bytes of the next frame
  auto r = d.next();
  ASSERT_TRUE(r.ok() && r->has_value());
  auto more = d.next();
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(more->has_value());
  EXPECT_EQ(d.buffered_bytes(), 3u);
}

// An idle connection holds input only while a frame is incomplete: a 100 KB frame that came
// in two reads is buffered while it is incomplete, and its room is given back once the frame
// was handed out.
TEST(FrameDecoder, ALargeFrameSplitAcrossReadsIsNotHeldOnceHandedOut) {
  OutputQueue q;
  const std::string body(100'000, 'b');
  ASSERT_TRUE(write_content(q, 1, BasicDeliver{"ctag", 1, false, "", "q"}, BasicProperties{}, test::as_bytes(body),
                            131072).ok());
  const auto stream = q.to_vector();
  FrameDecoder d;
  d.set_frame_max(131072);
  const std::size_t half = stream.size() / 2;
  d.feed(std::span(stream).first(half));
  std::size_t frames = 0;
  for (auto r = d.next(); r.ok() && r->has_value(); r = d.next()) ++frames;
  EXPECT_EQ(frames, 2u);  // deliver and header; the body is incomplete
  EXPECT_GE(d.held_bytes(), half - 100);
  d.feed(std::span(stream).subspan(half));
  auto last = d.next();
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->payload.size(), body.size());
  auto end = d.next();  // the body frame handed out: its room goes back
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(d.held_bytes(), 0u);
}

// The frame decoder fuzzer's old out-of-memory input (now in its corpus as
// regression-4gb-size-claim-without-frame-max): with no frame_max in force, a header that
// claims a 4 GiB frame must not make the decoder reserve it. It buffers what came, no more.
TEST(FrameDecoder, AHugeSizeClaimWithoutFrameMaxBuffersOnlyWhatArrived) {
  FrameDecoder d(FrameDecoder::Peer::broker, 0);
  auto stream = from_hex("01 0000 f4fffc00 28 052f 7072 006f 6400 00ce");
  for (std::size_t at = 0; at < stream.size(); at += 7) {  // the fuzzer's cut: 7 bytes at a time
    d.feed(std::span(stream).subspan(at, std::min<std::size_t>(7, stream.size() - at)));
    auto r = d.next();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_FALSE(r->has_value());
  }
  EXPECT_EQ(d.buffered_bytes(), stream.size());
}

TEST(FrameDecoder, SizeIsCheckedBeforeBuffering) {
  FrameDecoder d(FrameDecoder::Peer::broker, 4096);
  auto header = from_hex("03 0001 00001000");  // a body frame of 4096 + 8 bytes
  d.feed(std::span(header).first(5));
  ASSERT_TRUE(d.next().ok());
  d.feed(std::span(header).subspan(5));
  auto r = d.next();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::frame_too_large);
  EXPECT_EQ(r.error().detail, "frame of 4104 bytes exceeds frame_max 4096");
  EXPECT_EQ(d.buffered_bytes(), 0u);
}

TEST(FrameDecoder, AFrameExactlyAtFrameMaxIsAccepted) {
  OutputQueue q;
  std::string body(4096 - frame_overhead_bytes, 'x');
  ASSERT_TRUE(write_content(q, 1, BasicPublish{}, {}, test::as_bytes(body), 4096).ok());
  auto run = decode_in_pieces(q.to_vector(), {}, FrameDecoder(FrameDecoder::Peer::broker, 4096));
  EXPECT_FALSE(run.error);
  EXPECT_EQ(run.frames.size(), 3u);
}

struct BadFrame {
  const char* name;
  const char* hex;
  errc code;
  const char* detail;
};

TEST(FrameDecoder, RefusesBadFramesWithAClearError) {
  std::vector<BadFrame> cases = {
      {"unknown type", "04 0000 00000000 ce", errc::unknown_frame_type, "frame type 0x04 is not 1, 2, 3 or 8"},
      {"wrong end byte", "01 0001 00000004 003c000b 41", errc::bad_frame_end, "frame end byte 0x41 is not 0xCE"},
      {"method too small", "01 0001 00000003 003c00 ce", errc::frame_too_small,
       "method frame of 3 bytes has no class and method id"},
      {"header too small", "02 0001 00000004 003c0000 ce", errc::frame_too_small,
       "content header frame of 4 bytes is shorter than 14"},
      {"heartbeat with payload", "08 0000 00000001 00 ce", errc::malformed_payload, "heartbeat frame carries 1 bytes"},
      {"heartbeat off channel 0", "08 0005 00000000 ce", errc::protocol_error, "heartbeat frame on channel 5"},
      {"method larger than frame_max", "01 0001 00001000", errc::frame_too_large,
       "frame of 4104 bytes exceeds frame_max 4096"},
      // A header with two problems: an unknown type is reported first, then a size over
      // frame_max, then the type's own rules.
      {"unknown type larger than frame_max", "05 0001 00001000", errc::unknown_frame_type,
       "frame type 0x05 is not 1, 2, 3 or 8"},
      {"heartbeat with a payload larger than frame_max", "08 0000 00001000", errc::frame_too_large,
       "frame of 4104 bytes exceeds frame_max 4096"},
      {"heartbeat off channel 0 larger than frame_max", "08 0005 00001000", errc::frame_too_large,
       "frame of 4104 bytes exceeds frame_max 4096"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto run = decode_in_pieces(from_hex(c.hex), {});
    ASSERT_TRUE(run.error);
    EXPECT_EQ(run.error->code, c.code);
    EXPECT_EQ(run.error->detail, c.detail);
    EXPECT_EQ(run.error->to_string().find(c.detail) != std::string::npos, true);
  }
}

// frame_max applies to every frame, a heartbeat's eight bytes included (the decoder takes any
// limit; the engine itself never negotiates one under 4096).
TEST(FrameDecoder, ChecksEvenAnEmptyHeartbeatAgainstFrameMax) {
  auto run = decode_in_pieces(from_hex("08 0000 00000000 ce"), {}, FrameDecoder(FrameDecoder::Peer::broker, 7));
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, errc::frame_too_large);
  EXPECT_EQ(run.error->detail, "frame of 8 bytes exceeds frame_max 7");
  auto fits = decode_in_pieces(from_hex("08 0000 00000000 ce"), {}, FrameDecoder(FrameDecoder::Peer::broker, 8));
  EXPECT_FALSE(fits.error);
  EXPECT_EQ(fits.frames.size(), 1u);
}

TEST(FrameDecoder, LatchesTheFirstError) {
  FrameDecoder d;
  auto bad = from_hex("01 0001 00000004 003c000b 41");
  d.feed(bad);
  auto first = d.next();
  ASSERT_FALSE(first.ok());
  auto good = test::encode_frame(1, BasicQosOk{});
  d.feed(good);
  auto later = d.next();
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error(), first.error());
  ASSERT_NE(d.error(), nullptr);
  EXPECT_EQ(*d.error(), first.error());
  EXPECT_EQ(first.error().to_string(), "protocol error: frame end byte 0x41 is not 0xCE");
}

TEST(FrameDecoder, ABrokerThatRefusesOurVersionSaysWhich) {
  auto run = decode_in_pieces(from_hex("414d5150 00 00 09 00"), {2, 6});
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, errc::protocol_version_mismatch);
  EXPECT_EQ(run.error->detail, "broker refused AMQP 0-9-1 and offered protocol 0-9-0");
}

TEST(FrameDecoder, ReadsAClientsProtocolHeaderThenFrames) {
  OutputQueue q;
  write_protocol_header(q);
  ASSERT_TRUE(write_method_frame(q, 0, ConnectionCloseOk{}, 4096).ok());
  auto bytes = q.to_vector();
  for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
    auto run = decode_in_pieces(bytes, {cut}, FrameDecoder(FrameDecoder::Peer::client));
    ASSERT_FALSE(run.error) << run.error->to_string();
    ASSERT_EQ(run.frames.size(), 2u);
    EXPECT_EQ(run.frames[0].type, FrameType::protocol_header);
    EXPECT_EQ(run.frames[1].type, FrameType::method);
  }
  auto wrong = decode_in_pieces(from_hex("48545450 2f312e31"), {}, FrameDecoder(FrameDecoder::Peer::client));
  ASSERT_TRUE(wrong.error);
  EXPECT_EQ(wrong.error->code, errc::protocol_error);
}

}  // namespace
}  // namespace warren::wire

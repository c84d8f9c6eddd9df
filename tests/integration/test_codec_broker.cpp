// The codec against a real RabbitMQ started by the test command (RMQ_PORT names its port):
// the broker's own handshake, every property and field type carried through the broker and
// back, a body split at frame_max, and the broker's errors as warren reports them.
#include <gtest/gtest.h>

#include "support/broker_env.hpp"
#include "support/hex.hpp"
#include "wire/blocking_session.hpp"

namespace warren::wire {
namespace {

using tools::BlockingSession;
using tools::SessionOptions;

SessionOptions broker() {
  SessionOptions o;
  o.port = test::broker_port();
  return o;
}

BlockingSession open_session() {
  auto s = BlockingSession::connect(broker());
  if (!s.ok()) throw std::runtime_error("connect: " + s.error().to_string());
  return std::move(s).value();
}

void open_channel(BlockingSession& s, std::uint16_t channel) {
  ASSERT_TRUE(s.send(channel, ChannelOpen{}).ok());
  auto ok = s.receive_method(channel);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  ASSERT_TRUE(std::holds_alternative<ChannelOpenOk>(*ok));
}

std::string declare_private_queue(BlockingSession& s, std::uint16_t channel) {
  EXPECT_TRUE(s.send(channel, QueueDeclare{"", false, false, true, true, false, {}}).ok());
  auto ok = s.receive_method(channel);
  if (!ok.ok()) throw std::runtime_error(ok.error().to_string());
  return std::string(std::get<QueueDeclareOk>(*ok).queue);
}

// basic.get a message and reassemble it: the method, the decoded header (re-encoded to an
// owning copy of its properties' text) and the body.
struct Got {
  std::string properties_text;
  std::string body;
  int body_frames = 0;
};

Got get_one(BlockingSession& s, std::uint16_t channel, const std::string& queue) {
  Got got;
  EXPECT_TRUE(s.send(channel, BasicGet{queue, true}).ok());
  auto m = s.receive_method(channel);
  if (!m.ok()) throw std::runtime_error(m.error().to_string());
  if (!std::holds_alternative<BasicGetOk>(*m)) throw std::runtime_error("expected basic.get-ok, got " + to_string(*m));
  auto header_frame = s.receive();
  if (!header_frame.ok() || header_frame->type != FrameType::header) throw std::runtime_error("expected a content header");
  auto header = decode_content_header(header_frame->payload);
  if (!header.ok()) throw std::runtime_error(header.error().to_string());
  got.properties_text = to_string(header->properties);
  std::uint64_t size = header->body_size;
  while (got.body.size() < size) {
    auto body = s.receive();
    if (!body.ok() || body->type != FrameType::body) throw std::runtime_error("expected a body frame");
    got.body.append(reinterpret_cast<const char*>(body->payload.data()), body->payload.size());
    ++got.body_frames;
  }
  return got;
}

TEST(CodecAgainstBroker, HandshakeDecodesRabbitMQsOwnStartAndTune) {
  auto s = open_session();
  const auto& hs = s.handshake();
  ASSERT_NE(hs.server_properties.find("product"), nullptr);
  EXPECT_EQ(*hs.server_properties.find("product"), FieldValue("RabbitMQ"));
  const FieldValue* caps = hs.server_properties.find("capabilities");
  ASSERT_NE(caps, nullptr);
  const auto& cap_table = std::get<FieldTable>(caps->value);
  for (const char* cap : {"publisher_confirms", "basic.nack", "consumer_cancel_notify", "connection.blocked",
                          "authentication_failure_close", "per_consumer_qos", "direct_reply_to"}) {
    ASSERT_NE(cap_table.find(cap), nullptr) << cap;
    EXPECT_EQ(*cap_table.find(cap), FieldValue(true)) << cap;
  }
  EXPECT_NE(hs.mechanisms.find("PLAIN"), std::string::npos);
  EXPECT_EQ(hs.tune.channel_max, 2047);
  EXPECT_EQ(hs.tune.frame_max, 131072u);
  EXPECT_EQ(hs.tune.heartbeat, 60);
  EXPECT_TRUE(s.close().ok());
}

TEST(CodecAgainstBroker, EveryPropertyAndFieldTypeSurvivesTheBroker) {
  auto s = open_session();
  open_channel(s, 1);
  auto queue = declare_private_queue(s, 1);

  FieldTable headers;
  headers.set("t", true).set("b", std::int8_t{-5}).set("B", std::uint8_t{250}).set("s", std::int16_t{-300})
      .set("u", std::uint16_t{65000}).set("I", std::int32_t{-70000}).set("i", std::uint32_t{4000000000u})
      .set("l", std::int64_t{-(1ll << 40)}).set("f", 1.5f).set("d", -2.25).set("D", Decimal{2, 314})
      .set("S", std::string("h\xc3\xa9llo")).set("A", FieldArray{std::int32_t{1}, std::string("x"), Void{}})
      .set("T", Timestamp{1700000000}).set("F", FieldTable{}.set("nested", true)).set("V", Void{})
      .set("x", ByteArray{std::string("\x00\xff", 2)});
  BasicProperties p;
  p.content_type = "application/octet-stream";
  p.content_encoding = "identity";
  p.headers = TableRef(headers);
  p.delivery_mode = 2;
  p.priority = 3;
  p.correlation_id = "corr";
  p.reply_to = "replies";
  p.expiration = "600000";
  p.message_id = "m-1";
  p.timestamp = 1700000000;
  p.type = "kind";
  p.user_id = "guest";  // RabbitMQ checks it against the connection's user
  p.app_id = "warren";
  std::string body = "body";
  ASSERT_TRUE(s.publish(1, BasicPublish{"", queue}, p, test::as_bytes(body)).ok());
  auto got = get_one(s, 1, queue);
  EXPECT_EQ(got.properties_text, to_string(p));
  EXPECT_EQ(got.body, body);
  EXPECT_TRUE(s.close().ok());
}

TEST(CodecAgainstBroker, ABodyLargerThanFrameMaxIsSplitAndReassembled) {
  auto s = open_session();
  open_channel(s, 1);
  auto queue = declare_private_queue(s, 1);
  std::string body(300000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + 3);
  ASSERT_TRUE(s.publish(1, BasicPublish{"", queue}, {}, test::as_bytes(body)).ok());
  auto got = get_one(s, 1, queue);
  EXPECT_EQ(got.body_frames, 3);  // 131064 + 131064 + 37872
  EXPECT_TRUE(got.body == body);
  EXPECT_TRUE(s.close().ok());
}

TEST(CodecAgainstBroker, AnUnroutableMandatoryPublishComesBackAs312) {
  auto s = open_session();
  open_channel(s, 1);
  ASSERT_TRUE(s.send(1, ConfirmSelect{}).ok());
  ASSERT_TRUE(s.receive_method(1).ok());
  ASSERT_TRUE(s.publish(1, BasicPublish{"amq.direct", "nobody-binds-this", true, false}, {}, test::as_bytes("x")).ok());
  auto ret = s.receive_method(1);
  ASSERT_TRUE(ret.ok()) << ret.error().to_string();
  ASSERT_TRUE(std::holds_alternative<BasicReturn>(*ret)) << to_string(*ret);
  EXPECT_EQ(std::get<BasicReturn>(*ret).reply_code, reply::no_route);
  EXPECT_EQ(std::get<BasicReturn>(*ret).reply_text, "NO_ROUTE");
  // Then its header and body, then the confirm.
  ASSERT_EQ(s.receive()->type, FrameType::header);
  ASSERT_EQ(s.receive()->type, FrameType::body);
  auto ack = s.receive_method(1);
  ASSERT_TRUE(ack.ok());
  ASSERT_TRUE(std::holds_alternative<BasicAck>(*ack)) << to_string(*ack);
  EXPECT_EQ(std::get<BasicAck>(*ack).delivery_tag, 1u);
  EXPECT_TRUE(s.close().ok());
}

TEST(CodecAgainstBroker, AWrongPasswordIs403AtOnce) {
  auto options = broker();
  options.password = "not-the-password";
  auto s = BlockingSession::connect(options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, errc::access_refused);
  EXPECT_EQ(s.error().reply_code, 403);
  EXPECT_NE(s.error().detail.find("ACCESS_REFUSED"), std::string::npos) << s.error().to_string();
  EXPECT_EQ(s.error().detail.find("not-the-password"), std::string::npos);
}

TEST(CodecAgainstBroker, AMissingQueueClosesOnlyTheChannelWith404) {
  auto s = open_session();
  open_channel(s, 1);
  ASSERT_TRUE(s.send(1, QueueDeclare{"warren-no-such-queue", true, false, false, false, false, {}}).ok());
  auto r = s.receive_method(1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::not_found);
  EXPECT_EQ(r.error().reply_code, 404);
  EXPECT_EQ(r.error().class_id, 50);
  EXPECT_EQ(r.error().method_id, 10);
  // The connection is still usable: another channel opens.
  open_channel(s, 2);
  EXPECT_TRUE(s.close().ok());
}

TEST(CodecAgainstBroker, ABadFrameEndIsAConnectionErrorFromTheBroker) {
  auto s = open_session();
  open_channel(s, 1);
  ASSERT_TRUE(s.send_raw(test::from_hex("01 0001 00000005 0014 000a 00 41")).ok());
  auto r = s.receive_method(1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reply_code, reply::frame_error) << r.error().to_string();
}

}  // namespace
}  // namespace warren::wire

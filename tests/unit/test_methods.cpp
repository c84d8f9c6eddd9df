// Byte vectors for every method warren encodes and decodes, written by hand from the AMQP
// 0-9-1 specification (RabbitMQ's variant). Each vector is checked both ways: warren encodes
// the method to exactly these bytes, and decodes these bytes back to the same fields.
#include <gtest/gtest.h>

#include "support/encode.hpp"
#include "support/hex.hpp"

namespace warren::wire {
namespace {

using test::from_hex;
using test::to_hex;

FieldTable product_table() { return FieldTable{}.set("product", std::string("RabbitMQ")); }
FieldTable max_length_table() { return FieldTable{}.set("x-max-length", std::int32_t{10}); }

struct Case {
  Method method;
  const char* hex;  // the method frame's payload: class id, method id, fields
};

const FieldTable& product() { static const FieldTable t = product_table(); return t; }
const FieldTable& max_length() { static const FieldTable t = max_length_table(); return t; }

std::vector<Case> cases() {
  using namespace std::string_view_literals;
  return {
      {ConnectionStart{0, 9, product(), "PLAIN AMQPLAIN", "en_US"},
       "000a 000a 00 09 00000015 07 70726f64756374 53 00000008 5261626269744d51"
       " 0000000e 504c41494e20414d51504c41494e 00000005 656e5f5553"},
      {ConnectionStartOk{{}, "PLAIN", "\0guest\0guest"sv, "en_US"},
       "000a 000b 00000000 05 504c41494e 0000000c 006775657374006775657374 05 656e5f5553"},
      {ConnectionSecure{"c"}, "000a 0014 00000001 63"},
      {ConnectionSecureOk{"r"}, "000a 0015 00000001 72"},
      {ConnectionTune{2047, 131072, 60}, "000a 001e 07ff 00020000 003c"},
      {ConnectionTuneOk{2047, 131072, 60}, "000a 001f 07ff 00020000 003c"},
      {ConnectionOpen{"/"}, "000a 0028 01 2f 00 00"},
      {ConnectionOpenOk{}, "000a 0029 00"},
      {ConnectionClose{320, "CONNECTION_FORCED", 0, 0},
       "000a 0032 0140 11 434f4e4e454354494f4e5f464f52434544 0000 0000"},
      {ConnectionCloseOk{}, "000a 0033"},
      {ConnectionBlocked{"low on memory"}, "000a 003c 0d 6c6f77206f6e206d656d6f7279"},
      {ConnectionUnblocked{}, "000a 003d"},
      {ConnectionUpdateSecret{"tok", "refresh"}, "000a 0046 00000003 746f6b 07 72656672657368"},
      {ConnectionUpdateSecretOk{}, "000a 0047"},
      {ChannelOpen{}, "0014 000a 00"},
      {ChannelOpenOk{}, "0014 000b 00000000"},
      {ChannelFlow{true}, "0014 0014 01"},
      {ChannelFlowOk{false}, "0014 0015 00"},
      {ChannelClose{404, "NOT_FOUND", 50, 10}, "0014 0028 0194 09 4e4f545f464f554e44 0032 000a"},
      {ChannelCloseOk{}, "0014 0029"},
      {ExchangeDeclare{"x", "topic", false, true, false, false, false, {}},
       "0028 000a 0000 01 78 05 746f706963 02 00000000"},
      {ExchangeDeclareOk{}, "0028 000b"},
      {ExchangeDelete{"x", true, false}, "0028 0014 0000 01 78 01"},
      {ExchangeDeleteOk{}, "0028 0015"},
      {ExchangeBind{"d", "s", "k", false, {}}, "0028 001e 0000 01 64 01 73 01 6b 00 00000000"},
      {ExchangeBindOk{}, "0028 001f"},
      {ExchangeUnbind{"d", "s", "k", true, {}}, "0028 0028 0000 01 64 01 73 01 6b 01 00000000"},
      {ExchangeUnbindOk{}, "0028 0033"},
      {QueueDeclare{"q", false, true, false, true, false, max_length()},
       "0032 000a 0000 01 71 0a 00000012 0c 782d6d61782d6c656e677468 49 0000000a"},
      {QueueDeclareOk{"q", 5, 1}, "0032 000b 01 71 00000005 00000001"},
      {QueueBind{"q", "x", "k", false, {}}, "0032 0014 0000 01 71 01 78 01 6b 00 00000000"},
      {QueueBindOk{}, "0032 0015"},
      {QueuePurge{"q", false}, "0032 001e 0000 01 71 00"},
      {QueuePurgeOk{7}, "0032 001f 00000007"},
      {QueueDelete{"q", true, false, true}, "0032 0028 0000 01 71 05"},
      {QueueDeleteOk{3}, "0032 0029 00000003"},
      {QueueUnbind{"q", "x", "k", {}}, "0032 0032 0000 01 71 01 78 01 6b 00000000"},
      {QueueUnbindOk{}, "0032 0033"},
      {BasicQos{0, 250, false}, "003c 000a 00000000 00fa 00"},
      {BasicQosOk{}, "003c 000b"},
      {BasicConsume{"q", "ctag", false, true, false, false, {}},
       "003c 0014 0000 01 71 04 63746167 02 00000000"},
      {BasicConsumeOk{"ctag"}, "003c 0015 04 63746167"},
      {BasicCancel{"ctag", false}, "003c 001e 04 63746167 00"},
      {BasicCancelOk{"ctag"}, "003c 001f 04 63746167"},
      {BasicPublish{"x", "k", true, false}, "003c 0028 0000 01 78 01 6b 01"},
      {BasicReturn{312, "NO_ROUTE", "x", "k"}, "003c 0032 0138 08 4e4f5f524f555445 01 78 01 6b"},
      {BasicDeliver{"ctag", 1, true, "x", "k"}, "003c 003c 04 63746167 0000000000000001 01 01 78 01 6b"},
      {BasicGet{"q", true}, "003c 0046 0000 01 71 01"},
      {BasicGetOk{2, false, "x", "k", 9}, "003c 0047 0000000000000002 00 01 78 01 6b 00000009"},
      {BasicGetEmpty{}, "003c 0048 00"},
      {BasicAck{5, true}, "003c 0050 0000000000000005 01"},
      {BasicReject{6, false}, "003c 005a 0000000000000006 00"},
      {BasicRecover{true}, "003c 006e 01"},
      {BasicRecoverOk{}, "003c 006f"},
      {BasicNack{7, true, true}, "003c 0078 0000000000000007 03"},
      {ConfirmSelect{false}, "0055 000a 00"},
      {ConfirmSelectOk{}, "0055 000b"},
  };
}

TEST(Methods, EveryMethodHasAVector) {
  std::vector<bool> seen(std::variant_size_v<Method>, false);
  for (const auto& c : cases()) seen[c.method.index()] = true;
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "no byte vector for alternative " << i;
}

TEST(Methods, EncodeGivesTheVectorsBytes) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(std::string(method_name(c.method)));
    EXPECT_EQ(to_hex(test::encode_payload(c.method)), to_hex(from_hex(c.hex)));
  }
}

TEST(Methods, DecodeGivesTheVectorsFields) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(std::string(method_name(c.method)));
    auto bytes = from_hex(c.hex);
    auto decoded = decode_method(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
    EXPECT_EQ(decoded->index(), c.method.index());
    EXPECT_EQ(to_string(*decoded), to_string(c.method));
    EXPECT_EQ(method_id(*decoded), method_id(c.method));
  }
}

TEST(Methods, PrintedFormNamesFieldsAndHidesSecrets) {
  EXPECT_EQ(to_string(Method{BasicDeliver{"ctag", 1, true, "x", "k"}}),
            "basic.deliver(consumer_tag=\"ctag\", delivery_tag=1, redelivered=true, exchange=\"x\", "
            "routing_key=\"k\")");
  EXPECT_EQ(to_string(Method{QueueDeclare{"q", false, true, false, true, false, max_length()}}),
            "queue.declare(queue=\"q\", passive=false, durable=true, exclusive=false, "
            "auto_delete=true, no_wait=false, arguments={\"x-max-length\": I:10})");
  std::string start_ok = to_string(Method{ConnectionStartOk{{}, "PLAIN", "\0guest\0s3cret", "en_US"}});
  EXPECT_EQ(start_ok.find("s3cret"), std::string::npos) << start_ok;
  EXPECT_NE(start_ok.find("response=<hidden>"), std::string::npos) << start_ok;
}

TEST(Methods, NamesAndIds) {
  EXPECT_EQ(method_name(MethodId{60, 60}), "basic.deliver");
  EXPECT_EQ(method_name(MethodId{40, 51}), "exchange.unbind-ok");
  EXPECT_EQ(method_name(MethodId{90, 10}), "");  // tx.select: not spoken
  EXPECT_EQ(method_name(MethodId{60, 100}), "");  // basic.recover-async: not spoken
}

TEST(Methods, BitsPackLowBitFirst) {
  // queue.delete's if_unused, if_empty, no_wait share one octet: bits 0, 1, 2.
  auto bytes = test::encode_payload(QueueDelete{"q", false, true, false});
  EXPECT_EQ(to_hex(bytes), "0032002800000171" "02");
}

TEST(Methods, DecodeRefusesTrailingBytes) {
  auto bytes = from_hex("003c 0050 0000000000000005 01 ff");
  auto r = decode_method(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::malformed_payload);
  EXPECT_EQ(r.error().detail, "basic.ack has 1 bytes after its last field");
}

TEST(Methods, DecodeRefusesAFieldPastThePayload) {
  auto bytes = from_hex("003c 003c 10 6374");  // consumer tag claims 16 bytes, 2 are there
  auto r = decode_method(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::malformed_payload);
  EXPECT_EQ(r.error().detail, "basic.deliver field consumer_tag runs past the frame");
}

// Refused for a key over 255 bytes in a table, and said so after `prefix` (the field).
template <class T>
void expect_refused_for_the_tables_key(const Result<T>& r, std::string_view prefix) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::string_too_long);
  EXPECT_EQ(r.error().detail.rfind(prefix, 0), 0u) << r.error().detail;
}

// The sizers name a table that cannot be encoded and build its error again out of line (no
// Error is built per message on the publish path): the error is the table's, with the field.
TEST(Methods, EncodeRefusesATableThatCannotBeEncodedWithTheTablesOwnError) {
  FieldTable bad;
  bad.set(std::string(256, 'k'), Void{});
  QueueDeclare declare;
  declare.queue = "q";
  declare.arguments = bad;
  ASSERT_NO_FATAL_FAILURE(expect_refused_for_the_tables_key(method_payload_size(declare), "queue.declare arguments: "));

  BasicProperties properties;
  properties.content_type = "text/plain";
  properties.headers = bad;
  auto h = content_header_size(properties);
  ASSERT_NO_FATAL_FAILURE(expect_refused_for_the_tables_key(h, "property headers: "));
  OutputQueue q;
  auto w = write_content(q, 1, BasicPublish{"", "q"}, properties, {}, 131072);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().detail, h.error().detail);
  EXPECT_EQ(q.size_bytes(), 0u) << "a refused write queued bytes";
}

TEST(Methods, EncodeRefusesAShortStringOver255Bytes) {
  std::string long_name(256, 'q');
  QueueDeclare declare;
  declare.queue = long_name;
  auto r = method_payload_size(declare);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::string_too_long);
  EXPECT_EQ(r.error().detail, "queue.declare queue is over 255 bytes");
  std::string max_name(255, 'q');
  declare.queue = max_name;
  EXPECT_TRUE(method_payload_size(declare).ok());
}

TEST(Methods, WholeFrameAroundThePayload) {
  auto frame = test::encode_frame(7, BasicQosOk{});
  EXPECT_EQ(to_hex(frame), "01" "0007" "00000004" "003c000b" "ce");
}

}  // namespace
}  // namespace warren::wire

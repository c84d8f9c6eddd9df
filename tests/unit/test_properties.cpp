// The content header: body size, the property-flags word, all 14 basic properties.
#include <gtest/gtest.h>

#include "support/hex.hpp"
#include "warren/wire/wire.hpp"

namespace warren::wire {
namespace {

using test::from_hex;
using test::to_hex;

std::vector<std::byte> encode(std::uint64_t body_size, const BasicProperties& p) {
  auto size = content_header_size(p);
  EXPECT_TRUE(size.ok());
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  encode_content_header(w, body_size, p);
  EXPECT_EQ(static_cast<std::size_t>(w.position() - out.data()), out.size());
  return out;
}

TEST(Properties, NoPropertiesIsFourteenBytes) {
  auto bytes = encode(64, {});
  EXPECT_EQ(to_hex(bytes), "003c" "0000" "0000000000000040" "0000");
  auto h = decode_content_header(bytes);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->body_size, 64u);
  EXPECT_EQ(to_string(h->properties), "{}");
}

TEST(Properties, AllFourteenInFlagOrder) {
  FieldTable headers;
  headers.set("h", std::int32_t{1});
  BasicProperties p;
  p.content_type = "a";
  p.content_encoding = "b";
  p.headers = TableRef(headers);
  p.delivery_mode = 2;
  p.priority = 5;
  p.correlation_id = "c";
  p.reply_to = "d";
  p.expiration = "60000";
  p.message_id = "e";
  p.timestamp = 1700000000;
  p.type = "f";
  p.user_id = "g";
  p.app_id = "h";
  p.cluster_id = "i";
  auto bytes = encode(3, p);
  EXPECT_EQ(to_hex(bytes), to_hex(from_hex(
      "003c 0000 0000000000000003 fffc"
      " 01 61  01 62  00000007 01 68 49 00000001  02  05  01 63  01 64"
      " 05 3630303030  01 65  000000006553f100  01 66  01 67  01 68  01 69")));
  auto h = decode_content_header(bytes);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(to_string(h->properties), to_string(p));
  EXPECT_EQ(to_string(p),
            "{content_type=\"a\", content_encoding=\"b\", headers={\"h\": I:1}, delivery_mode=2, "
            "priority=5, correlation_id=\"c\", reply_to=\"d\", expiration=\"60000\", message_id=\"e\", "
            "timestamp=1700000000, type=\"f\", user_id=\"g\", app_id=\"h\", cluster_id=\"i\"}");
}

TEST(Properties, SomeProperties) {
  BasicProperties p;
  p.delivery_mode = 2;
  p.correlation_id = "r1";
  auto bytes = encode(0, p);
  EXPECT_EQ(to_hex(bytes), "003c00000000000000000000" "1400" "02" "027231");
}

TEST(Properties, AReusedHeaderForgetsThePreviousMessagesProperties) {
  BasicProperties p;
  p.message_id = "first";
  p.priority = 1;
  auto with = encode(5, p);
  auto without = encode(6, {});
  ContentHeader h;
  ASSERT_TRUE(decode_content_header(with, h).ok());
  EXPECT_EQ(to_string(h.properties), "{priority=1, message_id=\"first\"}");
  ASSERT_TRUE(decode_content_header(without, h).ok());
  EXPECT_EQ(h.body_size, 6u);
  EXPECT_EQ(to_string(h.properties), "{}");
  BasicProperties q;
  q.app_id = "second";
  auto third = encode(7, q);
  ASSERT_TRUE(decode_content_header(third, h).ok());
  EXPECT_EQ(to_string(h.properties), "{app_id=\"second\"}");
}

TEST(Properties, RefusesAClassOtherThanBasic) {
  auto r = decode_content_header(from_hex("0032 0000 0000000000000000 0000"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "content header for class 50, not basic (60)");
}

TEST(Properties, RefusesFlagsForPropertiesThatDoNotExist) {
  auto bit1 = decode_content_header(from_hex("003c 0000 0000000000000000 0002"));
  ASSERT_FALSE(bit1.ok());
  EXPECT_EQ(bit1.error().code, errc::malformed_payload);
  auto cont = decode_content_header(from_hex("003c 0000 0000000000000000 0001 8000"));
  ASSERT_FALSE(cont.ok());
  EXPECT_EQ(cont.error().detail, "property flags name a property basic does not have");
  // An empty continuation word is allowed and names nothing.
  EXPECT_TRUE(decode_content_header(from_hex("003c 0000 0000000000000000 0001 0000")).ok());
}

TEST(Properties, RefusesAPropertyPastThePayload) {
  auto r = decode_content_header(from_hex("003c 0000 0000000000000000 8000 05 6162"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "property content_type runs past the content header");
}

TEST(Properties, RefusesAShortHeader) {
  auto r = decode_content_header(from_hex("003c 0000 00000000"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::frame_too_small);
}

}  // namespace
}  // namespace warren::wire

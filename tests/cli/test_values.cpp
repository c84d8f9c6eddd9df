// The command line's pure parts: typed header values, property names, and the JSON a
// message becomes (every field-table type, UTF-8 or base64).
#include <gtest/gtest.h>

#include "message_json.hpp"
#include "values.hpp"

using namespace warren;
using namespace warren::cli;

TEST(HeaderValues, UntypedIsAStringAndTypesAreHonoured) {
  wire::FieldTable t;
  ASSERT_TRUE(add_typed_entry(t, "s=10", Untyped::string).ok());
  ASSERT_TRUE(add_typed_entry(t, "i:int=-9223372036854775808", Untyped::string).ok());
  ASSERT_TRUE(add_typed_entry(t, "b:bool=false", Untyped::string).ok());
  ASSERT_TRUE(add_typed_entry(t, "f:float=-1e3", Untyped::string).ok());
  ASSERT_TRUE(add_typed_entry(t, "eq=a=b", Untyped::string).ok());
  EXPECT_EQ(*t.find("s"), wire::FieldValue(std::string("10")));
  EXPECT_EQ(*t.find("i"), wire::FieldValue(std::int64_t{INT64_MIN}));
  EXPECT_EQ(*t.find("b"), wire::FieldValue(false));
  EXPECT_EQ(*t.find("f"), wire::FieldValue(-1000.0));
  EXPECT_EQ(*t.find("eq"), wire::FieldValue(std::string("a=b")));
}

TEST(HeaderValues, ArgumentsInferNumbersAndBooleans) {
  wire::FieldTable t;
  ASSERT_TRUE(add_typed_entry(t, "x-max-length=10", Untyped::infer).ok());
  ASSERT_TRUE(add_typed_entry(t, "x-single-active-consumer=true", Untyped::infer).ok());
  ASSERT_TRUE(add_typed_entry(t, "x-overflow=reject-publish", Untyped::infer).ok());
  ASSERT_TRUE(add_typed_entry(t, "x-name:string=10", Untyped::infer).ok());
  EXPECT_EQ(*t.find("x-max-length"), wire::FieldValue(std::int64_t{10}));
  EXPECT_EQ(*t.find("x-single-active-consumer"), wire::FieldValue(true));
  EXPECT_EQ(*t.find("x-overflow"), wire::FieldValue(std::string("reject-publish")));
  EXPECT_EQ(*t.find("x-name"), wire::FieldValue(std::string("10")));
}

TEST(HeaderValues, RefusesWhatCannotBeSentAsWritten) {
  wire::FieldTable t;
  for (const char* bad : {"nokey", "=v", "n:int=1.5", "n:int=99999999999999999999", "b:bool=1", "f:float=nan",
                          "f:float=", "k:date=1"}) {
    auto r = add_typed_entry(t, bad, Untyped::string);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, make_error_code(errc::invalid_argument));
    EXPECT_NE(r.error().detail.find(bad), std::string::npos) << r.error().detail;
  }
  EXPECT_TRUE(t.empty());
}

TEST(MessagePropertiesTest, NamesAndRanges) {
  MessageProperties p;
  ASSERT_TRUE(p.set("content_type=application/json").ok());
  ASSERT_TRUE(p.set("delivery_mode=1").ok());
  ASSERT_TRUE(p.set("priority=255").ok());
  ASSERT_TRUE(p.set("timestamp=1700000000").ok());
  ASSERT_TRUE(p.set("reply_to=r").ok());
  EXPECT_EQ(p.properties().content_type, "application/json");
  EXPECT_EQ(p.properties().delivery_mode, 1);
  EXPECT_EQ(p.properties().priority, 255);
  EXPECT_EQ(p.properties().timestamp, 1700000000u);
  EXPECT_EQ(p.properties().reply_to, "r");
  EXPECT_FALSE(p.set("delivery_mode=3").ok());
  EXPECT_FALSE(p.set("priority=256").ok());
  EXPECT_FALSE(p.set("expiration=soon").ok());
  EXPECT_FALSE(p.set("cluster_id=x").ok());
  EXPECT_FALSE(p.set("type=" + std::string(256, 't')).ok());
}

TEST(Json, Utf8AndBase64) {
  EXPECT_TRUE(is_utf8("plain"));
  EXPECT_TRUE(is_utf8("h\xc3\xa9llo \xf0\x9f\x90\x87"));
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("\xc0\xaf"));          // overlong "/"
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(is_utf8("\xe2\x82"));          // cut short
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64(std::string("\x00\xff", 2)), "AP8=");
}

TEST(Json, EveryFieldValueType) {
  wire::FieldTable inner;
  inner.set("k", std::string("v"));
  wire::FieldTable t;
  t.set("t", true);
  t.set("b", std::int8_t{-1});
  t.set("B", std::uint8_t{255});
  t.set("s", std::int16_t{-2});
  t.set("u", std::uint16_t{2});
  t.set("I", std::int32_t{-3});
  t.set("i", std::uint32_t{3});
  t.set("l", std::int64_t{-4});
  t.set("f", 1.5f);
  t.set("d", 2.25);
  t.set("D", wire::Decimal{2, 123});
  t.set("Dneg", wire::Decimal{3, -5});
  t.set("S", std::string("text"));
  t.set("Sbin", std::string("\xff\xfe", 2));
  t.set("A", wire::FieldArray{std::int32_t{1}, std::string("two"), wire::Void{}});
  t.set("T", wire::Timestamp{1700000000});
  t.set("F", inner);
  t.set("V", wire::Void{});
  t.set("x", wire::ByteArray{std::string("\x00\x01", 2)});
  EXPECT_EQ(field_table_json(t).dump(),
            R"({"t":true,"b":-1,"B":255,"s":-2,"u":2,"I":-3,"i":3,"l":-4,"f":1.5,"d":2.25,)"
            R"("D":{"decimal":"1.23"},"Dneg":{"decimal":"-0.005"},"S":"text","Sbin":{"bytes_base64":"//4="},)"
            R"("A":[1,"two",null],"T":{"timestamp":1700000000},"F":{"k":"v"},"V":null,"x":{"bytes_base64":"AAE="}})");
}

TEST(Json, AMessageWithoutPropertiesHasEmptyObjects) {
  engine::Message m;
  m.exchange = "ex";
  m.routing_key = "rk";
  m.delivery_tag = 7;
  m.redelivered = true;
  const std::string body = "\x80not utf-8";
  m.body = std::as_bytes(std::span{body.data(), body.size()});
  auto j = message_json(m);
  EXPECT_EQ(j.dump(), R"({"body_base64":"gG5vdCB1dGYtOA==","exchange":"ex","routing_key":"rk","redelivered":true,)"
                       R"("delivery_tag":7,"properties":{},"headers":{}})");
}

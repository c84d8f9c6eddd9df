// Field tables with RabbitMQ's full type set: exact bytes for each type, nesting, and the
// refusals (unknown tag, a length past the table, nesting too deep, a key too long).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

#include "support/hex.hpp"
#include "warren/wire/wire.hpp"

namespace warren::wire {
namespace {

using test::from_hex;
using test::to_hex;

std::vector<std::byte> encode(const FieldTable& t) {
  auto size = encoded_table_size(t);
  EXPECT_TRUE(size.ok());
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  encode_table_content(w, t);
  EXPECT_EQ(static_cast<std::size_t>(w.position() - out.data()), out.size());
  return out;
}

struct TypeCase {
  FieldValue value;
  const char* hex;  // tag and value, after the key "k" (01 6b)
};

TEST(FieldTable, EveryTypeHasItsBytes) {
  FieldTable inner;
  inner.set("a", std::int32_t{1});
  std::vector<TypeCase> cases = {
      {true, "74 01"},
      {std::int8_t{-2}, "62 fe"},
      {std::uint8_t{200}, "42 c8"},
      {std::int16_t{-300}, "73 fed4"},
      {std::uint16_t{65000}, "75 fde8"},
      {std::int32_t{-70000}, "49 fffeee90"},
      {std::uint32_t{4000000000u}, "69 ee6b2800"},
      {std::int64_t{-5}, "6c fffffffffffffffb"},
      {1.5f, "66 3fc00000"},
      {-2.25, "64 c002000000000000"},
      {Decimal{2, 314}, "44 02 0000013a"},
      {std::string("hi"), "53 00000002 6869"},
      {FieldArray{std::int32_t{1}, std::string("x")}, "41 0000000b 49 00000001 53 00000001 78"},
      {Timestamp{1700000000}, "54 000000006553f100"},
      {inner, "46 00000007 01 61 49 00000001"},
      {Void{}, "56"},
      {ByteArray{std::string("\x00\xff", 2)}, "78 00000002 00ff"},
  };
  ASSERT_EQ(cases.size(), field_type_tags.size());
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(1, c.value.type_tag()));
    FieldTable t;
    t.set("k", c.value);
    auto bytes = encode(t);
    EXPECT_EQ(to_hex(bytes), to_hex(from_hex(std::string("01 6b ") + c.hex)));
    auto back = decode_table(bytes);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, t);
  }
}

TEST(FieldTable, KeepsWireOrderAndPrintsCanonically) {
  FieldTable t;
  t.set("z", std::int64_t{1}).set("a", FieldTable{}.set("n", Void{})).set("m", FieldArray{true, 2.5});
  auto back = decode_table(encode(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(to_string(*back), "{\"z\": l:1, \"a\": F:{\"n\": V}, \"m\": A:[t:true, d:2.5]}");
}

TEST(FieldTable, SetReplacesAnExistingKey) {
  FieldTable t;
  t.set("k", std::int32_t{1}).set("k", std::int32_t{2});
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(*t.find("k"), FieldValue(std::int32_t{2}));
  EXPECT_EQ(t.find("absent"), nullptr);
}

TEST(FieldTable, FloatsRoundTripBitForBit) {
  FieldTable t;
  t.set("nan", std::numeric_limits<double>::quiet_NaN()).set("inf", -std::numeric_limits<float>::infinity());
  auto bytes = encode(t);
  auto back = decode_table(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(std::get<double>(back->find("nan")->value)));
  EXPECT_EQ(to_hex(encode(*back)), to_hex(bytes));
}

TEST(FieldTable, RefusesAnUnknownTag) {
  auto r = validate_table(from_hex("01 6b 5a 00"));  // 'Z'
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::unknown_field_type);
  EXPECT_EQ(r.error().detail, "field value type tag 0x5A is not one of tbBsuIilfdDSATFVx");
}

TEST(FieldTable, RefusesAValuePastTheTable) {
  auto r = validate_table(from_hex("01 6b 53 00000010 6869"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::malformed_payload);
  auto key = validate_table(from_hex("05 6b"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error().detail, "field table key runs past its table");
}

TEST(FieldTable, RefusesNestingBeyondTheLimitBothWays) {
  FieldTable deep;
  for (int i = 0; i < max_table_depth + 1; ++i) {
    FieldTable outer;
    outer.set("n", std::move(deep));
    deep = std::move(outer);
  }
  auto size = encoded_table_size(deep);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.error().code, errc::table_too_deep);

  FieldTable ok;
  for (int i = 0; i < max_table_depth - 1; ++i) {
    FieldTable outer;
    outer.set("n", std::move(ok));
    ok = std::move(outer);
  }
  auto bytes = encode(ok);
  EXPECT_TRUE(validate_table(bytes).ok());
  EXPECT_TRUE(decode_table(bytes).ok());
}

TEST(FieldTable, RefusesAKeyOver255Bytes) {
  FieldTable t;
  t.set(std::string(256, 'k'), Void{});
  auto r = encoded_table_size(t);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::string_too_long);
}

TEST(FieldTable, TableRefComparesEitherForm) {
  FieldTable t;
  t.set("k", std::string("v"));
  auto bytes = encode(t);
  EXPECT_TRUE(same_table(TableRef(t), TableRef::validated(bytes)));
  FieldTable other;
  other.set("k", std::string("w"));
  EXPECT_FALSE(same_table(TableRef(other), TableRef::validated(bytes)));
}


// Issue 24, trace context on the wire: a TableRef writes string entries after its own, in place
// of any of the same keys, from either form of table; an empty value removes its key.
std::vector<std::byte> encode_ref(const TableRef& ref) {
  auto size = ref.encoded_size();
  EXPECT_TRUE(size.ok());
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  ref.encode_content(w);
  EXPECT_EQ(static_cast<std::size_t>(w.position() - out.data()), out.size());
  return out;
}

TEST(FieldTable, ReplacingWritesItsEntriesInPlaceOfTheTablesOwnFromEitherForm) {
  FieldTable t;
  t.set("traceparent", std::string("00-old"));
  t.set("n", std::int32_t{7});
  t.set("nested", FieldTable{{"traceparent", "inner, kept"}});
  t.set("tracestate", std::string("old=1"));
  const auto bytes = encode(t);
  const std::array<StringEntry, 2> trace{StringEntry{"traceparent", "00-new"}, StringEntry{"tracestate", ""}};
  FieldTable expected;
  expected.set("n", std::int32_t{7});
  expected.set("nested", FieldTable{{"traceparent", "inner, kept"}});
  expected.set("traceparent", std::string("00-new"));
  for (const TableRef& base : {TableRef(t), TableRef::validated(bytes)}) {
    const TableRef ref = base.replacing(trace);
    const auto written = encode_ref(ref);
    auto decoded = decode_table(written);
    ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
    EXPECT_EQ(*decoded, expected) << to_string(*decoded);
    auto viewed = ref.to_table();
    ASSERT_TRUE(viewed.ok());
    EXPECT_EQ(*viewed, expected);
  }
  // No table of its own: the entries alone.
  const auto alone = decode_table(encode_ref(TableRef().replacing(trace)));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(*alone, (FieldTable{{"traceparent", "00-new"}}));
  EXPECT_FALSE(TableRef().replacing(trace).empty());
}

TEST(FieldTable, ALongStringIsFoundByKeyAmongTopLevelEntriesOnly) {
  FieldTable t;
  t.set("nested", FieldTable{{"traceparent", "inner"}});
  t.set("list", FieldArray{std::string("a"), std::int64_t{1}});
  t.set("count", std::int64_t{3});
  t.set("traceparent", std::string("00-outer"));
  const auto bytes = encode(t);
  EXPECT_EQ(find_long_string(bytes, "traceparent"), "00-outer");
  EXPECT_EQ(find_long_string(bytes, "count"), std::nullopt) << "not a long string";
  EXPECT_EQ(find_long_string(bytes, "missing"), std::nullopt);
  std::vector<std::string> keys;
  TableCursor cursor(bytes);
  while (auto e = cursor.next()) keys.emplace_back(e->key);
  EXPECT_EQ(keys, (std::vector<std::string>{"nested", "list", "count", "traceparent"}));
}

}  // namespace
}  // namespace warren::wire

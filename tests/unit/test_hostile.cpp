// Hostile input: each is a clear error, never a crash, never an allocation sized by the peer.
#include <gtest/gtest.h>

#include "support/frames.hpp"

namespace warren::wire {
namespace {

using test::from_hex;

// A table nesting `depth` tables around `innermost`, built as bytes (the owning types refuse
// to build it).
std::vector<std::byte> nested_table_bytes(int depth, std::vector<std::byte> innermost = {}) {
  std::vector<std::byte> content = std::move(innermost);
  for (int i = 0; i < depth; ++i) {
    std::vector<std::byte> outer = from_hex("01 6e 46");  // key "n", type F
    auto n = static_cast<std::uint32_t>(content.size());
    for (int s = 24; s >= 0; s -= 8) outer.push_back(std::byte(n >> s));
    outer.insert(outer.end(), content.begin(), content.end());
    content = std::move(outer);
  }
  return content;
}

TEST(Hostile, ATableNestedTenThousandDeep) {
  auto bytes = nested_table_bytes(10000);
  auto v = validate_table(bytes);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, errc::table_too_deep);
  EXPECT_EQ(v.error().to_string(), "field table nested too deep: field tables nested deeper than 64");
  auto d = decode_table(bytes);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, errc::table_too_deep);
}

TEST(Hostile, ATableNestedTenThousandDeepInsideAMethod) {
  auto table = nested_table_bytes(10000);
  std::vector<std::byte> payload = from_hex("0032 000a 0000 01 71 00");
  auto n = static_cast<std::uint32_t>(table.size());
  for (int s = 24; s >= 0; s -= 8) payload.push_back(std::byte(n >> s));
  payload.insert(payload.end(), table.begin(), table.end());
  auto r = decode_method(payload);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::table_too_deep);
  EXPECT_EQ(r.error().detail, "queue.declare arguments: field tables nested deeper than 64");
}

TEST(Hostile, AnArrayNestedTenThousandDeep) {
  std::vector<std::byte> content;
  for (int i = 0; i < 10000; ++i) {
    std::vector<std::byte> outer = from_hex("41");
    auto n = static_cast<std::uint32_t>(content.size());
    for (int s = 24; s >= 0; s -= 8) outer.push_back(std::byte(n >> s));
    outer.insert(outer.end(), content.begin(), content.end());
    content = std::move(outer);
  }
  std::vector<std::byte> table = from_hex("01 61");
  table.insert(table.end(), content.begin(), content.end());
  auto v = validate_table(table);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, errc::table_too_deep);
}

// A content header whose headers table is `content`: body size 1, only the headers flag.
std::vector<std::byte> header_with_headers(const std::vector<std::byte>& content) {
  std::vector<std::byte> payload = from_hex("003c 0000 0000000000000001 2000");
  auto n = static_cast<std::uint32_t>(content.size());
  for (int s = 24; s >= 0; s -= 8) payload.push_back(std::byte(n >> s));
  payload.insert(payload.end(), content.begin(), content.end());
  return payload;
}

// A message's headers nested deeper than the decoder goes: the message is kept (refusing the
// frame would close the connection, and the broker would hand the same message to the next
// consumer), and its headers alone are refused, as too deep, when they are asked for.
TEST(Hostile, AMessagesHeadersNestedTenThousandDeepAreKeptAndRefusedWhenRead) {
  auto deep = nested_table_bytes(10000);
  EXPECT_TRUE(validate_table_bounds(deep).ok());
  const auto payload = header_with_headers(deep);  // the decoded properties point into it
  auto h = decode_content_header(payload);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->body_size, 1u);
  ASSERT_TRUE(h->properties.headers.has_value());
  EXPECT_EQ(h->properties.headers->encoded().size(), deep.size());
  auto t = h->properties.headers->to_table();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, errc::table_too_deep);
  EXPECT_EQ(to_string(h->properties), "{headers=<invalid table>}");
}

TEST(Hostile, DeepHeadersThatRunPastTheirTableStillFailTheFrame) {
  auto deep = nested_table_bytes(100);
  deep[deep.size() - 1] = std::byte{0x7f};  // the innermost table (empty) now claims 127 bytes
  auto bounds = validate_table_bounds(deep);
  ASSERT_FALSE(bounds.ok());
  EXPECT_EQ(bounds.error().code, errc::malformed_payload);
  auto h = decode_content_header(header_with_headers(deep));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, errc::table_too_deep);  // the first check's finding is what is reported
  // An unknown tag far down is refused as well.
  const auto content = nested_table_bytes(100, from_hex("01 6b 5a"));  // innermost: key "k", tag 'Z'
  auto unknown = validate_table_bounds(content);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, errc::unknown_field_type);
  EXPECT_FALSE(decode_content_header(header_with_headers(content)).ok());
}

TEST(Hostile, ALongStringClaimingFourGiB) {
  auto in_table = validate_table(from_hex("01 6b 53 ffffffff 616263"));
  ASSERT_FALSE(in_table.ok());
  EXPECT_EQ(in_table.error().code, errc::malformed_payload);
  EXPECT_EQ(in_table.error().detail, "field value runs past its table");

  auto in_method = decode_method(from_hex("000a 000a 00 09 00000000 ffffffff 504c41494e"));
  ASSERT_FALSE(in_method.ok());
  EXPECT_EQ(in_method.error().detail, "connection.start field mechanisms runs past the frame");

  auto table_length = decode_method(from_hex("000a 000a 00 09 ffffffff"));
  ASSERT_FALSE(table_length.ok());
  EXPECT_EQ(table_length.error().code, errc::malformed_payload);
}

TEST(Hostile, AFrameOfSizeFFFFFFFF) {
  FrameDecoder d;
  d.set_frame_max(131072);
  auto bytes = from_hex("03 0001 ffffffff 00");
  d.feed(bytes);
  auto r = d.next();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::frame_too_large);
  EXPECT_EQ(r.error().detail, "frame of 4294967303 bytes exceeds frame_max 131072");
  EXPECT_EQ(d.buffered_bytes(), 0u);
  // With no negotiated limit the size is still never trusted: only received bytes are kept.
  FrameDecoder unlimited(FrameDecoder::Peer::broker, 0);
  unlimited.feed(bytes);
  auto u = unlimited.next();
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->has_value());
  EXPECT_EQ(unlimited.buffered_bytes(), bytes.size());
}

TEST(Hostile, AMethodWithUnknownClassOrMethod) {
  auto unknown_class = decode_method(from_hex("ffff 0001"));
  ASSERT_FALSE(unknown_class.ok());
  EXPECT_EQ(unknown_class.error().code, errc::unknown_method);
  EXPECT_EQ(unknown_class.error().to_string(), "unknown method: method 65535.1 is not one warren knows");
  auto unknown_method = decode_method(from_hex("003c ffff"));
  ASSERT_FALSE(unknown_method.ok());
  EXPECT_EQ(unknown_method.error().detail, "method 60.65535 is not one warren knows");
  auto tx = decode_method(from_hex("005a 000a"));
  ASSERT_FALSE(tx.ok());
  EXPECT_EQ(tx.error().code, errc::unknown_method);
}

}  // namespace
}  // namespace warren::wire

// Codec properties: every method, table and property set round-trips to the same bytes; the
// frame decoder yields the same frames for every split of a stream; arbitrary bytes either
// decode or fail with one latched error.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "generators.hpp"
#include "support/encode.hpp"
#include "support/frames.hpp"

namespace warren::test {
namespace {

using namespace wire;

std::vector<std::byte> table_bytes(const FieldTable& t) {
  auto size = encoded_table_size(t);
  RC_ASSERT(size.ok());
  std::vector<std::byte> out(*size);
  Writer w(out.data());
  encode_table_content(w, t);
  return out;
}

RC_GTEST_PROP(CodecProperties, FieldTablesRoundTrip, ()) {
  auto table = field_table(1);
  auto bytes = table_bytes(table);
  RC_ASSERT(validate_table(bytes).ok());
  auto back = decode_table(bytes);
  RC_ASSERT(back.ok());
  // Bytes, not values: a NaN is not equal to itself but must come back bit for bit.
  RC_ASSERT(to_hex(table_bytes(*back)) == to_hex(bytes));
  RC_ASSERT(to_string(*back) == to_string(table));
}

RC_GTEST_PROP(CodecProperties, EveryMethodRoundTrips, ()) {
  Arena arena;
  Method m = any_method(arena);
  auto bytes = encode_payload(m);
  auto back = decode_method(bytes);
  RC_ASSERT(back.ok());
  RC_ASSERT(back->index() == m.index());
  RC_ASSERT(to_hex(encode_payload(*back)) == to_hex(bytes));
  RC_ASSERT(to_string(*back) == to_string(m));
}

RC_GTEST_PROP(CodecProperties, PropertiesRoundTrip, (std::uint64_t body_size)) {
  Arena arena;
  auto props = any_properties(arena);
  auto size = content_header_size(props);
  RC_ASSERT(size.ok());
  std::vector<std::byte> bytes(*size);
  Writer w(bytes.data());
  encode_content_header(w, body_size, props);
  auto back = decode_content_header(bytes);
  RC_ASSERT(back.ok());
  RC_ASSERT(back->body_size == body_size);
  RC_ASSERT(to_string(back->properties) == to_string(props));
}

RC_GTEST_PROP(CodecProperties, EverySplitOfAStreamYieldsTheSameFrames, ()) {
  Arena arena;
  OutputQueue q;
  const std::uint32_t frame_max = 4096;
  auto n = *rc::gen::inRange(1, 8);
  for (int i = 0; i < n; ++i) {
    auto channel = *rc::gen::inRange<std::uint16_t>(0, 4);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: {
        auto m = any_method(arena);
        (void)write_method_frame(q, channel, m, frame_max);  // an over-large one is refused whole
        break;
      }
      case 1: {
        auto body = *rc::gen::container<std::string>(*rc::gen::inRange<std::size_t>(0, 9000), rc::gen::arbitrary<char>());
        RC_ASSERT(write_content(q, channel, BasicDeliver{"c", 1, false, "", "k"}, BasicProperties{},
                                as_bytes(arena.keep(std::move(body))), frame_max).ok());
        break;
      }
      default: write_heartbeat(q);
    }
  }
  auto stream = q.to_vector();
  auto whole = decode_in_pieces(stream, {}, FrameDecoder(FrameDecoder::Peer::broker, frame_max));
  RC_ASSERT(!whole.error);
  auto cuts = *rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(0, stream.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  auto split = decode_in_pieces(stream, cuts, FrameDecoder(FrameDecoder::Peer::broker, frame_max));
  RC_ASSERT(!split.error);
  RC_ASSERT(split.frames == whole.frames);
}

RC_GTEST_PROP(CodecProperties, ArbitraryBytesDecodeOrLatchOneError, (std::vector<std::uint8_t> raw)) {
  std::vector<std::byte> bytes(raw.size());
  std::transform(raw.begin(), raw.end(), bytes.begin(), [](std::uint8_t b) { return std::byte{b}; });
  FrameDecoder d(FrameDecoder::Peer::broker, 4096);
  d.feed(bytes);
  std::optional<Error> first;
  for (int i = 0; i < 10000; ++i) {
    auto r = d.next();
    if (!r.ok()) {
      first = r.error();
      break;
    }
    if (!r->has_value()) break;
    if ((*r)->type == FrameType::method) (void)decode_method((*r)->payload);
  }
  if (first) {
    auto again = d.next();
    RC_ASSERT(!again.ok());
    RC_ASSERT(again.error() == *first);
  }
}

}  // namespace
}  // namespace warren::test

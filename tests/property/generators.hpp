// rapidcheck generators for the codec: field values (nested, bounded), any method with every
// field random, basic properties. Text fields are views, so their bytes live in an Arena that
// outlives the values.
#pragma once

#include <rapidcheck.h>

#include <deque>
#include <string>

#include "warren/wire/wire.hpp"

namespace warren::test {

struct Arena {
  std::deque<std::string> strings;
  std::deque<wire::FieldTable> tables;
  std::string_view keep(std::string s) { return strings.emplace_back(std::move(s)); }
  const wire::FieldTable& keep(wire::FieldTable t) { return tables.emplace_back(std::move(t)); }
};

inline std::string short_string() {
  return *rc::gen::container<std::string>(*rc::gen::inRange<std::size_t>(0, 256), rc::gen::arbitrary<char>());
}

inline wire::FieldValue field_value(int depth);

inline wire::FieldTable field_table(int depth) {
  wire::FieldTable t;
  auto n = *rc::gen::inRange<std::size_t>(0, depth > 2 ? 2 : 6);
  for (std::size_t i = 0; i < n; ++i) t.entries.emplace_back(short_string().substr(0, 40), field_value(depth + 1));
  return t;
}

inline wire::FieldValue field_value(int depth) {
  using namespace wire;
  int max = depth >= 4 ? 16 : 17;  // past depth 4 no more tables or arrays
  int tag = *rc::gen::inRange(0, max);
  auto text = [] { return *rc::gen::container<std::string>(*rc::gen::inRange<std::size_t>(0, 64), rc::gen::arbitrary<char>()); };
  switch (tag) {
    case 0: return *rc::gen::arbitrary<bool>();
    case 1: return *rc::gen::arbitrary<std::int8_t>();
    case 2: return *rc::gen::arbitrary<std::uint8_t>();
    case 3: return *rc::gen::arbitrary<std::int16_t>();
    case 4: return *rc::gen::arbitrary<std::uint16_t>();
    case 5: return *rc::gen::arbitrary<std::int32_t>();
    case 6: return *rc::gen::arbitrary<std::uint32_t>();
    case 7: return *rc::gen::arbitrary<std::int64_t>();
    case 8: return *rc::gen::arbitrary<float>();
    case 9: return *rc::gen::arbitrary<double>();
    case 10: return Decimal{*rc::gen::arbitrary<std::uint8_t>(), *rc::gen::arbitrary<std::int32_t>()};
    case 11: return text();
    case 12: return Timestamp{*rc::gen::arbitrary<std::uint64_t>()};
    case 13: return Void{};
    case 14: return ByteArray{text()};
    case 15: {
      FieldArray a;
      auto n = *rc::gen::inRange<std::size_t>(0, depth > 2 ? 2 : 5);
      for (std::size_t i = 0; i < n; ++i) a.push_back(field_value(depth + 1));
      return a;
    }
    default: return field_table(depth + 1);
  }
}

// Fills a method's fields through its own fields() list.
struct RandomFields {
  Arena& arena;
  void octet(const char*, std::uint8_t& v) { v = *rc::gen::arbitrary<std::uint8_t>(); }
  void short_(const char*, std::uint16_t& v) { v = *rc::gen::arbitrary<std::uint16_t>(); }
  void long_(const char*, std::uint32_t& v) { v = *rc::gen::arbitrary<std::uint32_t>(); }
  void longlong(const char*, std::uint64_t& v) { v = *rc::gen::arbitrary<std::uint64_t>(); }
  void bit(const char*, bool& v) { v = *rc::gen::arbitrary<bool>(); }
  void shortstr(const char*, std::string_view& s) { s = arena.keep(short_string()); }
  void longstr(const char*, std::string_view& s) {
    s = arena.keep(*rc::gen::container<std::string>(*rc::gen::inRange<std::size_t>(0, 600), rc::gen::arbitrary<char>()));
  }
  void secret_longstr(const char* n, std::string_view& s) { longstr(n, s); }
  void table(const char*, wire::TableRef& t) { t = wire::TableRef(arena.keep(field_table(1))); }
  void reserved_short() {}
  void reserved_shortstr() {}
  void reserved_longstr() {}
  void reserved_bit() {}
};

template <std::size_t I = 0>
wire::Method method_at(std::size_t index, Arena& arena) {
  if constexpr (I < std::variant_size_v<wire::Method>) {
    if (index == I) {
      std::variant_alternative_t<I, wire::Method> m{};
      RandomFields v{arena};
      decltype(m)::fields(m, v);
      return m;
    }
    return method_at<I + 1>(index, arena);
  } else {
    return wire::ConnectionCloseOk{};
  }
}

inline wire::Method any_method(Arena& arena) {
  return method_at(*rc::gen::inRange<std::size_t>(0, std::variant_size_v<wire::Method>), arena);
}

inline wire::BasicProperties any_properties(Arena& arena) {
  wire::BasicProperties p;
  auto maybe = [] { return *rc::gen::arbitrary<bool>(); };
  auto text = [&] { return arena.keep(short_string()); };
  if (maybe()) p.content_type = text();
  if (maybe()) p.content_encoding = text();
  if (maybe()) p.headers = wire::TableRef(arena.keep(field_table(1)));
  if (maybe()) p.delivery_mode = *rc::gen::arbitrary<std::uint8_t>();
  if (maybe()) p.priority = *rc::gen::arbitrary<std::uint8_t>();
  if (maybe()) p.correlation_id = text();
  if (maybe()) p.reply_to = text();
  if (maybe()) p.expiration = text();
  if (maybe()) p.message_id = text();
  if (maybe()) p.timestamp = *rc::gen::arbitrary<std::uint64_t>();
  if (maybe()) p.type = text();
  if (maybe()) p.user_id = text();
  if (maybe()) p.app_id = text();
  if (maybe()) p.cluster_id = text();
  return p;
}

}  // namespace warren::test

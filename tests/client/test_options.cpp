// The options structs are views (options.hpp): trivially copyable and destructible, so GCC 12's
// bitwise copy of a braced temporary in a co_await is harmless; Arguments lists become the
// FieldTable the broker gets; Kept owns what it was built from.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "warren/client/kept.hpp"
#include "warren/client/options.hpp"

namespace warren::client {
namespace {

template <class... Options>
constexpr bool all_views = ((std::is_trivially_copyable_v<Options> && std::is_trivially_destructible_v<Options>) && ...);
static_assert(all_views<ExchangeDeclareOptions, ExchangeDeleteOptions, ExchangeBindOptions, QueueDeclareOptions,
                        QueueBindOptions, QueuePurgeOptions, QueueDeleteOptions, QosOptions, FlowOptions,
                        RecoverOptions, GetOptions, ConsumeOptions, Publish>,
              "an options struct that owns memory crashes GCC 12 when written inline in a co_await");
// A temporary table or string would be gone before a verb kept in a variable starts.
static_assert(!std::is_constructible_v<Arguments, wire::FieldTable&&>);
static_assert(!std::is_constructible_v<ArgumentValue, std::string&&>);
static_assert(std::is_constructible_v<ArgumentValue, const std::string&>);

TEST(Arguments, an_inline_list_becomes_the_table_in_the_order_written_with_each_values_type) {
  const std::string type = "quorum";
  const QueueDeclareOptions o{.name = "q",
                              .arguments = {{"x-queue-type", type},
                                            {"x-max-length", 1000},
                                            {"x-message-ttl", std::int64_t{60000}},
                                            {"x-single-active-consumer", true},
                                            {"x-overflow", "reject-publish"}}};
  const wire::FieldTable table = o.arguments.to_table();
  const wire::FieldTable expected{{"x-queue-type", std::string("quorum")},
                                  {"x-max-length", std::int32_t{1000}},
                                  {"x-message-ttl", std::int64_t{60000}},
                                  {"x-single-active-consumer", true},
                                  {"x-overflow", std::string("reject-publish")}};
  EXPECT_EQ(table, expected);
  EXPECT_EQ(table.entries[1].value.type_tag(), 'I');
  EXPECT_EQ(table.entries[2].value.type_tag(), 'l');
  EXPECT_TRUE(o.arguments.contains("x-overflow"));
  EXPECT_FALSE(o.arguments.contains("x-expires"));
  EXPECT_FALSE(o.arguments.empty());
  EXPECT_TRUE(QueueDeclareOptions{}.arguments.empty());
}

TEST(Arguments, eight_inline_entries_and_a_borrowed_table_or_value_for_anything_else) {
  const Arguments eight{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}, {"f", 6}, {"g", 7}, {"h", 8}};
  const auto table = eight.to_table();
  ASSERT_EQ(table.entries.size(), Arguments::max_inline);
  EXPECT_EQ(table.entries.back().key, "h");
  EXPECT_EQ(table.entries.back().value.integer(), 8);

  const wire::FieldTable nested{{"inner", wire::FieldTable{{"k", 1}}}, {"list", wire::FieldArray{1, "two"}}};
  const Arguments borrowed = nested;
  EXPECT_EQ(borrowed.to_table(), nested);
  EXPECT_TRUE(borrowed.contains("list"));

  const wire::FieldValue offset = wire::Timestamp{1700000000};
  const Arguments one{{"x-stream-offset", offset}};
  EXPECT_EQ(one.to_table(), (wire::FieldTable{{"x-stream-offset", wire::Timestamp{1700000000}}}));
}

TEST(Kept, owns_every_string_and_table_after_what_it_was_built_from_is_gone) {
  const auto kept = [] {
    std::string name(100, 'q');  // on the heap: a dangling view would read freed memory
    std::string type = "stream-type-longer-than-the-small-string-buffer";
    return Kept<QueueDeclareOptions>(
        QueueDeclareOptions{.name = name, .durable = true, .arguments = {{"x-queue-type", type}, {"x-max-age", "7D"}}});
  }();
  std::string scribble(100, 'x');  // reuses what the lambda's strings freed, if anything still pointed there
  const Kept<QueueDeclareOptions> copy = kept;
  for (const auto* k : {&kept, &copy}) {
    EXPECT_EQ((*k)->name, std::string(100, 'q'));
    EXPECT_TRUE((*k)->durable);
    EXPECT_EQ((*k)->arguments.to_table(),
              (wire::FieldTable{{"x-queue-type", std::string("stream-type-longer-than-the-small-string-buffer")},
                                {"x-max-age", std::string("7D")}}));
  }
  auto consume = [] {
    std::string queue = "a-queue-name-longer-than-the-small-string-buffer";
    return Kept<ConsumeOptions>(ConsumeOptions{.queue = queue, .tag = queue + "-tag", .prefetch = 5});
  }();
  EXPECT_EQ(consume->queue, "a-queue-name-longer-than-the-small-string-buffer");
  EXPECT_EQ(consume->tag, "a-queue-name-longer-than-the-small-string-buffer-tag");
  EXPECT_EQ(consume->prefetch, 5);
}

}  // namespace
}  // namespace warren::client

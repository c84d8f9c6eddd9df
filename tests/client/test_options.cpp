// The options structs are views (options.hpp): trivially copyable and destructible, so GCC 12's
// bitwise copy of a braced temporary in a co_await is harmless; Arguments lists become the
// FieldTable the broker gets; Kept owns what it was built from.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <type_traits>
#include <vector>

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

// Every way a caller writes an options struct's arguments.
enum class ArgumentsForm { empty_inline, inline_list, empty_borrowed, borrowed };

// A Kept built from storage that changes right after the call and then dies: every name on the
// heap (each a distinct text), the arguments in `form`. What the Kept reads afterwards must be
// what the caller wrote then — a view that escaped reads the changed storage (seen in any
// build) or freed memory (a heap-use-after-free under AddressSanitizer).
template <class Options>
Kept<Options> kept_from_dying_storage(ArgumentsForm form, std::vector<std::string>& texts_written) {
  std::deque<std::string> texts;
  wire::FieldTable table;
  if (form == ArgumentsForm::borrowed) table = {{"x-borrowed", std::string("a-value-longer-than-the-small-string-buffer")}};
  const std::string inline_value = "an-inline-value-longer-than-the-small-string-buffer";
  Options options{};
  auto fill = [&](auto& view) {
    if constexpr (std::is_same_v<std::decay_t<decltype(view)>, std::string_view>) {
      view = texts.emplace_back("a-name-longer-than-the-small-string-buffer-" + std::to_string(texts.size()));
      texts_written.push_back(texts.back());
    } else {
      switch (form) {
        case ArgumentsForm::empty_inline: view = Arguments{}; break;
        case ArgumentsForm::inline_list: view = Arguments{{"x-inline", inline_value}}; break;
        case ArgumentsForm::empty_borrowed:
        case ArgumentsForm::borrowed: view = Arguments(table); break;
      }
    }
  };
  detail::each_view(options, fill);
  Kept<Options> kept(options);
  // The caller reuses its storage, then drops it.
  for (auto& t : texts) t.assign(t.size(), 'x');
  table.set("x-added-after-the-call", 1);
  return kept;
}

template <class Options>
void expect_kept_reads_what_was_written(ArgumentsForm form) {
  std::vector<std::string> written;
  const Kept<Options> kept = kept_from_dying_storage<Options>(form, written);
  std::string scribble(200, 's');  // reuses what the storage freed, if anything still points there
  const Kept<Options> copy = kept;
  Options read = *copy;
  std::size_t text = 0;
  auto check = [&](auto& view) {
    if constexpr (std::is_same_v<std::decay_t<decltype(view)>, std::string_view>) {
      ASSERT_LT(text, written.size());
      EXPECT_EQ(view, written[text++]);
    } else {
      const bool has_entry = form == ArgumentsForm::inline_list || form == ArgumentsForm::borrowed;
      EXPECT_EQ(view.empty(), !has_entry);
      EXPECT_FALSE(view.contains("x-added-after-the-call"));
      EXPECT_EQ(view.contains("x-inline"), form == ArgumentsForm::inline_list);
      EXPECT_EQ(view.contains("x-borrowed"), form == ArgumentsForm::borrowed);
      EXPECT_EQ(view.to_table().entries.size(), has_entry ? 1u : 0u);
    }
  };
  detail::each_view(read, check);
  EXPECT_EQ(text, written.size());
}

template <class... Options>
void expect_every_kept_form() {
  for (auto form : {ArgumentsForm::empty_inline, ArgumentsForm::inline_list, ArgumentsForm::empty_borrowed,
                    ArgumentsForm::borrowed}) {
    SCOPED_TRACE(static_cast<int>(form));
    (expect_kept_reads_what_was_written<Options>(form), ...);
  }
}

TEST(Kept, every_options_struct_in_every_arguments_form_outlives_its_callers_storage) {
  expect_every_kept_form<ExchangeDeclareOptions, ExchangeDeleteOptions, ExchangeBindOptions, QueueDeclareOptions,
                         QueueBindOptions, QueuePurgeOptions, QueueDeleteOptions, GetOptions, ConsumeOptions,
                         QosOptions, FlowOptions, RecoverOptions>();
}

}  // namespace
}  // namespace warren::client

// The options structs are views (options.hpp): trivially copyable and destructible, so GCC 12's
// bitwise copy of a braced temporary in a co_await is harmless; Arguments lists become the
// FieldTable the broker gets; Kept owns what it was built from.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "warren/client/connection.hpp"
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
static_assert(all_views<ConnectOptions, EngineOptionsView>,
              "async_connect's inline form owns nothing, for GCC 12's bitwise copy in a co_await");

}  // namespace
// The number of fields of an aggregate: the most initializers `T{...}` takes. Outside the
// unnamed namespace: a conversion declared and only named in unevaluated contexts, which
// clang warns of when its linkage is internal.
namespace field_counting {
struct AnyField {
  template <class T>
  operator T() const;  // NOLINT: only ever named in an unevaluated context
};
template <class T, class... Fields>
constexpr std::size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) return field_count<T, Fields..., AnyField>();
  else return sizeof...(Fields);
}
}  // namespace field_counting
namespace {
using field_counting::field_count;
// The view and the owned form have the same fields (a field added to one is added to both,
// and to connect_options.cpp's two conversions, which the round trip below checks).
static_assert(field_count<ConnectOptions>() == field_count<ClientOptions>());
static_assert(field_count<EngineOptionsView>() == field_count<engine::ConnectionOptions>());
static_assert(field_count<ClientOptions>() == 9 && field_count<engine::ConnectionOptions>() == 15,
              "a field was added: add it to ConnectOptions, EngineOptionsView and connect_options.cpp");

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

struct CountingObserver : Observer {
  void on_record(const Record&) override {}
};

// Every field set to something other than its default, through the view and back.
TEST(ConnectOptions, a_client_options_viewed_and_owned_again_is_the_same_in_every_field) {
  ClientOptions o;
  o.engine.user = std::string(40, 'u');
  o.engine.password = std::string(40, 'p');
  o.engine.vhost = "/a-vhost-longer-than-the-small-string-buffer";
  o.engine.mechanism = engine::Mechanism::external;
  o.engine.connection_name = "a-connection-name-longer-than-the-small-string-buffer";
  o.engine.client_properties = {{"app", std::string("an-app-name-longer-than-the-small-string-buffer")}};
  o.engine.heartbeat_s = 7;
  o.engine.frame_max_bytes = 4096;
  o.engine.channel_max = 9;
  o.engine.handshake_timeout = engine::Duration(1);
  o.engine.request_timeout = engine::Duration(2);
  o.engine.close_timeout = engine::Duration(3);
  o.engine.default_prefetch = 4;
  o.engine.output_limit_bytes = 5;
  o.engine.max_body_bytes = 6;
  o.connect_timeout = engine::Duration(8);
  o.ca_pem = "ca";
  o.client_cert_pem = "cert";
  o.client_key_pem = "key";
  o.read_batching = {.min_bytes = 1, .max_wait = std::chrono::microseconds(2), .burst_bytes = 3, .owed_confirms = 4};
  o.observer = std::make_shared<CountingObserver>();
  o.metrics = std::make_shared<Metrics>();
  o.credentials = credentials_from([](Callback<Credentials> done) { done(Credentials{.secret = "s"}); });
  const ClientOptions back = static_cast<ConnectOptions>(o).owned();
  EXPECT_EQ(back.engine.user, o.engine.user);
  EXPECT_EQ(back.engine.password, o.engine.password);
  EXPECT_EQ(back.engine.vhost, o.engine.vhost);
  EXPECT_EQ(back.engine.mechanism, o.engine.mechanism);
  EXPECT_EQ(back.engine.connection_name, o.engine.connection_name);
  EXPECT_EQ(back.engine.client_properties, o.engine.client_properties);
  EXPECT_EQ(back.engine.heartbeat_s, o.engine.heartbeat_s);
  EXPECT_EQ(back.engine.frame_max_bytes, o.engine.frame_max_bytes);
  EXPECT_EQ(back.engine.channel_max, o.engine.channel_max);
  EXPECT_EQ(back.engine.handshake_timeout, o.engine.handshake_timeout);
  EXPECT_EQ(back.engine.request_timeout, o.engine.request_timeout);
  EXPECT_EQ(back.engine.close_timeout, o.engine.close_timeout);
  EXPECT_EQ(back.engine.default_prefetch, o.engine.default_prefetch);
  EXPECT_EQ(back.engine.output_limit_bytes, o.engine.output_limit_bytes);
  EXPECT_EQ(back.engine.max_body_bytes, o.engine.max_body_bytes);
  EXPECT_EQ(back.connect_timeout, o.connect_timeout);
  EXPECT_EQ(back.ca_pem, o.ca_pem);
  EXPECT_EQ(back.client_cert_pem, o.client_cert_pem);
  EXPECT_EQ(back.client_key_pem, o.client_key_pem);
  EXPECT_EQ(back.read_batching.min_bytes, 1u);
  EXPECT_EQ(back.read_batching.max_wait, std::chrono::microseconds(2));
  EXPECT_EQ(back.read_batching.burst_bytes, 3u);
  EXPECT_EQ(back.read_batching.owed_confirms, 4u);
  EXPECT_EQ(back.observer, o.observer);
  EXPECT_EQ(back.metrics, o.metrics);
  EXPECT_EQ(back.credentials, o.credentials);
}

// Written inline, the view's defaults are ClientOptions' own.
TEST(ConnectOptions, the_views_defaults_are_the_owned_defaults) {
  const ClientOptions defaults;
  const ClientOptions inline_form = ConnectOptions{.engine = {.heartbeat_s = 5}}.owned();
  EXPECT_EQ(inline_form.engine.heartbeat_s, 5);
  EXPECT_EQ(inline_form.engine.user, defaults.engine.user);
  EXPECT_EQ(inline_form.engine.password, defaults.engine.password);
  EXPECT_EQ(inline_form.engine.vhost, defaults.engine.vhost);
  EXPECT_EQ(inline_form.engine.frame_max_bytes, defaults.engine.frame_max_bytes);
  EXPECT_EQ(inline_form.engine.channel_max, defaults.engine.channel_max);
  EXPECT_EQ(inline_form.engine.request_timeout, defaults.engine.request_timeout);
  EXPECT_EQ(inline_form.engine.default_prefetch, defaults.engine.default_prefetch);
  EXPECT_EQ(inline_form.engine.output_limit_bytes, defaults.engine.output_limit_bytes);
  EXPECT_EQ(inline_form.engine.max_body_bytes, defaults.engine.max_body_bytes);
  EXPECT_TRUE(inline_form.engine.client_properties.entries.empty());
  EXPECT_EQ(inline_form.read_batching.min_bytes, defaults.read_batching.min_bytes);
  EXPECT_EQ(inline_form.read_batching.owed_confirms, defaults.read_batching.owed_confirms);
  EXPECT_FALSE(inline_form.connect_timeout.has_value());
  EXPECT_EQ(inline_form.observer, nullptr);
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

// The messaging layer's verb options are views, as the client's are: trivially destructible,
// so GCC 12's bitwise copy of a braced temporary in a co_await is harmless (the install check
// runs every layer that way: tests/install/layer_inline_forms.cpp); and the Kept* copies an
// Asio token keeps own every string and table after the caller's storage is gone.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>

#include "warren/messaging/backplane.hpp"
#include "warren/messaging/kept_options.hpp"

namespace warren::messaging {
namespace {

template <class... Options>
constexpr bool all_views = ((std::is_trivially_copyable_v<Options> && std::is_trivially_destructible_v<Options>) && ...);
static_assert(all_views<PutOptions, RetryOptions, SendOptions, GroupOptions, InboxOptions, WorkerOptions, BackplaneOptions,
                        From, ReadOptions, AppendOptions>,
              "an options struct of a verb that owns memory crashes GCC 12 when written inline in a co_await");

// Written from heap strings and a table that are changed, then freed, right after the copy.
TEST(KeptOptions, every_copy_reads_what_was_written_after_the_callers_storage_is_gone) {
  auto text = [](const char* what) { return std::make_unique<std::string>(std::string(what) + "-longer-than-the-small-string-buffer"); };
  auto body = text("body"), id = text("id"), error = text("error"), address = text("address"), position = text("position");
  auto value = text("value");
  auto table = std::make_unique<client::FieldTable>(client::FieldTable{{"x-borrowed", *value}});
  auto state = text("vendor=state");
  const auto trace = client::TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", *state);
  const KeptPut put(PutOptions{.body = *body, .headers = {{"x-inline", *value}}, .message_id = *id, .trace = *trace});
  const KeptRetry retry(RetryOptions{.error = *error, .headers = *table});
  const KeptSend send(SendOptions{.address = *address, .body = *body, .reply_to = *address, .correlation_id = *id,
                                  .headers = *table});
  const KeptFrom from(From{.position = *position});
  for (auto* s : {&body, &id, &error, &address, &position, &value, &state}) (*s)->assign((*s)->size(), 'x');
  table->set("x-added-after", 1);
  body.reset(), id.reset(), error.reset(), address.reset(), position.reset(), value.reset(), state.reset(), table.reset();
  const std::string scribble(300, 's');

  const std::string v = "value-longer-than-the-small-string-buffer";
  EXPECT_EQ(put.view().body, "body-longer-than-the-small-string-buffer");
  EXPECT_EQ(put.view().message_id, "id-longer-than-the-small-string-buffer");
  EXPECT_EQ(put.view().headers.to_table(), (client::FieldTable{{"x-inline", v}}));
  EXPECT_EQ(put.view().trace.trace_id, trace->trace_id);
  EXPECT_EQ(put.view().trace.tracestate, "vendor=state-longer-than-the-small-string-buffer");
  EXPECT_EQ(retry.view().error, "error-longer-than-the-small-string-buffer");
  EXPECT_EQ(retry.view().headers.to_table(), (client::FieldTable{{"x-borrowed", v}}));
  EXPECT_EQ(send.view().address, "address-longer-than-the-small-string-buffer");
  EXPECT_EQ(send.view().reply_to, "address-longer-than-the-small-string-buffer");
  EXPECT_EQ(send.view().correlation_id, "id-longer-than-the-small-string-buffer");
  EXPECT_FALSE(send.view().headers.contains("x-added-after"));
  EXPECT_EQ(from.view().position, "position-longer-than-the-small-string-buffer");
  // A Kept moved keeps its views right (a short string's characters move with it).
  const KeptFrom moved = KeptFrom(From{.position = "last"});
  EXPECT_EQ(moved.view().position, "last");
}

}  // namespace
}  // namespace warren::messaging

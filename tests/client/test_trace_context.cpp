// Issue 24, traces: W3C Trace Context parsed and written by the spec's rules, carried in a
// publish's headers (in place of any the application's headers had) and read back from a
// delivery without decoding the rest of its headers. On the fake driver's model broker.
#include <gtest/gtest.h>

#include <set>

#include "client/world_channel.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/trace_context.hpp"

namespace warren::test {
namespace {

using client::TraceContext;

constexpr std::string_view example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContext, parses_and_writes_the_specs_example) {
  auto c = TraceContext::parse(example, "congo=t61rcWkgMzE");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id[0], 0x4b);
  EXPECT_EQ(c->trace_id[15], 0x36);
  EXPECT_EQ(c->span_id[0], 0x00);
  EXPECT_EQ(c->span_id[7], 0xb7);
  EXPECT_TRUE(c->sampled());
  EXPECT_EQ(c->tracestate, "congo=t61rcWkgMzE");
  EXPECT_EQ(c->traceparent(), example);
}

TEST(TraceContext, refuses_what_the_spec_refuses) {
  const std::string ok(example);
  auto with = [&](std::size_t at, char ch) {
    std::string s = ok;
    s[at] = ch;
    return s;
  };
  for (const std::string& bad : std::vector<std::string>{
           std::string(""), ok.substr(0, 54), ok + "-",                          // lengths
           with(3, 'A'),                                                         // uppercase hex
           "ff" + ok.substr(2),                                                  // version ff
           with(2, '_'), with(35, '_'), with(52, '_'),                           // separators
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",            // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",            // zero span id
           with(53, 'x'),                                                        // flags not hex
           "01" + ok.substr(2) + "x",                                            // later version, no '-'
       })
    EXPECT_FALSE(TraceContext::parse(bad).has_value()) << bad;
  // A later version is read by its first four fields and may carry more.
  auto later = TraceContext::parse("cc" + ok.substr(2) + "-what-comes-next");
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->traceparent(), ok) << "written back as version 00";
}

TEST(TraceContext, a_child_keeps_the_trace_and_takes_a_new_span) {
  auto parent = *TraceContext::parse(example, "k=v");
  std::set<std::array<std::uint8_t, 8>> spans{parent.span_id};
  for (int i = 0; i < 100; ++i) {
    auto child = parent.child();
    EXPECT_EQ(child.trace_id, parent.trace_id);
    EXPECT_EQ(child.flags, parent.flags);
    EXPECT_EQ(child.tracestate, "k=v");
    EXPECT_TRUE(child.valid());
    EXPECT_TRUE(spans.insert(child.span_id).second) << "a span id repeated";
  }
  auto root = TraceContext::new_root();
  EXPECT_TRUE(root.valid());
  EXPECT_TRUE(root.sampled());
  EXPECT_NE(root.trace_id, parent.trace_id);
}

class TracedPublish : public WorldChannelTest {
 protected:
  void SetUp() override {
    WorldChannelTest::SetUp();
    world.queues["q"];
  }
  client::Message next() {
    std::optional<client::Message> m;
    ch.get({.queue = "q", .auto_ack = true}, [&](Result<std::optional<client::Message>> r) {
      if (r && *r) m = std::move(**r);
    });
    driver.run();
    if (!m) throw std::runtime_error("no message");
    return std::move(*m);
  }
};

TEST_F(TracedPublish, a_publish_writes_its_context_and_a_delivery_reads_it_back) {
  const auto sent = TraceContext::parse(example, "rojo=00f067aa0ba902b7").value();
  ch.publish({.routing_key = "q", .trace = sent}, "traced", nullptr);
  ch.publish({.routing_key = "q"}, "plain", nullptr);
  driver.run();
  auto traced = next();
  EXPECT_EQ(traced.trace(), sent);
  auto headers = traced.headers();
  ASSERT_TRUE(headers.ok());
  ASSERT_NE(headers->find("traceparent"), nullptr);
  EXPECT_EQ(*headers->find("traceparent"), wire::FieldValue(std::string(example))) << "a long string, as peers write it";
  auto plain = next();
  EXPECT_EQ(plain.trace(), std::nullopt);
  EXPECT_FALSE(plain.properties().headers.has_value()) << "no context, no headers written";
}

TEST_F(TracedPublish, the_context_replaces_one_the_applications_headers_had_and_an_old_tracestate_goes) {
  // A stage forwarding a message's headers with a context of its own: one traceparent goes out,
  // the new one; the old trace's tracestate is not carried into the new span.
  wire::FieldTable forwarded{{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                             {"tracestate", "old=1"},
                             {"x-app", "kept"}};
  const auto sent = TraceContext::parse(example).value().child();
  ch.publish({.routing_key = "q", .properties = {.headers = wire::TableRef(forwarded)}, .trace = sent}, "forwarded", nullptr);
  driver.run();
  auto m = next();
  EXPECT_EQ(m.trace(), sent);
  auto headers = m.headers();
  ASSERT_TRUE(headers.ok());
  EXPECT_EQ(*headers, (wire::FieldTable{{"x-app", "kept"}, {"traceparent", sent.traceparent()}}));
}

}  // namespace
}  // namespace warren::test

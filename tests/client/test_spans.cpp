// Issue 24, traces: an observer that wants spans (Observer::wants_spans) is handed one
// SpanRecord per publish, push delivery's callback, basic.get and settle, named and attributed
// per OpenTelemetry's messaging conventions, with the parent and link a tracer needs to join
// them into one trace: the message carries its send span, a consumer's process span is a child
// of that, a settle inside the callback a child of the process span. On the fake driver.
#include <gtest/gtest.h>

#include <map>

#include "client/fake_driver.hpp"
#include "client/open_channel.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

struct Span {
  std::string name, kind, operation_type, operation_name;
  client::TraceContext context;
  std::optional<client::TraceContext> parent, link;
  std::chrono::system_clock::time_point start, end;
  std::map<std::string, std::string> attributes;  // numbers as text
};

struct SpanRecorder : client::Observer {
  bool spans = true;
  std::vector<Span> recorded;
  void on_record(const client::Record&) override {}
  [[nodiscard]] bool wants_spans() const noexcept override { return spans; }
  void on_span(const client::SpanRecord& s) override {
    Span out{std::string(s.name), client::to_string(s.kind), std::string(s.operation_type),
             std::string(s.operation_name), s.context, s.parent, s.link, s.start, s.end, {}};
    // The views last for the call only: ids are kept, tracestates dropped.
    out.context.tracestate = {};
    if (out.parent) out.parent->tracestate = {};
    if (out.link) out.link->tracestate = {};
    for (const auto& a : s.attributes())
      out.attributes[std::string(a.key)] = a.is_number ? std::to_string(a.number) : std::string(a.text);
    recorded.push_back(std::move(out));
  }
  [[nodiscard]] std::vector<Span> named(std::string_view name) const {
    std::vector<Span> out;
    for (const auto& s : recorded)
      if (s.name == name) out.push_back(s);
    return out;
  }
};

bool same_ids(const client::TraceContext& a, const client::TraceContext& b) {
  return a.trace_id == b.trace_id && a.span_id == b.span_id;
}

class SpansTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<SpanRecorder> recorder = std::make_shared<SpanRecorder>();

  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
    world.queues["q"];
  }
  std::shared_ptr<client::Connection> dial() {
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    bool ready = false;
    auto c = client::Connection::connect(driver, *url, {.observer = recorder}, [&](Result<void> r) { ready = r.ok(); });
    driver.run();
    if (!ready) throw std::runtime_error("no connection");
    return c;
  }
  std::string carried_state;  // the tracestate carried() found, kept: the message is gone
  // What the queue's next message carried, by basic.get on a channel of `c`; its tracestate is
  // in carried_state (the view would outlive the message).
  std::optional<client::TraceContext> carried(client::Connection& c) {
    auto ch = open_channel_now(driver, c);
    std::optional<client::Message> got;
    ch.get({.queue = "q", .auto_ack = true}, [&](Result<std::optional<client::Message>> r) {
      if (r && *r) got = std::move(*r);
    });
    driver.run();
    if (!got) throw std::runtime_error("the queue was empty");
    auto trace = got->trace();
    carried_state = trace ? std::string(trace->tracestate) : std::string();
    if (trace) trace->tracestate = {};
    return trace;
  }
};

TEST_F(SpansTest, a_publish_is_a_producer_span_under_the_callers_context_and_its_message_carries_that_span) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  ch.confirm_select(nullptr);
  driver.run();
  const auto caller = *client::TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v");
  std::optional<Result<engine::PublishOutcome>> outcome;
  ch.publish({.routing_key = "q", .properties = {.message_id = "m-1"}, .trace = caller}, "hello",
             [&](Result<engine::PublishOutcome> r) { outcome = r; });
  driver.run();
  ASSERT_TRUE(outcome && outcome->ok());

  ASSERT_EQ(recorder->recorded.size(), 1u);
  const Span send = recorder->recorded[0];
  EXPECT_EQ(send.name, "publish") << "the default exchange: the conventions leave the destination out";
  EXPECT_EQ(send.kind, "producer");
  EXPECT_EQ(send.operation_type, "send");
  ASSERT_TRUE(send.parent.has_value());
  EXPECT_TRUE(same_ids(*send.parent, caller));
  EXPECT_EQ(send.context.trace_id, caller.trace_id);
  EXPECT_NE(send.context.span_id, caller.span_id) << "a span of its own, not the caller's";
  EXPECT_LE(send.start, send.end);
  EXPECT_EQ(send.attributes.at("messaging.system"), "rabbitmq");
  EXPECT_EQ(send.attributes.at("messaging.operation.name"), "publish");
  EXPECT_EQ(send.attributes.at("messaging.destination.name"), "");
  EXPECT_EQ(send.attributes.at("messaging.rabbitmq.destination.routing_key"), "q");
  EXPECT_EQ(send.attributes.at("messaging.message.id"), "m-1");
  EXPECT_EQ(send.attributes.at("messaging.message.body.size"), "5");
  EXPECT_EQ(send.attributes.at("server.address"), "fake");
  EXPECT_EQ(send.attributes.at("server.port"), "5001");
  EXPECT_EQ(send.attributes.count("error.type"), 0u);

  const auto in_message = carried(*c);
  ASSERT_TRUE(in_message.has_value());
  EXPECT_TRUE(same_ids(*in_message, send.context)) << "a consumer's parent is the send span";
  EXPECT_EQ(carried_state, "k=v") << "the caller's tracestate goes on";

  // No caller's context: the send span starts a trace, and the message carries it.
  recorder->recorded.clear();
  ch.publish({.routing_key = "q"}, "root", nullptr);
  driver.run();
  ASSERT_EQ(recorder->recorded.size(), 1u);
  EXPECT_FALSE(recorder->recorded[0].parent.has_value());
  EXPECT_TRUE(recorder->recorded[0].context.valid());
  const auto root_carried = carried(*c);
  ASSERT_TRUE(root_carried.has_value());
  EXPECT_TRUE(same_ids(*root_carried, recorder->recorded[0].context));
}

TEST_F(SpansTest, a_nacked_publish_and_one_in_flight_when_the_connection_ends_are_failed_spans) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  ch.confirm_select(nullptr);
  driver.run();
  driver.last_broker().nack_next_publish();
  ch.publish({.exchange = "", .routing_key = "q"}, "nacked", nullptr);
  driver.run();
  ASSERT_EQ(recorder->recorded.size(), 1u);
  EXPECT_EQ(recorder->recorded[0].attributes.at("error.type"), "nacked");

  driver.last_broker().hold_confirms(true);
  ch.publish({.routing_key = "q"}, "never confirmed", nullptr);
  driver.run();
  EXPECT_EQ(recorder->recorded.size(), 1u) << "in flight: its span has not ended";
  driver.last_broker().close_connection(320, "CONNECTION_FORCED - broker shutdown");
  driver.run();
  ASSERT_EQ(recorder->recorded.size(), 2u);
  EXPECT_EQ(recorder->recorded[1].name, "publish");
  EXPECT_EQ(recorder->recorded[1].attributes.count("error.type"), 1u);
}

// The callback-free publish takes no reference to its connection (ChannelCore::live_here). A
// refused publish's span reaches the observer inside the publish: an observer that drops the
// connection's last reference there must not leave the publish in freed memory (ASan in CI;
// without the reference the publish reads the connection after the observer returns).
TEST_F(SpansTest, an_observer_that_drops_the_last_reference_inside_a_refused_publishs_span_is_safe) {
  struct Dropper : SpanRecorder {
    std::shared_ptr<client::Connection>* held = nullptr;
    void on_span(const client::SpanRecord& s) override {
      SpanRecorder::on_span(s);
      if (held) held->reset();
    }
  };
  auto dropper = std::make_shared<Dropper>();
  recorder = dropper;
  auto url = client::parse_url("amqp://guest:guest@fake:5001");
  ASSERT_TRUE(url.ok());
  client::ClientOptions options{.observer = recorder};
  options.engine.max_body_bytes = 4;
  bool ready = false;
  auto c = client::Connection::connect(driver, *url, std::move(options), [&](Result<void> r) { ready = r.ok(); });
  driver.run();
  ASSERT_TRUE(ready);
  auto ch = open_channel_now(driver, *c);
  std::weak_ptr<client::Connection> weak = c;
  dropper->held = &c;
  auto r = ch.publish({.routing_key = "q"}, client::as_bytes(std::string_view("too long for four")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, make_error_code(errc::message_too_large)) << r.error().to_string();
  ASSERT_EQ(dropper->recorded.size(), 1u) << "the refused publish's span";
  EXPECT_FALSE(c) << "the observer did not drop the reference";
  driver.run();
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(ch.publish({.routing_key = "q"}, client::as_bytes(std::string_view("x"))).ok());
}

TEST_F(SpansTest, a_push_delivery_is_a_process_span_under_the_send_span_and_a_settle_in_it_is_its_child) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  std::optional<client::TraceContext> seen_span, seen_trace;
  client::Consumer consumer;
  ch.consume({.queue = "q", .tag = "ctag"},
             [&](const client::Delivery& d) {
               seen_span = d.span();
               seen_trace = d.trace();
               // The application's own publish inside: a child of the process span.
               ch.publish({.routing_key = "elsewhere", .trace = *d.span()}, "reply", nullptr);
               (void)d.ack();
             },
             [&](Result<client::Consumer> r) {
               if (r) consumer = std::move(*r);
             });
  driver.run();
  ASSERT_TRUE(consumer.active());
  ch.publish({.routing_key = "q"}, "work", nullptr);
  driver.run();
  ASSERT_TRUE(seen_span.has_value()) << "Delivery::span() during the callback";

  const auto sends = recorder->named("publish");
  ASSERT_EQ(sends.size(), 2u);
  const auto processes = recorder->named("process q");
  ASSERT_EQ(processes.size(), 1u);
  const Span& process = processes[0];
  EXPECT_EQ(process.kind, "consumer");
  EXPECT_EQ(process.operation_type, "process");
  ASSERT_TRUE(process.parent && process.link);
  EXPECT_TRUE(same_ids(*process.parent, sends[0].context)) << "the process span continues the producer's trace";
  EXPECT_TRUE(same_ids(*process.link, sends[0].context)) << "and links to it";
  EXPECT_TRUE(same_ids(*seen_trace, sends[0].context));
  EXPECT_TRUE(same_ids(*seen_span, process.context));
  EXPECT_EQ(process.attributes.at("messaging.destination.subscription.name"), "q");
  EXPECT_EQ(process.attributes.at("messaging.rabbitmq.message.delivery_tag"), "1");
  EXPECT_EQ(process.attributes.at("messaging.message.body.size"), "4");

  ASSERT_TRUE(sends[1].parent.has_value());
  EXPECT_TRUE(same_ids(*sends[1].parent, process.context)) << "a publish inside the callback is the process span's child";

  const auto acks = recorder->named("ack q");
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].kind, "client");
  EXPECT_EQ(acks[0].operation_type, "settle");
  ASSERT_TRUE(acks[0].parent.has_value());
  EXPECT_TRUE(same_ids(*acks[0].parent, process.context));
  EXPECT_EQ(acks[0].attributes.at("messaging.rabbitmq.message.delivery_tag"), "1");
  EXPECT_EQ(acks[0].attributes.count("messaging.message.body.size"), 0u);
  // The callback's span ends after what it did inside.
  EXPECT_GE(process.end, acks[0].end);
}

// The process span names its queue when it ends, after the callback: a callback that
// subscribes again (the connection's list of subscriptions may grow and move) leaves it its
// queue's name, never a view of where the list held it.
TEST_F(SpansTest, a_callback_that_subscribes_more_queues_leaves_its_process_span_its_queue_name) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  std::vector<client::Consumer> more;
  client::Consumer consumer;
  ch.consume({.queue = "q", .tag = "t"},
             [&](const client::Delivery& d) {
               for (int i = 0; i < 16; ++i) {
                 const std::string queue = "q" + std::to_string(i);
                 world.queues[queue];
                 ch.consume({.queue = queue, .tag = "t" + std::to_string(i)}, [](const client::Delivery&) {},
                            [&](Result<client::Consumer> r) {
                              if (r) more.push_back(std::move(*r));
                            });
               }
               (void)d.ack();
             },
             [&](Result<client::Consumer> r) {
               if (r) consumer = std::move(*r);
             });
  driver.run();
  ch.publish({.routing_key = "q"}, "work", nullptr);
  driver.run();
  EXPECT_EQ(more.size(), 16u);
  const auto processes = recorder->named("process q");
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_EQ(processes[0].attributes.at("messaging.destination.subscription.name"), "q");
}

TEST_F(SpansTest, a_basic_get_is_a_receive_span_linked_to_the_producers) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  const auto caller = client::TraceContext::new_root();
  ch.publish({.routing_key = "q", .trace = caller}, "pulled", nullptr);
  driver.run();
  const auto in_message = carried(*c);
  ASSERT_TRUE(in_message.has_value());
  const auto gets = recorder->named("get q");
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].kind, "client");
  EXPECT_EQ(gets[0].operation_type, "receive");
  ASSERT_TRUE(gets[0].link.has_value());
  EXPECT_TRUE(same_ids(*gets[0].link, *in_message));
  EXPECT_EQ(gets[0].attributes.at("messaging.message.body.size"), "6");
}

// A context already in the headers (a work queue's retry copy, a pipeline's output, a message
// sent on by hand with its headers) is the caller's when Publish::trace gives none: the send
// span is its child, in the same trace, and its tracestate goes on. Spans on or off, a
// message's trace survives every hop; only a publish with no context anywhere starts a trace.
TEST_F(SpansTest, a_traceparent_already_in_the_headers_is_the_parent_when_the_publish_names_none) {
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  const auto upstream = *client::TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "");
  const wire::FieldTable headers{{"traceparent", upstream.traceparent()}, {"tracestate", std::string("vendor=kept")},
                                 {"x-other", std::string("stays")}};
  ch.publish({.routing_key = "q", .properties = {.headers = wire::TableRef(headers)}}, "forwarded", nullptr);
  driver.run();
  ASSERT_EQ(recorder->recorded.size(), 1u);
  const Span send = recorder->recorded[0];
  ASSERT_TRUE(send.parent.has_value()) << "a new root replaced the headers' context";
  EXPECT_TRUE(same_ids(*send.parent, upstream));
  EXPECT_EQ(send.context.trace_id, upstream.trace_id);
  const auto in_message = carried(*c);
  ASSERT_TRUE(in_message.has_value());
  EXPECT_EQ(in_message->trace_id, upstream.trace_id) << "the message left the trace it came in";
  EXPECT_TRUE(same_ids(*in_message, send.context));
  EXPECT_EQ(carried_state, "vendor=kept") << "the headers' tracestate goes on with their trace";

  // Publish::trace still comes first.
  recorder->recorded.clear();
  const auto caller = client::TraceContext::new_root();
  ch.publish({.routing_key = "q", .properties = {.headers = wire::TableRef(headers)}, .trace = caller}, "traced", nullptr);
  driver.run();
  ASSERT_EQ(recorder->recorded.size(), 1u);
  ASSERT_TRUE(recorder->recorded[0].parent.has_value());
  EXPECT_TRUE(same_ids(*recorder->recorded[0].parent, caller));
  EXPECT_EQ(carried(*c)->trace_id, caller.trace_id);
  EXPECT_EQ(carried_state, "") << "the headers' tracestate went with their context";

  // Spans off (asked when the connection is made): the headers go as they are.
  recorder->spans = false;
  auto plain = dial();
  auto plain_ch = open_channel_now(driver, *plain);
  plain_ch.publish({.routing_key = "q", .properties = {.headers = wire::TableRef(headers)}}, "untouched", nullptr);
  driver.run();
  const auto as_sent = carried(*plain);
  ASSERT_TRUE(as_sent.has_value());
  EXPECT_TRUE(same_ids(*as_sent, upstream));
  EXPECT_EQ(carried_state, "vendor=kept");
}

TEST_F(SpansTest, an_observer_that_wants_no_spans_gets_none_and_its_messages_carry_only_what_was_given) {
  recorder->spans = false;
  auto c = dial();
  auto ch = open_channel_now(driver, *c);
  ch.publish({.routing_key = "q"}, "plain", nullptr);
  driver.run();
  EXPECT_FALSE(carried(*c).has_value()) << "no span, no traceparent written";
  EXPECT_TRUE(recorder->recorded.empty());
}

}  // namespace
}  // namespace warren::test

// RpcClient and RpcServer against the real broker, on both drivers: many concurrent calls on
// one channel told apart by correlation id, stray and duplicate replies dropped, unroutable
// requests failing at once, and the end of the reply consumer failing the calls in flight.
#include "client_fixture.hpp"
#include "warren/client/rpc.hpp"

namespace warren::test {
namespace {

class RpcSuite : public ClientSuite {
 protected:
  std::shared_ptr<client::RpcClient> start_client(client::Channel ch) {
    std::optional<std::string> ready;
    auto rpc = client::RpcClient::start(ch, [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
    EXPECT_TRUE(loop.run_until([&] { return ready.has_value(); }));
    EXPECT_EQ(ready.value_or("<none>"), "ok");
    return rpc;
  }
  std::string server_queue() { return temp_queue(open()); }
  // A server on `requests` answering "re:" + the body; null (and a failure) if it did not start.
  std::shared_ptr<client::RpcServer> start_echo_server(const std::string& requests) {
    std::optional<std::string> serving;
    auto server = client::RpcServer::start(
        open(), requests, [](const client::Delivery& m) { return "re:" + std::string(m.body_text()); },
        [&](Result<void> r) { serving = r ? "ok" : r.error().to_string(); });
    EXPECT_TRUE(loop.run_until([&] { return serving.has_value(); }));
    EXPECT_EQ(serving.value_or("<not told>"), "ok");
    return serving == "ok" ? server : nullptr;
  }
  // "re:body" or the error, as a call's outcome reads.
  static std::string said(const Result<client::Message>& r) { return r ? std::string(r->body_text()) : r.error().to_string(); }
};

TEST_P(RpcSuite, a_thousand_concurrent_calls_on_one_channel_each_get_their_own_reply) {
  const std::string requests = server_queue();
  auto server = start_echo_server(requests);
  ASSERT_TRUE(server);
  auto rpc = start_client(open());

  constexpr int calls = 1000;
  int matched = 0, wrong = 0;
  std::vector<std::string> bodies(calls);
  for (int i = 0; i < calls; ++i) {
    bodies[i] = "call " + std::to_string(i);
    rpc->call({.routing_key = requests, .timeout = 10s}, text(bodies[i]), [&, i](Result<client::Message> reply) {
      if (reply && reply->body_text() == "re:call " + std::to_string(i)) ++matched;
      else ++wrong;
    });
  }
  EXPECT_EQ(rpc->in_flight(), static_cast<std::size_t>(calls));
  ASSERT_TRUE(loop.run_until([&] { return matched + wrong == calls; }, 30s));
  EXPECT_EQ(matched, calls);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(rpc->in_flight(), 0u);
  EXPECT_EQ(server->answered(), static_cast<std::uint64_t>(calls));
  EXPECT_EQ(rpc->dropped_replies(), 0u);
}

// Issue 24: a call carries its trace context, and the reply continues the trace: a child of
// the request's (the server's span), not a copy of it.
TEST_P(RpcSuite, a_reply_continues_the_requests_trace) {
  const std::string requests = server_queue();
  std::optional<client::TraceContext> seen;
  std::optional<std::string> serving;
  auto server = client::RpcServer::start(
      open(), requests,
      [&](const client::Delivery& m) {
        seen = m.trace();
        return std::string("traced");
      },
      [&](Result<void> r) { serving = r ? "ok" : r.error().to_string(); });
  ASSERT_TRUE(loop.run_until([&] { return serving.has_value(); }));
  ASSERT_EQ(*serving, "ok");
  auto rpc = start_client(open());
  const auto sent = client::TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").value();
  std::optional<Result<client::Message>> reply;
  rpc->call({.routing_key = requests, .timeout = 10s, .trace = sent}, text("x"), [&](Result<client::Message> r) { reply = std::move(r); });
  ASSERT_TRUE(loop.run_until([&] { return reply.has_value(); }));
  ASSERT_TRUE(reply->ok()) << reply->error().to_string();
  EXPECT_EQ(seen, sent) << "the request carried the caller's context";
  const auto back = (*reply)->trace();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->trace_id, sent.trace_id);
  EXPECT_NE(back->span_id, sent.span_id);
}

TEST_P(RpcSuite, stray_and_duplicate_replies_are_dropped) {
  const std::string requests = server_queue();
  // A server that first answers with an id nobody asked for, then answers twice.
  const auto server_ch = open();
  std::optional<std::string> consuming;
  client::Consumer server;
  server_ch.consume(
      {.queue = requests, .auto_ack = true},
      [&](const client::Delivery& m) {
        const std::string to(*m.properties().reply_to);
        const auto id = m.properties().correlation_id;
        (void)server_ch.publish({.routing_key = to, .properties = {.correlation_id = "not-a-call-of-ours"}}, text("stray"));
        (void)server_ch.publish({.routing_key = to, .properties = {.correlation_id = id}}, text("first"));
        (void)server_ch.publish({.routing_key = to, .properties = {.correlation_id = id}}, text("second"));
      },
      [&](Result<client::Consumer> r) {
        consuming = r ? "ok" : r.error().to_string();
        if (r) server = std::move(*r);
      });
  ASSERT_TRUE(loop.run_until([&] { return consuming.has_value(); }));
  auto rpc = start_client(open());

  std::vector<std::string> replies;
  rpc->call({.routing_key = requests, .timeout = 10s}, text("x"), [&](Result<client::Message> reply) { replies.push_back(said(reply)); });
  ASSERT_TRUE(loop.run_until([&] { return rpc->dropped_replies() == 2; }));
  EXPECT_EQ(replies, std::vector<std::string>{"first"});
}

TEST_P(RpcSuite, a_request_nobody_can_receive_fails_at_once_with_the_return) {
  auto rpc = start_client(open());
  std::optional<std::string> outcome;
  const auto started = std::chrono::steady_clock::now();
  rpc->call({.routing_key = "no-such-queue-for-rpc", .timeout = 30s}, text("x"),
            [&](Result<client::Message> r) { outcome = said(r); });
  ASSERT_TRUE(loop.run_until([&] { return outcome.has_value(); }));
  EXPECT_EQ(*outcome, "unroutable (312): NO_ROUTE (the default exchange, routing key \"no-such-queue-for-rpc\")");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST_P(RpcSuite, a_call_without_an_answer_times_out_on_its_own_deadline) {
  const std::string requests = server_queue();  // nobody serves it
  auto rpc = start_client(open());
  std::vector<std::string> outcomes;
  rpc->call({.routing_key = requests, .timeout = 300ms}, text("slow"),
            [&](Result<client::Message> r) { outcomes.push_back("300ms: " + said(r)); });
  rpc->call({.routing_key = requests, .timeout = 5s}, text("slower"),
            [&](Result<client::Message> r) { outcomes.push_back("5s: " + said(r)); });
  ASSERT_TRUE(loop.run_until([&] { return !outcomes.empty(); }));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].rfind("300ms: timed out: no reply to call ", 0), 0u) << outcomes[0];
  EXPECT_EQ(rpc->in_flight(), 1u);
  // Dropped with a call in flight: the call is still told, from the loop.
  rpc.reset();
  EXPECT_EQ(outcomes.size(), 1u);
  ASSERT_TRUE(loop.run_until([&] { return outcomes.size() == 2; }));
  EXPECT_EQ(outcomes[1], "5s: channel closed: the RPC client was destroyed");
}

TEST_P(RpcSuite, when_the_reply_consumer_ends_the_calls_in_flight_fail_at_once) {
  const std::string requests = server_queue();  // nobody serves it
  const auto rpc_ch = open();
  auto rpc = start_client(rpc_ch);
  std::vector<std::string> outcomes;
  for (int i = 0; i < 3; ++i)
    rpc->call({.routing_key = requests, .timeout = 30s}, text("x"), [&](Result<client::Message> r) { outcomes.push_back(said(r)); });
  // A channel error on the RPC channel: the broker closes it, and the reply consumer with it.
  rpc_ch.queue_declare({.name = "no-such-queue-for-rpc", .passive = true}, nullptr);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.run_until([&] { return outcomes.size() == 3; }));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  for (const auto& o : outcomes) EXPECT_NE(o.find("404"), std::string::npos) << o;
  // Later calls fail without being sent.
  std::optional<std::string> later;
  rpc->call({.routing_key = requests, .timeout = 30s}, text("x"), [&](Result<client::Message> r) { later = said(r); });
  ASSERT_TRUE(loop.run_until([&] { return later.has_value(); }));
  EXPECT_NE(later->find("404"), std::string::npos) << *later;
}

// RabbitMQ closes the channel (406 "fast reply consumer does not exist") for a publish naming
// amq.rabbitmq.reply-to from a channel not consuming it: a call made right after start, before
// ready, must wait for the reply consumer and then be answered.
TEST_P(RpcSuite, a_call_made_before_ready_waits_for_the_reply_consumer_and_is_answered) {
  const std::string requests = server_queue();
  auto server = start_echo_server(requests);
  ASSERT_TRUE(server);
  std::optional<std::string> ready, outcome;
  auto rpc = client::RpcClient::start(open(), [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  ASSERT_FALSE(rpc->ready());
  std::string body = "early";
  rpc->call({.routing_key = requests, .timeout = 10s}, text(body), [&](Result<client::Message> r) { outcome = said(r); });
  body = "overwritten";  // the call keeps its own copy while it waits
  ASSERT_TRUE(loop.run_until([&] { return outcome.has_value(); }));
  EXPECT_EQ(ready.value_or("<not told>"), "ok");
  EXPECT_EQ(*outcome, "re:early");
}

// A start that fails (the channel is closed under it) fails the calls already made with its
// cause, at once, not on their own timeouts.
TEST_P(RpcSuite, a_failed_start_fails_the_calls_made_before_it_at_once) {
  const auto ch = open();
  std::optional<std::string> ready, outcome;
  auto rpc = client::RpcClient::start(ch, [&](Result<void> r) { ready = r ? "ok" : r.error().to_string(); });
  rpc->call({.routing_key = "anyone", .timeout = 30s}, text("x"), [&](Result<client::Message> r) { outcome = said(r); });
  ch.queue_declare({.name = "no-such-queue-for-rpc", .passive = true}, nullptr);  // 404 closes the channel
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.run_until([&] { return outcome.has_value() && ready.has_value(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_NE(ready->find("404"), std::string::npos) << *ready;
  EXPECT_NE(outcome->find("404"), std::string::npos) << *outcome;
}

INSTANTIATE_TEST_SUITE_P(Drivers, RpcSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

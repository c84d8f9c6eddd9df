// RpcClient and RpcServer against the real broker, on both drivers: many concurrent calls on
// one channel told apart by correlation id, stray and duplicate replies dropped, unroutable
// requests failing at once, and the end of the reply consumer failing the calls in flight.
#include "client_fixture.hpp"
#include "warren/client/rpc.hpp"

namespace warren::test {
namespace {

class RpcSuite : public ClientSuite {
 protected:
  std::shared_ptr<client::RpcClient> start_client(engine::ChannelId ch) {
    std::optional<std::string> ready;
    auto rpc = client::RpcClient::start(loop.driver(), conn, ch, [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
    EXPECT_TRUE(loop.run_until([&] { return ready.has_value(); }));
    EXPECT_EQ(ready.value_or("<none>"), "ok");
    return rpc;
  }
  std::string server_queue() {
    return declare(channel(), wire::QueueDeclare{"", false, false, true, true});
  }
};

TEST_P(RpcSuite, a_thousand_concurrent_calls_on_one_channel_each_get_their_own_reply) {
  const std::string requests = server_queue();
  std::optional<std::string> serving;
  auto server = client::RpcServer::start(
      conn, channel(), requests, [](const engine::Message& m) { return "re:" + text_of(m.body); },
      [&](const Error* e) { serving = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(loop.run_until([&] { return serving.has_value(); }));
  ASSERT_EQ(*serving, "ok");
  auto rpc = start_client(channel());

  constexpr int calls = 1000;
  int matched = 0, wrong = 0;
  std::vector<std::string> bodies(calls);
  for (int i = 0; i < calls; ++i) {
    bodies[i] = "call " + std::to_string(i);
    rpc->call("", requests, {}, text(bodies[i]), 10s, [&, i](const Error* e, const engine::Message* reply) {
      if (!e && text_of(reply->body) == "re:call " + std::to_string(i)) ++matched;
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

TEST_P(RpcSuite, stray_and_duplicate_replies_are_dropped) {
  const std::string requests = server_queue();
  // A server that first answers with an id nobody asked for, then answers twice.
  const auto server_ch = channel();
  std::optional<std::string> consuming;
  conn->consume(
      server_ch, wire::BasicConsume{requests, "", false, true}, std::nullopt,
      [&](const engine::Message& m) {
        const std::string to(*m.properties->reply_to);
        wire::BasicProperties stray;
        stray.correlation_id = "not-a-call-of-ours";
        conn->publish(server_ch, wire::BasicPublish{"", to}, stray, text("stray"), nullptr);
        wire::BasicProperties real;
        real.correlation_id = m.properties->correlation_id;
        conn->publish(server_ch, wire::BasicPublish{"", to}, real, text("first"), nullptr);
        conn->publish(server_ch, wire::BasicPublish{"", to}, real, text("second"), nullptr);
      },
      [&](const Error* e, const wire::Method*) { consuming = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(loop.run_until([&] { return consuming.has_value(); }));
  auto rpc = start_client(channel());

  std::vector<std::string> replies;
  rpc->call("", requests, {}, text("x"), 10s, [&](const Error* e, const engine::Message* reply) {
    replies.push_back(e ? e->to_string() : text_of(reply->body));
  });
  ASSERT_TRUE(loop.run_until([&] { return rpc->dropped_replies() == 2; }));
  EXPECT_EQ(replies, std::vector<std::string>{"first"});
}

TEST_P(RpcSuite, a_request_nobody_can_receive_fails_at_once_with_the_return) {
  auto rpc = start_client(channel());
  std::optional<std::string> outcome;
  const auto started = std::chrono::steady_clock::now();
  rpc->call("", "no-such-queue-for-rpc", {}, text("x"), 30s,
            [&](const Error* e, const engine::Message*) { outcome = e ? e->to_string() : "replied"; });
  ASSERT_TRUE(loop.run_until([&] { return outcome.has_value(); }));
  EXPECT_EQ(*outcome, "not found (312): NO_ROUTE");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST_P(RpcSuite, a_call_without_an_answer_times_out_on_its_own_deadline) {
  const std::string requests = server_queue();  // nobody serves it
  auto rpc = start_client(channel());
  std::vector<std::string> outcomes;
  rpc->call("", requests, {}, text("slow"), 300ms,
            [&](const Error* e, const engine::Message*) { outcomes.push_back("300ms: " + (e ? e->to_string() : "replied")); });
  rpc->call("", requests, {}, text("slower"), 5s,
            [&](const Error* e, const engine::Message*) { outcomes.push_back("5s: " + (e ? e->to_string() : "replied")); });
  ASSERT_TRUE(loop.run_until([&] { return !outcomes.empty(); }));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].rfind("300ms: timed out: no reply to call ", 0), 0u) << outcomes[0];
  EXPECT_EQ(rpc->in_flight(), 1u);
}

TEST_P(RpcSuite, when_the_reply_consumer_ends_the_calls_in_flight_fail_at_once) {
  const std::string requests = server_queue();  // nobody serves it
  const auto rpc_ch = channel();
  auto rpc = start_client(rpc_ch);
  std::vector<std::string> outcomes;
  for (int i = 0; i < 3; ++i)
    rpc->call("", requests, {}, text("x"), 30s,
              [&](const Error* e, const engine::Message*) { outcomes.push_back(e ? e->to_string() : "replied"); });
  // A channel error on the RPC channel: the broker closes it, and the reply consumer with it.
  conn->queue_declare(rpc_ch, wire::QueueDeclare{"no-such-queue-for-rpc", true}, [](const Error*, const wire::Method*) {});
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.run_until([&] { return outcomes.size() == 3; }));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  for (const auto& o : outcomes) EXPECT_NE(o.find("404"), std::string::npos) << o;
  // Later calls fail without being sent.
  std::optional<std::string> later;
  rpc->call("", requests, {}, text("x"), 30s, [&](const Error* e, const engine::Message*) { later = e ? e->to_string() : "replied"; });
  ASSERT_TRUE(loop.run_until([&] { return later.has_value(); }));
  EXPECT_NE(later->find("404"), std::string::npos) << *later;
}

INSTANTIATE_TEST_SUITE_P(Drivers, RpcSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

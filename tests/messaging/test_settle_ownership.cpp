// Who settles a delivery a layer's callback was handed (message.hpp): whoever holds its settle,
// once. On the fake driver's model broker: a group member, an inbox, the backplane and an
// RpcServer whose callbacks keep a copy(), take() the message and settle it later, or settle
// the view themselves. Each message is settled exactly once (the model records a settle of a
// tag the channel no longer holds: the 406 RabbitMQ answers) and nothing stops at the prefetch.
#include <gtest/gtest.h>

#include <deque>

#include "client/fake_driver.hpp"
#include "warren/client/rpc.hpp"
#include "warren/client/url.hpp"
#include "warren/messaging/backplane.hpp"
#include "warren/messaging/direct.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;
using namespace warren::messaging;

class SettleOwnership : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<client::Connection> conn;
  std::shared_ptr<Messaging> layer;

  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    ASSERT_TRUE(url.ok());
    bool ready = false;
    conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { ready = r.ok(); });
    driver.run();
    ASSERT_TRUE(ready);
    layer = Messaging::create(conn, {.on_event = [](const Event& e) { ADD_FAILURE() << e.what << ": " << e.cause.to_string(); }})
                .value();
  }
  void TearDown() override { EXPECT_EQ(world.unknown_tags, std::vector<std::string>{}) << "a delivery settled twice"; }

  void send_all(std::string_view address, int n) {
    for (int i = 0; i < n; ++i) {
      std::optional<bool> sent;
      send(layer, {.address = address, .body = "m" + std::to_string(i)}, [&](Result<void> r) { sent = r.ok(); });
      driver.run();
      ASSERT_EQ(sent, std::optional(true)) << "send " << i;
    }
  }
  std::shared_ptr<Subscription> member(std::string_view address, std::uint16_t prefetch, OnDirect on_message) {
    std::shared_ptr<Subscription> s;
    join_group(layer, {.address = std::string(address), .prefetch = prefetch}, std::move(on_message),
               [&](Result<std::shared_ptr<Subscription>> r) { s = r.value(); });
    driver.run();
    return s;
  }
  std::size_t queued(const std::string& queue) { return world.queues[queue].size(); }
};

// docs/messaging.md said "take() a copy to keep it"; a member that did stopped at its prefetch
// (5 of 20), its messages unacked, nothing logged: the layer's own ack of a view that no longer
// held the settle failed in silence. copy() keeps the message and leaves the settle to the layer.
TEST_F(SettleOwnership, a_group_member_that_keeps_a_copy_of_each_message_receives_them_all) {
  std::vector<client::Message> kept;
  auto s = member("billing", 5, [&](const client::Delivery& d) {
    kept.push_back(d.copy());
    EXPECT_TRUE(d.settles());
  });
  ASSERT_TRUE(s);
  send_all("billing", 20);
  ASSERT_EQ(kept.size(), 20u);
  EXPECT_EQ(kept.back().body_text(), "m19");
  EXPECT_EQ(queued("warren.group.billing"), 0u);
  // A copy reads, never settles: the layer acked it.
  EXPECT_FALSE(kept.front().settles());
  auto r = kept.front().ack();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, make_error_code(errc::invalid_argument));
}

// take() hands the settle to the Message: the layer leaves it alone, the member holds its
// prefetch until it settles what it took, and then receives the rest.
TEST_F(SettleOwnership, a_group_member_that_takes_each_message_settles_it_and_the_layer_does_not) {
  std::deque<client::Message> taken;
  auto s = member("billing", 5, [&](const client::Delivery& d) {
    taken.push_back(d.take());
    EXPECT_FALSE(d.settles());
  });
  ASSERT_TRUE(s);
  send_all("billing", 20);
  EXPECT_EQ(taken.size(), 5u) << "the taken messages are unsettled: the prefetch holds";
  std::size_t acked = 0;
  while (!taken.empty()) {
    ASSERT_TRUE(taken.front().settles());
    ASSERT_TRUE(taken.front().ack().ok());
    taken.pop_front();
    ++acked;
    driver.run();
  }
  EXPECT_EQ(acked, 20u);
  EXPECT_EQ(queued("warren.group.billing"), 0u);
}

// A callback that settles the view itself (a reject of a message it cannot use, a nack to give
// it back once) is the settle: the layer's ack after it would be a second one.
TEST_F(SettleOwnership, a_callback_that_rejects_or_nacks_the_view_itself_is_not_acked_after_it) {
  std::map<std::string, int> seen;
  auto s = member("billing", 2, [&](const client::Delivery& d) {
    const std::string body(d.body_text());
    const bool first = ++seen[body] == 1;
    if (first && body == "m1") {
      EXPECT_TRUE(d.nack({.requeue = true}).ok());
    } else if (body == "m2") {
      EXPECT_TRUE(d.reject({.requeue = false}).ok());
    } else {
      return;
    }
    EXPECT_FALSE(d.settles());
  });
  ASSERT_TRUE(s);
  send_all("billing", 4);
  driver.run();
  EXPECT_EQ(seen, (std::map<std::string, int>{{"m0", 1}, {"m1", 2}, {"m2", 1}, {"m3", 1}}));
  EXPECT_EQ(queued("warren.group.billing"), 0u);
}

// A member that stops consuming (a worker on its way out) gets nothing new, and still settles
// what it took: its channel stays open until it cancels.
TEST_F(SettleOwnership, a_member_that_stops_consuming_settles_what_it_took_and_the_rest_goes_to_another) {
  std::deque<client::Message> taken;
  std::vector<std::string> other;
  auto leaving = member("billing", 5, [&](const client::Delivery& d) { taken.push_back(d.take()); });
  ASSERT_TRUE(leaving);
  send_all("billing", 1);
  ASSERT_EQ(taken.size(), 1u);
  bool stopped = false;
  leaving->stop_consuming([&](Result<void> r) { stopped = r.ok(); });
  driver.run();
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(leaving->over());
  auto staying = member("billing", 5, [&](const client::Delivery& d) { other.emplace_back(d.body_text()); });
  send_all("billing", 3);
  EXPECT_EQ(taken.size(), 1u) << "nothing new for a member that stopped consuming";
  EXPECT_EQ(other.size(), 3u);
  EXPECT_TRUE(taken.front().ack().ok()) << "its channel is still open for the settle";
  driver.run();
  bool closed = false;
  leaving->cancel([&](Result<void> r) { closed = r.ok(); });
  driver.run();
  EXPECT_TRUE(closed);
  EXPECT_EQ(queued("warren.group.billing"), 0u);
}

TEST_F(SettleOwnership, an_inbox_that_keeps_copies_receives_past_its_prefetch) {
  std::vector<client::Message> kept;
  std::shared_ptr<Inbox> inbox;
  open_inbox(layer, {.prefetch = 3}, [&](const client::Delivery& d) { kept.push_back(d.copy()); },
             [&](Result<std::shared_ptr<Inbox>> r) { inbox = r.value(); });
  driver.run();
  ASSERT_TRUE(inbox);
  send_all(inbox->address(), 10);
  EXPECT_EQ(kept.size(), 10u);
  EXPECT_EQ(queued(inbox->address()), 0u);
}

TEST_F(SettleOwnership, the_backplane_acks_what_its_callback_copied_and_leaves_what_it_took) {
  std::vector<client::Message> copies, taken;
  std::shared_ptr<Backplane> bp;
  Backplane::start(layer, {.prefetch = 2},
                   [&](std::string_view room, const client::Delivery& d) {
                     if (room == "copied") copies.push_back(d.copy());
                     else taken.push_back(d.take());
                   },
                   [&](Result<std::shared_ptr<Backplane>> r) { bp = r.value(); });
  driver.run();
  ASSERT_TRUE(bp);
  for (const char* room : {"copied", "taken"}) {
    bp->join(room, [](Result<void> r) { EXPECT_TRUE(r.ok()); });
    driver.run();
  }
  for (int i = 0; i < 6; ++i) {
    bp->publish("copied", "c" + std::to_string(i), [](Result<void> r) { EXPECT_TRUE(r.ok()); });
    driver.run();
  }
  EXPECT_EQ(copies.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    bp->publish("taken", "t" + std::to_string(i), [](Result<void> r) { EXPECT_TRUE(r.ok()); });
    driver.run();
  }
  ASSERT_EQ(taken.size(), 2u) << "two taken and unsettled hold the prefetch of 2";
  for (auto& m : taken) EXPECT_TRUE(m.ack().ok());
  driver.run();
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_TRUE(taken.back().ack().ok());
  driver.run();
  EXPECT_EQ(queued(bp->queue()), 0u);
}

// An RpcServer's handler that takes the request answers now and acks it later itself.
TEST_F(SettleOwnership, an_rpc_server_leaves_a_taken_request_to_its_handler) {
  client::Channel server_ch, client_ch;
  conn->open_channel([&](Result<client::Channel> r) { server_ch = r.value(); });
  conn->open_channel([&](Result<client::Channel> r) { client_ch = r.value(); });
  driver.run();
  server_ch.queue_declare({.name = "requests"}, [](Result<client::QueueDeclared> r) { EXPECT_TRUE(r.ok()); });
  server_ch.qos({.prefetch_count = 1}, [](Result<void> r) { EXPECT_TRUE(r.ok()); });
  driver.run();
  std::deque<client::Message> held;
  auto server = client::RpcServer::start(server_ch, "requests", [&](const client::Delivery& request) {
    held.push_back(request.take());
    return "answer to " + std::string(request.body_text());
  }, [](Result<void> r) { EXPECT_TRUE(r.ok()); });
  std::optional<bool> started;
  auto rpc = client::RpcClient::start(client_ch, [&](Result<void> r) { started = r.ok(); });
  driver.run();
  ASSERT_EQ(started, std::optional(true));
  std::vector<std::string> answers;
  for (const char* body : {"q1", "q2"}) {
    rpc->call({.routing_key = "requests", .timeout = 5000ms}, body, [&](Result<client::Message> reply) {
      answers.push_back(reply ? std::string(reply->body_text()) : reply.error().to_string());
    });
  }
  driver.run();
  ASSERT_EQ(answers, std::vector<std::string>{"answer to q1"}) << "the taken request holds the prefetch of 1";
  ASSERT_TRUE(held.front().ack().ok());
  driver.run();
  ASSERT_EQ(answers, (std::vector<std::string>{"answer to q1", "answer to q2"}));
  ASSERT_TRUE(held.back().ack().ok());
  driver.run();
  EXPECT_EQ(queued("requests"), 0u);
}

}  // namespace
}  // namespace warren::test

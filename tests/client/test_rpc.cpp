// RpcClient on the fake driver and its virtual clock: deadlines to the millisecond, stray
// and duplicate replies dropped, and the broker's cancel of the reply consumer failing the
// calls in flight at once (and every later call).
#include <gtest/gtest.h>

#include "client/fake_driver.hpp"
#include "warren/client/rpc.hpp"

namespace warren::test {
namespace {

class RpcTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  std::shared_ptr<client::Connection> conn;
  std::shared_ptr<client::RpcClient> rpc;

  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    ASSERT_TRUE(url.ok());
    bool ready = false;
    conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { ready = r.ok(); });
    driver.run();
    ASSERT_TRUE(ready);
    client::Channel ch;
    conn->open_channel([&](Result<client::Channel> r) { ch = r.value(); });
    driver.run();
    ASSERT_TRUE(ch.is_open());
    std::optional<std::string> started;
    rpc = client::RpcClient::start(ch, [&](Result<void> r) { started = r ? "ok" : r.error().to_string(); });
    driver.run();
    ASSERT_EQ(started.value_or("<none>"), "ok");
    // The reply consumer is in place before start() reported ready.
    const auto& methods = driver.last_broker().methods;
    EXPECT_NE(std::find(methods.begin(), methods.end(), "basic.consume"), methods.end());
  }

  struct Answer {
    std::optional<std::string> text;
  };
  std::shared_ptr<Answer> call(std::string_view body, engine::Duration timeout) {
    auto out = std::make_shared<Answer>();
    rpc->call({.routing_key = "requests", .timeout = timeout}, std::as_bytes(std::span{body.data(), body.size()}),
              [out](Result<client::Message> reply) {
                out->text = reply ? std::string(reply->body_text()) : "error: " + reply.error().to_string();
              });
    driver.run();
    return out;
  }
  static wire::BasicProperties with_id(const std::string& id) {
    wire::BasicProperties p;
    p.correlation_id = id;
    return p;
  }
};

TEST_F(RpcTest, a_call_without_a_reply_fails_at_its_own_deadline) {
  auto first = call("a", 5000ms);
  auto second = call("b", 8000ms);
  driver.advance(4999ms);
  EXPECT_FALSE(first->text);
  driver.advance(1ms);
  ASSERT_TRUE(first->text);
  EXPECT_EQ(first->text->rfind("error: timed out: no reply to call ", 0), 0u) << *first->text;
  EXPECT_FALSE(second->text);
  EXPECT_EQ(rpc->in_flight(), 1u);
  driver.advance(3000ms);
  ASSERT_TRUE(second->text);
  EXPECT_EQ(rpc->in_flight(), 0u);
}

// A call without a timeout of its own waits as long as any request on its channel: the
// channel's timeout (set_timeout), else the connection's request_timeout. (It used to wait 30 s
// in this form and 10 s, the default request_timeout, in the Asio form, whatever was set.)
TEST(RpcDefaults, a_call_without_a_timeout_waits_the_channels_request_timeout) {
  FakeDriver driver;
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto url = client::parse_url("amqp://guest:guest@fake:5001");
  ASSERT_TRUE(url.ok());
  client::ClientOptions options;
  options.engine.request_timeout = 2000ms;
  bool ready = false;
  auto conn = client::Connection::connect(driver, *url, options, [&](Result<void> r) { ready = r.ok(); });
  driver.run();
  ASSERT_TRUE(ready);
  client::Channel ch;
  conn->open_channel([&](Result<client::Channel> r) { ch = r.value(); });
  driver.run();
  bool started = false;
  auto rpc = client::RpcClient::start(ch, [&](Result<void> r) { started = r.ok(); });
  driver.run();
  ASSERT_TRUE(started);

  auto call = [&] {
    auto out = std::make_shared<std::optional<std::string>>();
    rpc->call({.routing_key = "requests"}, client::as_bytes("q"), [out](Result<client::Message> reply) {
      *out = reply ? std::string(reply->body_text()) : reply.error().to_string();
    });
    driver.run();
    return out;
  };
  auto first = call();
  driver.advance(1999ms);
  EXPECT_FALSE(*first) << "it ended before the connection's request_timeout";
  driver.advance(1ms);
  ASSERT_TRUE(*first) << "it outlived the connection's request_timeout";
  EXPECT_NE(first->value().find("within 2000 ms"), std::string::npos) << **first;

  ASSERT_TRUE(ch.set_timeout(3500ms).ok());
  auto second = call();
  driver.advance(3499ms);
  EXPECT_FALSE(*second);
  driver.advance(1ms);
  ASSERT_TRUE(*second) << "it outlived the channel's timeout";
  EXPECT_NE(second->value().find("within 3500 ms"), std::string::npos) << **second;
}

TEST_F(RpcTest, stray_and_duplicate_replies_are_dropped) {
  auto answer = call("question", 5000ms);
  const std::string id = driver.last_broker().last_correlation_id;
  ASSERT_FALSE(id.empty());
  driver.last_broker().deliver("stray", with_id("not-ours"));
  driver.last_broker().deliver("no id at all");
  driver.run();
  EXPECT_FALSE(answer->text);
  EXPECT_EQ(rpc->dropped_replies(), 2u);
  driver.last_broker().deliver("the answer", with_id(id));
  driver.last_broker().deliver("the answer again", with_id(id));
  driver.run();
  EXPECT_EQ(answer->text.value_or(""), "the answer");
  EXPECT_EQ(rpc->dropped_replies(), 3u);
}

TEST_F(RpcTest, calls_are_told_apart_by_their_correlation_ids) {
  auto first = call("one", 5000ms);
  const std::string first_id = driver.last_broker().last_correlation_id;
  auto second = call("two", 5000ms);
  const std::string second_id = driver.last_broker().last_correlation_id;
  EXPECT_NE(first_id, second_id);
  driver.last_broker().deliver("for two", with_id(second_id));
  driver.last_broker().deliver("for one", with_id(first_id));
  driver.run();
  EXPECT_EQ(first->text.value_or(""), "for one");
  EXPECT_EQ(second->text.value_or(""), "for two");
}

TEST_F(RpcTest, when_the_broker_cancels_the_reply_consumer_the_calls_in_flight_fail_at_once) {
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < 3; ++i) answers.push_back(call("x", 60000ms));
  driver.last_broker().cancel_consumer();
  driver.run();  // no time passes
  for (const auto& a : answers) {
    ASSERT_TRUE(a->text);
    EXPECT_EQ(a->text->rfind("error: consumer cancelled: the broker cancelled consumer ", 0), 0u) << *a->text;
  }
  auto later = call("y", 60000ms);
  ASSERT_TRUE(later->text);  // refused without being sent
  EXPECT_EQ(later->text->rfind("error: consumer cancelled", 0), 0u) << *later->text;
}

}  // namespace
}  // namespace warren::test

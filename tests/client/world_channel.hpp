// The set-up of the client tests that move messages: a connection on the fake driver to the
// model broker over a BrokerWorld (its queues and their consumers), one channel open on it,
// and the helpers those tests share (fill a queue, subscribe and keep every delivery).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "client/open_channel.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {

class WorldChannelTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<client::Connection> conn;
  client::Channel ch;

  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{.world = &world};
    conn = connect_to_world();
    ch = open_channel_now(driver, *conn);
  }
  // Another connection to the world's broker; `query` is the URL's (e.g. "?heartbeat=1").
  std::shared_ptr<client::Connection> connect_to_world(const std::string& query = "") {
    auto url = client::parse_url("amqp://guest:guest@fake:5001" + query);
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    auto said = std::make_shared<std::string>("never called");
    auto c = client::Connection::connect(driver, *url, {}, [said](Result<void> r) { *said = r ? "ok" : r.error().to_string(); });
    driver.run();
    if (*said != "ok") throw std::runtime_error("not connected: " + *said);
    return c;
  }
  // Another channel, open once this returns.
  client::Channel channel(client::Connection& c) { return open_channel_now(driver, c); }
  // The broker side of the connection opened last.
  FakeBroker& broker() { return driver.last_broker(); }
  // `n` messages into queue `q` ("q-1", "q-2", ...), handed to its consumers now.
  void fill(const std::string& q, int n) {
    for (int i = 1; i <= n; ++i) world.queues[q].push_back(BrokerWorld::Message{q + "-" + std::to_string(i), {}, {}, false});
    world.dispatch();
    driver.run();
  }
  // A push subscription on `ch`, active once this returns.
  client::Consumer wait_consume(const std::string& q, std::function<void(const client::Delivery&)> on_delivery) {
    world.queues[q];
    client::Consumer consumer;
    ch.consume({.queue = q}, std::move(on_delivery), [&](Result<client::Consumer> r) {
      if (r) consumer = std::move(*r);
    });
    driver.run();
    if (!consumer.active()) throw std::runtime_error("consume failed");
    return consumer;
  }
  // A push subscription that keeps every delivery as an owned Message.
  client::Consumer keep_all(const std::string& q, std::vector<client::Message>& kept) {
    return wait_consume(q, [&kept](const client::Delivery& d) { kept.push_back(d.take()); });
  }
};

}  // namespace warren::test

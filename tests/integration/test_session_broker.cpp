// The Session against the real broker, on both drivers: the broker closes the connection
// (rabbitmqctl close_connection, as an operator or a node shutting down would), the Session
// dials again, its channel's setup runs again, and publishing and consuming go on.
#include "client_fixture.hpp"
#include "warren/client/session.hpp"

namespace warren::test {
namespace {

using SessionSuite = ClientSuite;

TEST_P(SessionSuite, a_connection_the_broker_closes_is_dialled_again_and_setup_runs_again) {
  auto url = client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f");
  ASSERT_TRUE(url.ok());
  const std::string name = std::string("warren-session-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  const std::string queue = name + "-q";
  client::SessionOptions options;
  options.client.engine.connection_name = name;
  options.backoff = client::Backoff{50ms, 2.0, 500ms};
  auto session = client::Session::start(loop.driver(), *url, options);
  std::vector<client::Session::State> states;
  session->on_status = [&](const client::Session::Status& s) { states.push_back(s.state); };

  int setups = 0;
  std::vector<std::string> received;
  std::vector<client::Consumer> consumers;
  auto ch = session->channel([&](client::RecoveringChannel& c, client::Callback<void> done) {
    ++setups;
    // An exclusive queue dies with its connection: setup declares it again each time.
    c.channel().queue_declare({.name = queue, .exclusive = true}, [&c, done, &received, &consumers, queue](Result<client::QueueDeclared> q) {
      if (!q) return done(q.error());
      c.channel().consume({.queue = queue, .prefetch = 10},
                          [&received](const client::Delivery& m) {
                            received.emplace_back(m.body_text());
                            (void)m.ack();
                          },
                          [done, &consumers](Result<client::Consumer> r) {
                            if (!r) return done(r.error());
                            consumers.push_back(std::move(*r));
                            done(Result<void>());
                          });
    });
  });
  ASSERT_TRUE(loop.run_until([&] { return ch->ready(); }));

  auto publish = [&](const std::string& body) {
    std::optional<engine::PublishOutcome> outcome;
    ch->publish({.routing_key = queue, .timeout = 10s}, text(body), [&](Result<engine::PublishOutcome> o) {
      outcome = o.ok() ? *o : engine::PublishOutcome::failed;
    });
    EXPECT_TRUE(loop.run_until([&] { return outcome.has_value(); }));
    return outcome.value_or(engine::PublishOutcome::failed);
  };
  EXPECT_EQ(publish("before"), engine::PublishOutcome::confirmed);
  ASSERT_TRUE(loop.run_until([&] { return received.size() == 1; }));

  // Closed by the broker, as an operator's rabbitmqctl close_connection does, once it is there.
  ASSERT_TRUE(loop.run_until([&] { return close_connections_named(name, "warren test: go away") == 1; }));
  ASSERT_TRUE(loop.run_until([&] { return setups == 2 && ch->ready(); }, 20s));
  EXPECT_NE(std::find(states.begin(), states.end(), client::Session::State::reconnecting), states.end());
  EXPECT_TRUE(session->healthy());

  EXPECT_EQ(publish("after"), engine::PublishOutcome::confirmed);
  ASSERT_TRUE(loop.run_until([&] { return received.size() == 2; }));
  EXPECT_EQ(received, (std::vector<std::string>{"before", "after"}));

  bool closed = false;
  session->close([&](Result<void>) { closed = true; });
  ASSERT_TRUE(loop.run_until([&] { return closed; }));
}

INSTANTIATE_TEST_SUITE_P(Drivers, SessionSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

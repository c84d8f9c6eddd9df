// Handshake, tune and heartbeat rules, each a script of broker frames re-run at every split.
#include "scripted_broker.hpp"
#include "warren/engine/negotiate.hpp"

namespace warren::test {
namespace {

using namespace warren::wire;
using engine::negotiate_heartbeat;
using engine::negotiate_limit;

TEST(Handshake, handshake_negotiates_and_connects) {
  every_split([](ScriptedBroker& b) {
    b.expect_sent("protocol-header");
    b.send(0, ConnectionStart{0, 9, ScriptedBroker::server_properties(), "AMQPLAIN PLAIN", "en_US"});
    b.expect_sent(
        "ch0 connection.start-ok(client_properties={\"product\": S:\"warren\", \"version\": S:\"0.1.0\", "
        "\"platform\": S:\"C++20\", \"capabilities\": F:{\"publisher_confirms\": t:true, \"consumer_cancel_notify\": "
        "t:true, \"connection.blocked\": t:true, \"authentication_failure_close\": t:true, \"basic.nack\": t:true, "
        "\"per_consumer_qos\": t:true, \"exchange_exchange_bindings\": t:true}}, mechanism=\"PLAIN\", "
        "response=<hidden>, locale=\"en_US\")");
    b.send(0, ConnectionTune{2047, 131072, 60});
    b.expect_sent("ch0 connection.tune-ok(channel_max=2047, frame_max=131072, heartbeat=60)");
    b.expect_sent("ch0 connection.open(virtual_host=\"/\")");
    EXPECT_FALSE(b.conn.is_open());
    b.send(0, ConnectionOpenOk{});
    b.expect_event("connected(channel_max=2047, frame_max=131072, heartbeat=60)");
    EXPECT_TRUE(b.conn.is_open());
    b.expect_no_event();
  });
}

TEST(Handshake, mechanisms_are_parsed_as_a_set) {
  auto options = default_options();
  options.mechanism = engine::Mechanism::external;
  every_split(
      [](ScriptedBroker& b) {
        b.expect_sent("protocol-header");
        b.send(0, ConnectionStart{0, 9, {}, "PLAIN EXTERNAL AMQPLAIN", "en_US"});
        auto start_ok = b.next_sent();
        EXPECT_NE(start_ok.find("mechanism=\"EXTERNAL\""), std::string::npos) << start_ok;
      },
      options);
}

TEST(Handshake, a_mechanism_the_broker_does_not_offer_is_refused_clearly) {
  auto options = default_options();
  options.mechanism = engine::Mechanism::external;
  every_split(
      [](ScriptedBroker& b) {
        b.expect_sent("protocol-header");
        b.send(0, ConnectionStart{0, 9, {}, "PLAIN AMQPLAIN", "en_US"});
        b.expect_event("closed(access refused: the broker offers PLAIN AMQPLAIN, not EXTERNAL)");
        EXPECT_TRUE(b.conn.finished());
      },
      options);
}

TEST(Handshake, amqplain_sends_login_and_password_as_a_table) {
  auto options = default_options();
  options.mechanism = engine::Mechanism::amqplain;
  auto response = engine::sasl_response(options);
  auto table = decode_table(std::as_bytes(std::span{response.data(), response.size()}));
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(to_string(*table), "{\"LOGIN\": S:\"guest\", \"PASSWORD\": S:\"s3cret\"}");
  options.mechanism = engine::Mechanism::plain;
  EXPECT_EQ(engine::sasl_response(options), std::string("\0guest\0s3cret", 13));
}

TEST(Handshake, refused_login_is_403_and_latched) {
  every_split([](ScriptedBroker& b) {
    b.expect_sent("protocol-header");
    b.send(0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"});
    b.next_sent();
    b.send(0, ConnectionClose{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", 0, 0});
    b.expect_sent("ch0 connection.close-ok()");
    b.expect_event("closed(access refused 403: ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN)");
    ASSERT_NE(b.conn.error(), nullptr);
    EXPECT_EQ(b.conn.error()->code, errc::access_refused);
    auto later = b.conn.open_channel(b.now);
    ASSERT_FALSE(later.ok());
    EXPECT_EQ(later.error(), *b.conn.error());
  });
}

TEST(Handshake, handshake_has_a_deadline) {
  ScriptedBroker b;
  b.expect_sent("protocol-header");
  b.advance(9999ms);
  b.expect_no_event();
  b.advance(1ms);
  b.expect_event("closed(timed out: the handshake did not finish within 10000 ms)");
  EXPECT_TRUE(b.conn.finished());
}

TEST(Handshake, a_broker_that_refuses_our_protocol_version_says_which) {
  every_split([](ScriptedBroker& b) {
    b.expect_sent("protocol-header");
    b.send_raw(from_hex("414d5150 00 00 09 00"));
    b.expect_event("closed(protocol version mismatch: broker refused AMQP 0-9-1 and offered protocol 0-9-0)");
  });
}

TEST(Tune, limits_take_the_smaller_nonzero_and_never_send_zero_back) {
  EXPECT_EQ(negotiate_limit(2047, 2047), 2047u);
  EXPECT_EQ(negotiate_limit(100, 2047), 100u);
  EXPECT_EQ(negotiate_limit(0, 2047), 2047u);   // we set no limit: the broker's stands
  EXPECT_EQ(negotiate_limit(131072, 0), 131072u);
  EXPECT_EQ(negotiate_limit(0, 0), 0u);
}

TEST(Tune, heartbeat_zero_on_one_side_is_no_proposal) {
  EXPECT_EQ(negotiate_heartbeat(60, 0), 60);
  EXPECT_EQ(negotiate_heartbeat(0, 60), 60);
  EXPECT_EQ(negotiate_heartbeat(0, 0), 0);
  EXPECT_EQ(negotiate_heartbeat(10, 60), 10);
  EXPECT_EQ(negotiate_heartbeat(60, 10), 10);
}

TEST(Tune, tune_ok_carries_the_negotiated_values) {
  auto options = default_options();
  options.channel_max = 0;
  options.heartbeat_s = 5;
  every_split(
      [](ScriptedBroker& b) {
        b.expect_sent("protocol-header");
        b.send(0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"});
        b.next_sent();
        b.send(0, ConnectionTune{2047, 131072, 0});
        b.expect_sent("ch0 connection.tune-ok(channel_max=2047, frame_max=131072, heartbeat=5)");
      },
      options);
}

TEST(Tune, a_frame_max_below_4096_is_refused) {
  ScriptedBroker b;
  b.expect_sent("protocol-header");
  b.send(0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"});
  b.next_sent();
  b.send(0, ConnectionTune{2047, 1024, 60});
  b.expect_event("closed(protocol error: the broker proposed frame_max 1024, below the minimum 4096)");
}

TEST(Heartbeat, heartbeat_sent_when_nothing_was_written_for_the_interval) {
  every_split([](ScriptedBroker& b) {
    b.connect(60);
    b.advance(59s);
    b.expect_nothing_sent();
    b.send_heartbeat();  // the broker's traffic keeps it alive, but does not count as ours
    b.advance(1s);
    b.expect_sent("heartbeat");
    b.advance(30s);
    b.expect_nothing_sent();
  });
}

TEST(Heartbeat, our_own_traffic_postpones_the_heartbeat) {
  ScriptedBroker b;
  b.connect(60);
  b.advance(50s);
  auto ch = b.conn.open_channel(b.now);
  ASSERT_TRUE(ch.ok());
  b.expect_sent("ch1 channel.open()");
  b.send(1, ChannelOpenOk{});
  b.advance(50s);
  b.expect_nothing_sent();
  b.advance(10s);
  b.expect_sent("heartbeat");
}

// Ten thousand connections' heartbeats must not be ten thousand wake-ups: the deadline each
// asks its timer for lies on a granule the process's connections share (1,024 ms for a 60 s
// heartbeat), at most 1/16 of the interval after the heartbeat is due.
TEST(Heartbeat, deadlines_fall_on_a_granule_every_connection_shares) {
  ScriptedBroker a;
  a.connect(60);
  ScriptedBroker b;
  b.now += 300ms;  // connected 300 ms later
  b.connect(60);
  const auto due_a = a.conn.poll_timeout(), due_b = b.conn.poll_timeout();
  ASSERT_TRUE(due_a && due_b);
  EXPECT_EQ(*due_a, *due_b);
  EXPECT_EQ(due_a->time_since_epoch() % 1024ms, 0ms);
  EXPECT_GE(*due_b, b.now + 60s);
  EXPECT_LE(*due_a, a.now + 60s + 60s / 16);
  // Fired then, each sends its heartbeat.
  a.advance(std::chrono::duration_cast<std::chrono::milliseconds>(*due_a - a.now));
  a.expect_sent("heartbeat");
  b.advance(std::chrono::duration_cast<std::chrono::milliseconds>(*due_b - b.now));
  b.expect_sent("heartbeat");
}

TEST(Heartbeat, peer_dead_after_twice_the_interval_without_traffic) {
  every_split([](ScriptedBroker& b) {
    b.connect(10);
    b.advance(15s);
    b.send_heartbeat();
    b.advance(19s);  // 19 s since the broker's last byte
    b.expect_no_event();
    b.advance(1s);
    b.expect_event("closed(timed out: no traffic from the broker for 20 s (heartbeat 10 s))");
    EXPECT_TRUE(b.conn.finished());
  });
}

TEST(Heartbeat, no_heartbeats_when_both_sides_say_zero) {
  auto options = default_options();
  options.heartbeat_s = 0;
  ScriptedBroker b(std::nullopt, options);
  b.connect(0);
  b.advance(3600s);
  b.expect_nothing_sent();
  b.expect_no_event();
  EXPECT_FALSE(b.conn.poll_timeout().has_value());
}

}  // namespace
}  // namespace warren::test

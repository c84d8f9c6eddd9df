// The client suite against the real broker, run on each driver: every declare/bind/delete,
// get with ack/nack/reject, confirms with nack and return, a 5 MiB body, direct reply-to, a
// channel error that closes only its channel, a connection error with its cause, and a memory
// alarm that makes a publish wait until it is lifted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_fixture.hpp"

namespace warren::test {
namespace {

using namespace warren::client;

// Every verb, get with ack/nack/reject and the publish outcomes (nack, 312) are in
// test_channel_api.cpp, on the Channel API.

TEST_P(ClientSuite, a_5_mib_body_crosses_many_frames) {
  auto ch = open();
  auto q = temp_queue(ch);
  ASSERT_EQ(said(wait<void>([&](auto done) { ch.confirm_select(done); })), "ok");
  std::string big(5 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 31) ^ (i >> 9));
  EXPECT_EQ(confirm_publish(ch, {.routing_key = q}, text(big), 30s), "confirmed");
  auto got = wait<std::optional<Message>>([&](auto done) { ch.get({.queue = q, .auto_ack = true}, done); }, 30s);
  ASSERT_TRUE(got.ok() && got->has_value()) << said(got);
  EXPECT_TRUE((*got)->body_text() == big);
}

TEST_P(ClientSuite, direct_reply_to_round_trip) {
  auto server_ch = open();
  auto client_ch = open();
  auto requests = temp_queue(server_ch);
  // The server answers each request on the queue its reply_to names, with the correlation id.
  auto server = wait<Consumer>([&](auto done) {
    server_ch.consume({.queue = requests, .auto_ack = true},
                      [&](const Delivery& m) {
                        std::string upper(m.body_text());
                        for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                        (void)server_ch.publish({.routing_key = *m.properties().reply_to,
                                                 .properties = {.correlation_id = m.properties().correlation_id}},
                                                text(upper));
                      },
                      done);
  });
  ASSERT_TRUE(server.ok()) << said(server);
  std::optional<std::string> reply;
  auto replies = wait<Consumer>([&](auto done) {
    client_ch.consume({.queue = "amq.rabbitmq.reply-to", .auto_ack = true},
                      [&](const Delivery& m) {
                        reply = std::string(m.body_text()) + " #" + std::string(m.properties().correlation_id.value_or(""));
                      },
                      done);
  });
  ASSERT_TRUE(replies.ok()) << said(replies);
  (void)client_ch.publish({.routing_key = requests,
                           .properties = {.correlation_id = "call-1", .reply_to = "amq.rabbitmq.reply-to"}},
                          text("hello rpc"));
  ASSERT_TRUE(loop.run_until([&] { return reply.has_value(); }));
  EXPECT_EQ(*reply, "HELLO RPC #call-1");
}

TEST_P(ClientSuite, a_channel_error_closes_only_its_channel) {
  auto ch = open();
  // A named, non-exclusive queue: a server-named amq.gen- queue cannot be redeclared at all
  // (403), and an exclusive one is not compared on durable.
  auto q = temp_queue(ch, {.name = "warren-suite-406", .auto_delete = true});
  // Redeclaring with other properties: 406, and only this channel closes.
  auto redeclared = wait<QueueDeclared>([&](auto done) { ch.queue_declare({.name = q, .durable = true, .auto_delete = true}, done); });
  ASSERT_FALSE(redeclared.ok());
  EXPECT_EQ(said(redeclared).rfind("precondition failed (406): PRECONDITION_FAILED - inequivalent arg 'durable'", 0), 0u)
      << said(redeclared);
  EXPECT_EQ(scope(redeclared.error()), Scope::channel);
  EXPECT_TRUE(is_permanent(redeclared.error()));
  EXPECT_TRUE(conn->is_open());
  auto other = open();
  EXPECT_EQ(said(wait<QueueDeclared>([&](auto done) { other.queue_declare({.name = q, .passive = true}, done); })), "ok");
  EXPECT_EQ(wait<std::uint32_t>([&](auto done) { other.queue_delete({.queue = q}, done); }).value(), 0u);
}

TEST_P(ClientSuite, a_connection_error_closes_the_connection_with_its_cause) {
  auto ch = open();
  std::optional<Error> cause;
  conn->on_closed = [&](const Error& e) { cause = e; };
  // RabbitMQ does not implement a prefetch in bytes: a basic.qos with prefetch_size closes
  // the whole connection with 540 NOT_IMPLEMENTED, a connection error.
  ch.qos({.prefetch_count = 1, .prefetch_size = 4096}, nullptr);
  ASSERT_TRUE(loop.run_until([&] { return cause.has_value(); }));
  EXPECT_EQ(cause->reply_code, 540);
  EXPECT_NE(cause->detail.find("NOT_IMPLEMENTED"), std::string::npos) << cause->to_string();
  EXPECT_FALSE(conn->is_open());
}

// A memory alarm on the test broker (a watermark of 0), lifted by lift() or at the end of
// the scope whatever happens, and what the connection heard of it.
//
// The constructor returns once the broker lists the alarm. `set_vm_memory_high_watermark`
// returns before the alarm reaches the connections (the memory monitor raises it through an
// asynchronous event), and connection.blocked comes only on a publish the connection reads
// after that: on a busy machine a test's first publish used to overtake the alarm, was
// confirmed, and no block ever came. The alarm's own list is kept by the process that also
// tells every connection, so once it lists the alarm each connection has been told.
struct MemoryAlarm {
  bool blocked = false, unblocked = false;
  explicit MemoryAlarm(client::Connection& c) : connection(c) {
    c.on_blocked = [this](std::string_view) { blocked = true; };
    c.on_unblocked = [this] { unblocked = true; };
    const std::string said = rabbitmqctl(
        "eval 'ok = vm_memory_monitor:set_vm_memory_high_watermark(0.0), "
        "Raised = fun Wait(0) -> not_raised; Wait(N) -> "
        "case lists:keymember({resource_limit, memory, node()}, 1, rabbit_alarm:get_alarms()) of "
        "true -> raised; false -> timer:sleep(20), Wait(N - 1) end end, Raised(250).'");
    if (said.find("raised") != 0) {
      lift();
      throw std::runtime_error("the broker did not raise a memory alarm: " + said);
    }
  }
  MemoryAlarm(const MemoryAlarm&) = delete;
  MemoryAlarm& operator=(const MemoryAlarm&) = delete;
  ~MemoryAlarm() {
    lift();
    connection.on_blocked = nullptr;  // nothing of this alarm is left to record into
    connection.on_unblocked = nullptr;
  }
  void lift() { rabbitmqctl("set_vm_memory_high_watermark 0.4"); }
  client::Connection& connection;
};

TEST_P(ClientSuite, a_memory_alarm_makes_a_publish_wait_until_it_is_lifted) {
  auto ch = open();
  auto q = temp_queue(ch);
  ASSERT_EQ(said(wait<void>([&](auto done) { ch.confirm_select(done); })), "ok");
  MemoryAlarm alarm(*conn);
  const bool& blocked = alarm.blocked;
  const bool& unblocked = alarm.unblocked;
  int confirmed = 0;
  auto count = [&](Result<engine::PublishOutcome> o) { confirmed += o && *o == engine::PublishOutcome::confirmed; };
  // connection.blocked reaches a connection when it next publishes.
  ch.publish({.routing_key = q}, text("first"), count);
  ASSERT_TRUE(loop.run_until([&] { return blocked; }));
  ch.publish({.routing_key = q}, text("waits"), count);
  loop.run_until([] { return false; }, 1s);
  EXPECT_EQ(confirmed, 0);
  alarm.lift();
  ASSERT_TRUE(loop.run_until([&] { return confirmed == 2; }));
  EXPECT_TRUE(unblocked);
}

// Finding 1 on the real broker: more than the output limit (256 KiB) of confirmed publishes
// waits behind a memory alarm; when the alarm is lifted every one completes and the
// connection stays up. (The client used to stop reading while congested, so it never saw
// connection.unblocked and the publishes ran into their 10 s deadline.)
TEST_P(ClientSuite, publishes_over_the_output_limit_waiting_on_an_alarm_all_complete_once_it_is_lifted) {
  auto ch = open();
  auto q = temp_queue(ch);
  ASSERT_EQ(said(wait<void>([&](auto done) { ch.confirm_select(done); })), "ok");
  MemoryAlarm alarm(*conn);
  const bool& blocked = alarm.blocked;
  const bool& unblocked = alarm.unblocked;
  int confirmed = 0, other = 0;
  auto count = [&](Result<engine::PublishOutcome> o) {
    if (o && *o == engine::PublishOutcome::confirmed) ++confirmed;
    else ++other;
  };
  ch.publish({.routing_key = q}, text("first"), count);
  ASSERT_TRUE(loop.run_until([&] { return blocked; }));
  const std::string body(16 * 1024, 'w');
  constexpr int waiting = 24;  // 384 KiB: over the 256 KiB limit, under twice it
  for (int i = 0; i < waiting; ++i) ch.publish({.routing_key = q}, text(body), count);
  EXPECT_TRUE(conn->congested());
  loop.run_until([] { return false; }, 1s);
  EXPECT_EQ(confirmed + other, 0);
  alarm.lift();
  // Well inside the publishes' 10 s deadline.
  ASSERT_TRUE(loop.run_until([&] { return confirmed + other == waiting + 1; }, 5s))
      << confirmed << " confirmed, " << other << " otherwise, unblocked " << unblocked;
  EXPECT_EQ(confirmed, waiting + 1);
  EXPECT_TRUE(unblocked);
  EXPECT_TRUE(conn->is_open());
}

TEST_P(ClientSuite, a_subscription_without_prefetch_has_250_on_the_broker) {
  auto ch = open();
  auto q = temp_queue(ch);
  auto ok = wait<Consumer>([&](auto done) { ch.consume({.queue = q, .tag = "suite-prefetch"}, [](const Delivery&) {}, done); });
  ASSERT_TRUE(ok.ok()) << said(ok);
  EXPECT_EQ(ok->tag(), "suite-prefetch");
  auto consumers = rabbitmqctl("list_consumers queue_name consumer_tag prefetch_count");
  EXPECT_NE(consumers.find(q + "\tsuite-prefetch\t250"), std::string::npos) << consumers;
}

TEST_P(ClientSuite, cancel_hands_back_what_was_never_dispatched) {
  auto ch = open();
  // Exclusive but not auto-delete: cancelling its only consumer must not delete it.
  auto q = temp_queue(ch, {.exclusive = true});
  ASSERT_EQ(said(wait<void>([&](auto done) { ch.confirm_select(done); })), "ok");
  constexpr int total = 2000;
  int confirmed = 0;
  for (int i = 0; i < total; ++i)
    ch.publish({.routing_key = q}, text("m"), [&](Result<engine::PublishOutcome> o) { confirmed += o.ok(); });
  ASSERT_TRUE(loop.run_until([&] { return confirmed == total; }));
  // Unlimited prefetch, and a cancel sent the moment consume-ok arrives: deliveries already on
  // the wire race the cancel. Those never dispatched go back to the queue; those dispatched
  // stay unacknowledged on the channel, as AMQP says.
  int dispatched = 0;
  std::optional<std::string> cancelled;
  Consumer racer;
  ch.consume({.queue = q, .tag = "racer", .prefetch = 0}, [&](const Delivery&) { ++dispatched; },
             [&](Result<Consumer> c) {
               ASSERT_TRUE(c.ok());
               racer = std::move(*c);
               racer.cancel([&](Result<void> r) { cancelled = said(r); });
             });
  ASSERT_TRUE(loop.run_until([&] { return cancelled.has_value(); }));
  ASSERT_EQ(*cancelled, "ok");
  const int at_cancel_ok = dispatched;
  std::string counts;
  const std::string expected = q + "\t" + std::to_string(total - dispatched) + "\t" + std::to_string(dispatched);
  loop.run_until([&] {
    counts = rabbitmqctl("list_queues name messages_ready messages_unacknowledged");
    return counts.find(expected) != std::string::npos;
  }, 5s);
  EXPECT_NE(counts.find(expected), std::string::npos) << "dispatched " << dispatched << "\n" << counts;
  EXPECT_EQ(dispatched, at_cancel_ok);  // nothing is dispatched after cancel-ok
  EXPECT_LT(dispatched, total) << "the race did not happen: every message was dispatched before the cancel";
}

TEST_P(ClientSuite, the_broker_cancels_a_consumer_whose_queue_is_deleted) {
  auto ch = open();
  auto q = temp_queue(ch, {.exclusive = true});
  std::optional<std::string> seen;
  auto doomed = wait<Consumer>([&](auto done) { ch.consume({.queue = q, .tag = "doomed"}, done); });
  ASSERT_TRUE(doomed.ok()) << said(doomed);
  doomed->on_ended([&](const Error& e) { seen = e.to_string(); });
  auto other = open();
  EXPECT_EQ(wait<std::uint32_t>([&](auto done) { other.queue_delete({.queue = q}, done); }).value(), 0u);
  ASSERT_TRUE(loop.run_until([&] { return seen.has_value(); }));
  EXPECT_EQ(*seen, "consumer cancelled: the broker cancelled consumer doomed");
  auto end = wait<Message>([&](auto done) { doomed->receive(done); });
  EXPECT_EQ(said(end), "consumer cancelled: the broker cancelled consumer doomed");
  EXPECT_TRUE(ch.is_open());
}

TEST_P(ClientSuite, a_wrong_password_is_refused_at_once) {
  auto u = client::parse_url("amqp://guest:wrong@127.0.0.1:" + env("RMQ_PORT"));
  ASSERT_TRUE(u.ok());
  std::optional<Error> error;
  bool done = false;
  auto c = client::Connection::connect(loop.driver(), *u, {}, [&](Result<void> r) {
    if (!r) error = r.error();
    done = true;
  });
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.run_until([&] { return done; }, 5s));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, errc::access_refused);
  EXPECT_EQ(error->reply_code, 403);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // not the broker's 3 s socket drop
}

TEST_P(ClientSuite, heartbeats_keep_an_idle_connection_alive_past_three_intervals) {
  auto c = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "?heartbeat=1");
  std::optional<std::string> closed;
  c->on_closed = [&](const Error& e) { closed = e.to_string(); };
  loop.run_until([] { return false; }, 3500ms);
  EXPECT_FALSE(closed.has_value()) << *closed;
  EXPECT_TRUE(c->is_open());
  bool done = false;
  c->close([&](Result<void>) { done = true; });
  loop.run_until([&] { return done; });
}

// A listener whose accept queue is full drops SYNs, as a host that drops packets does: the
// dial must give up at connection_timeout, then the next host is tried.
TEST_P(ClientSuite, the_connect_timeout_bounds_a_dial_to_a_host_that_drops_packets) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(f, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(200ms);

  auto u = client::parse_url("amqp://127.0.0.1:" + port + "?connection_timeout=300");
  ASSERT_TRUE(u.ok());
  std::optional<Error> error;
  bool done = false;
  const auto started = std::chrono::steady_clock::now();
  auto c = client::Connection::connect(loop.driver(), *u, {}, [&](Result<void> r) {
    if (!r) error = r.error();
    done = true;
  });
  ASSERT_TRUE(loop.run_until([&] { return done; }, 5s));
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, errc::timeout);
  EXPECT_EQ(error->detail, "connect 127.0.0.1:" + port + ": no connection within 300 ms");
  EXPECT_LT(took, 2s);

  // With a second host, the dial moves on after the timeout.
  auto both = client::parse_url("amqp://127.0.0.1:" + port + ",127.0.0.1:" + env("RMQ_PORT") + "?connection_timeout=300");
  ASSERT_TRUE(both.ok());
  std::optional<std::string> ready;
  auto c2 = client::Connection::connect(loop.driver(), *both, {}, [&](Result<void> r) { ready = said(r); });
  ASSERT_TRUE(loop.run_until([&] { return ready.has_value(); }, 5s));
  EXPECT_EQ(*ready, "ok");
  bool closed = false;
  c2->close([&](Result<void>) { closed = true; });
  loop.run_until([&] { return closed; });
  for (int f : fillers) ::close(f);
  ::close(listener);
}

TEST_P(ClientSuite, an_expired_broker_certificate_is_refused) {
  // A second broker, started by the test command, serves a certificate from the same test CA
  // that expired in 2020.
  client::ClientOptions options;
  options.ca_pem = file_text(env("RMQ_EXPIRED_DIR") + "/tls/ca.pem");
  auto u = client::parse_url("amqps://localhost:" + env("RMQ_EXPIRED_TLS_PORT"));
  ASSERT_TRUE(u.ok());
  std::optional<std::string> refused;
  auto c = client::Connection::connect(loop.driver(), *u, options, [&](Result<void> r) { refused = said(r); });
  ASSERT_TRUE(loop.run_until([&] { return refused.has_value(); }));
  EXPECT_EQ(*refused, "TLS handshake failed: certificate rejected: certificate has expired");
}

TEST_P(ClientSuite, external_login_with_a_client_certificate) {
  client::ClientOptions options;
  options.ca_pem = file_text(env("RMQ_DIR") + "/tls/ca.pem");
  options.client_cert_pem = file_text(env("RMQ_DIR") + "/tls/client.pem");
  options.client_key_pem = file_text(env("RMQ_DIR") + "/tls/client.key");
  auto c = connect("amqps://localhost:" + env("RMQ_TLS_PORT") + "?auth_mechanism=external", options);
  EXPECT_TRUE(c->is_open());  // no password was given: the certificate logged in
  bool closed = false;
  c->close([&](Result<void>) { closed = true; });
  loop.run_until([&] { return closed; });
  // Without the certificate, EXTERNAL has nothing to log in with.
  options.client_cert_pem.clear();
  options.client_key_pem.clear();
  auto u = client::parse_url("amqps://localhost:" + env("RMQ_TLS_PORT") + "?auth_mechanism=external");
  ASSERT_TRUE(u.ok());
  std::optional<Error> refused;
  bool done = false;
  auto anonymous = client::Connection::connect(loop.driver(), *u, options, [&](Result<void> r) {
    if (!r) refused = r.error();
    done = true;
  });
  ASSERT_TRUE(loop.run_until([&] { return done; }));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, errc::access_refused) << refused->to_string();
}

TEST_P(ClientSuite, a_finished_program_returns_from_its_loop_without_waiting_out_the_heartbeat) {
  auto c = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "?heartbeat=60");
  int closed = 0;
  c->close([&](Result<void>) { ++closed; });
  conn->close([&](Result<void>) { ++closed; });  // the fixture's connection too: nothing is left open
  const auto started = std::chrono::steady_clock::now();
  loop.run_to_completion();
  EXPECT_EQ(closed, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST_P(ClientSuite, tls_verified_and_refused) {
  client::ClientOptions options;
  options.ca_pem = file_text(env("RMQ_DIR") + "/tls/ca.pem");
  auto secure = connect("amqps://localhost:" + env("RMQ_TLS_PORT"), options);
  EXPECT_TRUE(secure->is_open());
  auto u = client::parse_url("amqps://127.0.0.1:" + env("RMQ_TLS_PORT") + "?server_name_indication=rabbit.example.com");
  ASSERT_TRUE(u.ok());
  std::optional<std::string> refused;
  auto wrong = client::Connection::connect(loop.driver(), *u, options,
                                           [&](Result<void> r) { refused = said(r); });
  ASSERT_TRUE(loop.run_until([&] { return refused.has_value(); }));
  EXPECT_EQ(*refused, "TLS handshake failed: certificate rejected: hostname mismatch");
  bool closed = false;
  secure->close([&](Result<void>) { closed = true; });
  loop.run_until([&] { return closed; });
}

INSTANTIATE_TEST_SUITE_P(Drivers, ClientSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

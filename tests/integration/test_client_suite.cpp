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

using namespace warren::wire;

TEST_P(ClientSuite, every_declare_bind_and_delete) {
  auto ch = channel();
  EXPECT_EQ(answer([&](auto done) { conn->exchange_declare(ch, ExchangeDeclare{"warren-suite-x", "topic"}, done); }),
            "exchange.declare-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->exchange_declare(ch, ExchangeDeclare{"warren-suite-y", "fanout"}, done); }),
            "exchange.declare-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->exchange_bind(ch, ExchangeBind{"warren-suite-y", "warren-suite-x", "a.#"}, done); }),
            "exchange.bind-ok()");
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  EXPECT_EQ(answer([&](auto done) { conn->queue_bind(ch, QueueBind{q, "warren-suite-y", ""}, done); }), "queue.bind-ok()");
  // Routed x -> y -> q.
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  EXPECT_EQ(confirm_publish(ch, BasicPublish{"warren-suite-x", "a.b"}, text("routed")), "confirmed");
  EXPECT_EQ(answer([&](auto done) { conn->queue_purge(ch, QueuePurge{q}, done); }), "queue.purge-ok(message_count=1)");
  EXPECT_EQ(answer([&](auto done) { conn->queue_unbind(ch, QueueUnbind{q, "warren-suite-y", ""}, done); }), "queue.unbind-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->exchange_unbind(ch, ExchangeUnbind{"warren-suite-y", "warren-suite-x", "a.#"}, done); }),
            "exchange.unbind-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->exchange_delete(ch, ExchangeDelete{"warren-suite-y"}, done); }), "exchange.delete-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->exchange_delete(ch, ExchangeDelete{"warren-suite-x"}, done); }), "exchange.delete-ok()");
  EXPECT_EQ(answer([&](auto done) { conn->queue_delete(ch, QueueDelete{q}, done); }), "queue.delete-ok(message_count=0)");
}

TEST_P(ClientSuite, get_with_ack_nack_and_reject) {
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  for (const char* body : {"one", "two"}) ASSERT_EQ(confirm_publish(ch, BasicPublish{"", q}, text(body)), "confirmed");
  auto get = [&]() {
    std::optional<std::string> got;
    std::uint64_t tag = 0;
    conn->get(ch, BasicGet{q, false}, [&](const Error* e, const engine::Message* m) {
      got = e ? e->to_string() : m ? text_of(m->body) + (m->redelivered ? " (redelivered)" : "") : "empty";
      if (m) tag = m->delivery_tag;
    });
    loop.run_until([&] { return got.has_value(); });
    return std::pair{got.value_or("<no answer>"), tag};
  };
  auto [first, t1] = get();
  EXPECT_EQ(first, "one");
  ASSERT_TRUE(conn->nack(ch, t1, false, true).ok());  // back to the head of the queue
  auto [again, t2] = get();
  EXPECT_EQ(again, "one (redelivered)");
  ASSERT_TRUE(conn->reject(ch, t2, false).ok());  // dropped
  auto [second, t3] = get();
  EXPECT_EQ(second, "two");
  ASSERT_TRUE(conn->ack(ch, t3).ok());
  EXPECT_EQ(get().first, "empty");
}

TEST_P(ClientSuite, confirms_report_nacks_and_returns) {
  auto ch = channel();
  FieldTable args;
  args.set("x-max-length", std::int32_t{1}).set("x-overflow", std::string("reject-publish"));
  auto q = declare(ch, QueueDeclare{"", false, false, true, true, false, args});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  EXPECT_EQ(confirm_publish(ch, BasicPublish{"", q}, text("fits")), "confirmed");
  EXPECT_EQ(confirm_publish(ch, BasicPublish{"", q}, text("overflows")),
            "nacked precondition failed: the broker nacked the message");
  EXPECT_EQ(confirm_publish(ch, BasicPublish{"amq.direct", "nobody-binds-this", true, false}, text("lost")),
            "returned not found (312): NO_ROUTE");
}

TEST_P(ClientSuite, a_5_mib_body_crosses_many_frames) {
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  std::string big(5 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 31) ^ (i >> 9));
  EXPECT_EQ(confirm_publish(ch, BasicPublish{"", q}, text(big), {}, 30s), "confirmed");
  std::optional<bool> same;
  conn->get(ch, BasicGet{q, true}, [&](const Error* e, const engine::Message* m) { same = !e && m && text_of(m->body) == big; });
  ASSERT_TRUE(loop.run_until([&] { return same.has_value(); }, 30s));
  EXPECT_TRUE(*same);
}

TEST_P(ClientSuite, direct_reply_to_round_trip) {
  auto server_ch = channel();
  auto client_ch = channel();
  auto requests = declare(server_ch, QueueDeclare{"", false, false, true, true});
  // The server answers each request on the queue its reply_to names, with the correlation id.
  std::string server_error;
  ASSERT_EQ(answer([&](auto done) {
              conn->consume(server_ch, BasicConsume{requests, "", false, true}, std::nullopt,
                            [&](const engine::Message& m) {
                              BasicProperties reply;
                              reply.correlation_id = m.properties->correlation_id;
                              std::string upper = text_of(m.body);
                              for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                              conn->publish(server_ch, BasicPublish{"", *m.properties->reply_to}, reply, text(upper),
                                            [](engine::PublishOutcome, const Error&) {});
                            },
                            done);
            }).rfind("basic.consume-ok(", 0),
            0u);
  std::optional<std::string> reply;
  ASSERT_EQ(answer([&](auto done) {
              conn->consume(client_ch, BasicConsume{"amq.rabbitmq.reply-to", "", false, true}, std::nullopt,
                            [&](const engine::Message& m) {
                              reply = text_of(m.body) + " #" + std::string(m.properties->correlation_id.value_or(""));
                            },
                            done);
            }).rfind("basic.consume-ok(", 0),
            0u);
  BasicProperties request;
  request.reply_to = "amq.rabbitmq.reply-to";
  request.correlation_id = "call-1";
  conn->publish(client_ch, BasicPublish{"", requests}, request, text("hello rpc"), [](engine::PublishOutcome, const Error&) {});
  ASSERT_TRUE(loop.run_until([&] { return reply.has_value(); }));
  EXPECT_EQ(*reply, "HELLO RPC #call-1");
}

TEST_P(ClientSuite, a_channel_error_closes_only_its_channel) {
  auto ch = channel();
  // A named, non-exclusive queue: a server-named amq.gen- queue cannot be redeclared at all
  // (403), and an exclusive one is not compared on durable.
  auto q = declare(ch, QueueDeclare{"warren-suite-406", false, false, false, true});
  // Redeclaring with other properties: 406, and only this channel closes.
  auto redeclared = answer([&](auto done) { conn->queue_declare(ch, QueueDeclare{q, false, true, false, true}, done); });
  EXPECT_EQ(redeclared.rfind("precondition failed (406): PRECONDITION_FAILED - inequivalent arg 'durable'", 0), 0u)
      << redeclared;
  EXPECT_TRUE(conn->is_open());
  auto other = channel();
  EXPECT_EQ(answer([&](auto done) { conn->queue_declare(other, QueueDeclare{q, true}, done); }).rfind("queue.declare-ok(", 0), 0u);
  EXPECT_EQ(answer([&](auto done) { conn->queue_delete(other, QueueDelete{q}, done); }), "queue.delete-ok(message_count=0)");
}

TEST_P(ClientSuite, a_connection_error_closes_the_connection_with_its_cause) {
  auto ch = channel();
  std::optional<Error> cause;
  conn->on_closed = [&](const Error& e) { cause = e; };
  // RabbitMQ refuses immediate=true with 540 NOT_IMPLEMENTED, a connection error.
  conn->publish(ch, BasicPublish{"", "anything", false, true}, {}, text("x"), [](engine::PublishOutcome, const Error&) {});
  ASSERT_TRUE(loop.run_until([&] { return cause.has_value(); }));
  EXPECT_EQ(cause->reply_code, 540);
  EXPECT_NE(cause->detail.find("NOT_IMPLEMENTED"), std::string::npos) << cause->to_string();
  EXPECT_FALSE(conn->is_open());
}

// A memory alarm on the test broker (a watermark of 0), lifted by lift() or at the end of
// the scope whatever happens, and what the connection heard of it.
struct MemoryAlarm {
  bool blocked = false, unblocked = false;
  explicit MemoryAlarm(client::Connection& c) : connection(c) {
    c.on_blocked = [this](std::string_view) { blocked = true; };
    c.on_unblocked = [this] { unblocked = true; };
    rabbitmqctl("set_vm_memory_high_watermark 0");
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
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  MemoryAlarm alarm(*conn);
  const bool& blocked = alarm.blocked;
  const bool& unblocked = alarm.unblocked;
  int confirmed = 0;
  auto count = [&](engine::PublishOutcome o, const Error&) { confirmed += o == engine::PublishOutcome::confirmed; };
  // connection.blocked reaches a connection when it next publishes.
  conn->publish(ch, BasicPublish{"", q}, {}, text("first"), count);
  ASSERT_TRUE(loop.run_until([&] { return blocked; }));
  conn->publish(ch, BasicPublish{"", q}, {}, text("waits"), count);
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
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  MemoryAlarm alarm(*conn);
  const bool& blocked = alarm.blocked;
  const bool& unblocked = alarm.unblocked;
  int confirmed = 0, other = 0;
  auto count = [&](engine::PublishOutcome o, const Error&) {
    if (o == engine::PublishOutcome::confirmed) ++confirmed;
    else ++other;
  };
  conn->publish(ch, BasicPublish{"", q}, {}, text("first"), count);
  ASSERT_TRUE(loop.run_until([&] { return blocked; }));
  const std::string body(16 * 1024, 'w');
  constexpr int waiting = 24;  // 384 KiB: over the 256 KiB limit, under twice it
  for (int i = 0; i < waiting; ++i) conn->publish(ch, BasicPublish{"", q}, {}, text(body), count);
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
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, true});
  auto ok = answer([&](auto done) { conn->consume(ch, BasicConsume{q, "suite-prefetch"}, std::nullopt, [](const engine::Message&) {}, done); });
  ASSERT_EQ(ok, "basic.consume-ok(consumer_tag=\"suite-prefetch\")");
  auto consumers = rabbitmqctl("list_consumers queue_name consumer_tag prefetch_count");
  EXPECT_NE(consumers.find(q + "\tsuite-prefetch\t250"), std::string::npos) << consumers;
}

TEST_P(ClientSuite, cancel_hands_back_what_was_never_dispatched) {
  auto ch = channel();
  // Exclusive but not auto-delete: cancelling its only consumer must not delete it.
  auto q = declare(ch, QueueDeclare{"", false, false, true, false});
  ASSERT_EQ(answer([&](auto done) { conn->confirm_select(ch, done); }), "confirm.select-ok()");
  constexpr int total = 2000;
  int confirmed = 0;
  for (int i = 0; i < total; ++i)
    conn->publish(ch, BasicPublish{"", q}, {}, text("m"), [&](engine::PublishOutcome o, const Error&) { confirmed += o == engine::PublishOutcome::confirmed; });
  ASSERT_TRUE(loop.run_until([&] { return confirmed == total; }));
  // Unlimited prefetch, and a cancel sent the moment consume-ok arrives: deliveries already on
  // the wire race the cancel. Those never dispatched go back to the queue; those dispatched
  // stay unacknowledged on the channel, as AMQP says.
  int dispatched = 0;
  std::optional<std::string> cancelled;
  conn->consume(ch, BasicConsume{q, "racer"}, std::uint16_t{0}, [&](const engine::Message&) { ++dispatched; },
                [&](const Error* e, const wire::Method*) {
                  ASSERT_EQ(e, nullptr);
                  conn->cancel(ch, "racer", [&](const Error* e, const wire::Method*) { cancelled = e ? e->to_string() : "ok"; });
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
  auto ch = channel();
  auto q = declare(ch, QueueDeclare{"", false, false, true, false});
  std::optional<std::string> seen;
  conn->on_consumer_cancelled = [&](engine::ChannelId, std::string_view tag, bool by_broker) {
    seen = std::string(tag) + (by_broker ? " by broker" : "");
  };
  ASSERT_EQ(answer([&](auto done) { conn->consume(ch, BasicConsume{q, "doomed"}, std::nullopt, [](const engine::Message&) {}, done); }),
            "basic.consume-ok(consumer_tag=\"doomed\")");
  auto other = channel();
  EXPECT_EQ(answer([&](auto done) { conn->queue_delete(other, QueueDelete{q}, done); }), "queue.delete-ok(message_count=0)");
  ASSERT_TRUE(loop.run_until([&] { return seen.has_value(); }));
  EXPECT_EQ(*seen, "doomed by broker");
}

TEST_P(ClientSuite, a_wrong_password_is_refused_at_once) {
  auto u = client::parse_url("amqp://guest:wrong@127.0.0.1:" + env("RMQ_PORT"));
  ASSERT_TRUE(u.ok());
  std::optional<Error> error;
  bool done = false;
  auto c = client::Connection::connect(loop.driver(), *u, {}, [&](const Error* e) {
    if (e) error = *e;
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
  c->close([&](const Error*) { done = true; });
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
  auto c = client::Connection::connect(loop.driver(), *u, {}, [&](const Error* e) {
    if (e) error = *e;
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
  auto c2 = client::Connection::connect(loop.driver(), *both, {}, [&](const Error* e) { ready = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(loop.run_until([&] { return ready.has_value(); }, 5s));
  EXPECT_EQ(*ready, "ok");
  bool closed = false;
  c2->close([&](const Error*) { closed = true; });
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
  auto c = client::Connection::connect(loop.driver(), *u, options, [&](const Error* e) { refused = e ? e->to_string() : "ok"; });
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
  c->close([&](const Error*) { closed = true; });
  loop.run_until([&] { return closed; });
  // Without the certificate, EXTERNAL has nothing to log in with.
  options.client_cert_pem.clear();
  options.client_key_pem.clear();
  auto u = client::parse_url("amqps://localhost:" + env("RMQ_TLS_PORT") + "?auth_mechanism=external");
  ASSERT_TRUE(u.ok());
  std::optional<Error> refused;
  bool done = false;
  auto anonymous = client::Connection::connect(loop.driver(), *u, options, [&](const Error* e) {
    if (e) refused = *e;
    done = true;
  });
  ASSERT_TRUE(loop.run_until([&] { return done; }));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, errc::access_refused) << refused->to_string();
}

TEST_P(ClientSuite, a_finished_program_returns_from_its_loop_without_waiting_out_the_heartbeat) {
  auto c = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "?heartbeat=60");
  int closed = 0;
  c->close([&](const Error*) { ++closed; });
  conn->close([&](const Error*) { ++closed; });  // the fixture's connection too: nothing is left open
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
                                           [&](const Error* e) { refused = e ? e->to_string() : "ok"; });
  ASSERT_TRUE(loop.run_until([&] { return refused.has_value(); }));
  EXPECT_EQ(*refused, "TLS handshake failed: certificate rejected: hostname mismatch");
  bool closed = false;
  secure->close([&](const Error*) { closed = true; });
  loop.run_until([&] { return closed; });
}

INSTANTIATE_TEST_SUITE_P(Drivers, ClientSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

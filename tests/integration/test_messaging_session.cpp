// The messaging layer on a Session, against the real broker, on each driver: the broker closes
// the session's connection (rabbitmqctl close_connection) while a worker, an inbox, a room of
// the backplane and a log tail are consuming; the session dials again, each subscription runs
// its setup again on the new connection (the inbox's and the backplane's exclusive queues are
// declared and bound anew) and consumes again, each reported once closed and once recovered,
// and nothing is replayed: the tail goes on from the entry after the last it handed on. A
// session that closes ends the layer's subscriptions for good, as a plain connection does.
#include "client_fixture.hpp"
#include "warren/client/session.hpp"
#include "warren/messaging/backplane.hpp"
#include "warren/messaging/direct.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/work_queue.hpp"

namespace warren::test {
namespace {

using namespace warren::messaging;

class MessagingSession : public ClientSuite {
 protected:
  std::string prefix = "ws" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000);
  std::string name = std::string("warren-msg-session-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  std::vector<Event> events;
  std::shared_ptr<client::Session> session;
  std::shared_ptr<Messaging> m;

  void SetUp() override {
    ClientSuite::SetUp();
    auto url = client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f");
    ASSERT_TRUE(url.ok());
    client::SessionOptions options;
    options.client.engine.connection_name = name;
    options.backoff = client::Backoff{50ms, 2.0, 500ms};
    session = client::Session::start(loop.driver(), *url, options);
    auto layer = Messaging::create(session, {.prefix = prefix, .queue_type = "classic",
                                             .on_event = [this](const Event& e) { events.push_back(e); }});
    ASSERT_TRUE(layer.ok()) << layer.error().to_string();
    m = *layer;
  }
  void TearDown() override {
    if (m) (void)wait<void>([&](auto d) { m->close(d); });
    if (session) (void)wait<void>([&](auto d) { session->close(d); });
    ClientSuite::TearDown();
  }
  std::size_t count(std::string_view what, std::string_view subject) const {
    return static_cast<std::size_t>(std::count_if(events.begin(), events.end(), [&](const Event& e) {
      return e.what == what && e.subject == subject;
    }));
  }
  void close_the_connection() {
    ASSERT_TRUE(loop.run_until([&] { return close_connections_named(name, "warren test: go away") == 1; }));
  }
};

TEST_P(MessagingSession, every_subscription_sets_up_again_after_the_connection_is_lost) {
  // A worker.
  auto q = WorkQueue::create(m, {.name = "jobs", .attempts = 3, .backoff = {.base = 100ms, .max = 100ms}});
  ASSERT_TRUE(q.ok());
  std::vector<std::string> jobs;
  auto worker = wait<std::shared_ptr<Subscription>>([&](auto d) {
    (*q)->consume({.prefetch = 5}, [&](WorkItem item) {
      jobs.emplace_back(item.body());
      EXPECT_TRUE(item.done().ok());
    }, d);
  });
  ASSERT_TRUE(worker.ok()) << worker.error().to_string();
  // An inbox: its address is the same after the reconnect.
  std::vector<std::string> letters;
  auto inbox = wait<std::shared_ptr<Inbox>>([&](auto d) {
    open_inbox(m, {}, [&](const client::Delivery& dl) { letters.emplace_back(dl.body_text()); }, d);
  });
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  // A backplane instance in one room: its exclusive queue is declared and bound again.
  std::vector<std::string> room_events;
  auto bp = wait<std::shared_ptr<Backplane>>([&](auto d) {
    Backplane::start(m, {}, [&](std::string_view room, const client::Delivery& dl) {
      room_events.push_back(std::string(room) + ":" + std::string(dl.body_text()));
    }, d);
  });
  ASSERT_TRUE(bp.ok()) << bp.error().to_string();
  ASSERT_TRUE(wait<void>([&](auto d) { (*bp)->join("lobby", d); }).ok());
  // A log tail.
  auto log = Log::create(m, {.name = "events"});
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(wait<void>([&](auto d) { (*log)->declare(d); }).ok());
  std::vector<std::string> entries;
  std::vector<std::uint64_t> offsets;
  auto tail = wait<std::shared_ptr<LogTail>>([&](auto d) {
    (*log)->follow({.position = "first"}, [&](const client::Delivery& dl, std::uint64_t offset) {
      entries.emplace_back(dl.body_text());
      offsets.push_back(offset);
    }, nullptr, d);
  });
  ASSERT_TRUE(tail.ok()) << tail.error().to_string();

  auto round = [&](const std::string& tag) {
    ASSERT_TRUE(wait<void>([&](auto d) { (*q)->put({.body = "job-" + tag}, d); }).ok());
    auto sent = wait<void>([&](auto d) { send(m, {.address = (*inbox)->address(), .body = "letter-" + tag}, d); });
    ASSERT_TRUE(sent.ok()) << sent.error().to_string();
    auto said = wait<void>([&](auto d) { (*bp)->publish("lobby", "hello-" + tag, d); });
    ASSERT_TRUE(said.ok()) << said.error().to_string();
    auto appended = wait<std::uint64_t>([&](auto d) { (*log)->append("entry-" + tag, d); });
    ASSERT_TRUE(appended.ok()) << appended.error().to_string();
  };
  round("before");
  ASSERT_TRUE(loop.run_until([&] {
    return jobs.size() == 1 && letters.size() == 1 && room_events.size() == 1 && entries.size() == 1;
  }));
  EXPECT_TRUE(m->healthy());
  const std::string address = (*inbox)->address();

  close_the_connection();
  ASSERT_TRUE(loop.run_until([&] { return !m->healthy(); }, 10s)) << "the loss is seen";
  ASSERT_TRUE(loop.run_until([&] { return m->healthy() && session->healthy(); }, 30s)) << "and recovered from";
  for (const auto& queue : {(*q)->queue(), address, (*bp)->queue(), (*log)->queue()}) {
    EXPECT_EQ(count("consumer.closed", queue), 1u) << queue;
    EXPECT_EQ(count("consumer.recovered", queue), 1u) << queue;
  }
  EXPECT_EQ(count("connection", ""), 0u) << "a Session's loss is not the end";
  EXPECT_FALSE((*worker)->over());
  EXPECT_TRUE((*tail)->active());

  round("after");
  ASSERT_TRUE(loop.run_until([&] {
    return jobs.size() == 2 && letters.size() == 2 && room_events.size() == 2 && entries.size() == 2;
  }, 15s)) << jobs.size() << " " << letters.size() << " " << room_events.size() << " " << entries.size();
  EXPECT_EQ(jobs, (std::vector<std::string>{"job-before", "job-after"}));
  EXPECT_EQ(letters, (std::vector<std::string>{"letter-before", "letter-after"}));
  EXPECT_EQ(room_events, (std::vector<std::string>{"lobby:hello-before", "lobby:hello-after"}));
  // Not replayed: the tail resumed after the entry it had handed on.
  EXPECT_EQ(entries, (std::vector<std::string>{"entry-before", "entry-after"}));
  ASSERT_EQ(offsets.size(), 2u);
  EXPECT_LT(offsets[0], offsets[1]);
  EXPECT_EQ((*inbox)->address(), address);

  auto ch = open();
  for (const auto& n : {(*q)->queue(), (*q)->dead_letter_queue(), (*log)->queue()})
    (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = n}, d); });
  for (auto level : delay_levels((*q)->options().backoff))
    (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = (*q)->retry_queue(level)}, d); });
  ch.close(nullptr);
}

TEST_P(MessagingSession, a_closed_session_ends_every_subscription_for_good) {
  std::vector<std::string> letters;
  auto inbox = wait<std::shared_ptr<Inbox>>([&](auto d) {
    open_inbox(m, {}, [&](const client::Delivery& dl) { letters.emplace_back(dl.body_text()); }, d);
  });
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  EXPECT_TRUE(m->healthy());
  ASSERT_TRUE(wait<void>([&](auto d) { session->close(d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return count("connection", "") == 1; }));
  EXPECT_FALSE(m->healthy());
  EXPECT_FALSE((*inbox)->healthy());
  // A call after the end fails at once, naming why, instead of waiting for a connection.
  auto sent = wait<void>([&](auto d) { send(m, {.address = (*inbox)->address(), .body = "late"}, d); }, 2s);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.error().to_string().find("the session is closed"), std::string::npos) << sent.error().to_string();
  session.reset();
}

INSTANTIATE_TEST_SUITE_P(Drivers, MessagingSession, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

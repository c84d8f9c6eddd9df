// The messaging layer's log (a stream queue) against the real broker, on each driver: appends
// answered with their offsets, a catch-up page from the first entry that ends complete at the
// tip, a resume from an offset, an empty stream read as a complete empty page, a live tail,
// a stream reader cancelled with unread deliveries in flight leaving the connection open (3.10
// closes it with 540 for a rejected stream delivery), and a 406 from a changed stream_max_bytes closing only
// that channel. Trimming (the 410 gap) needs a node of its own and is not run here.
#include <map>

#include "client_fixture.hpp"
#include "faults/fault_proxy.hpp"
#include "warren/client/session.hpp"
#include "warren/messaging/log.hpp"

namespace warren::test {
namespace {

using namespace warren::messaging;

class MessagingLog : public ClientSuite {
 protected:
  std::string prefix = "wl" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000);

  std::shared_ptr<Messaging> layer(std::shared_ptr<client::Connection> c = nullptr, Options o = {}) {
    o.prefix = prefix;
    auto m = Messaging::create(c ? c : conn, o);
    if (!m) throw std::runtime_error(m.error().to_string());
    return *m;
  }
  std::shared_ptr<Log> log(const std::shared_ptr<Messaging>& m, std::string name) {
    auto l = Log::create(m, {.name = std::move(name), .idle = 500ms, .empty_wait = 500ms});
    if (!l) throw std::runtime_error(l.error().to_string());
    return *l;
  }
  std::uint64_t append(const std::shared_ptr<Log>& l, std::string_view body) {
    auto r = wait<std::uint64_t>([&](auto d) { l->append(body, d); });
    if (!r) throw std::runtime_error("append: " + r.error().to_string());
    return *r;
  }
  Page read(const std::shared_ptr<Log>& l, ReadOptions o) {
    auto r = wait<Page>([&](auto d) { l->read(o, d); });
    if (!r) throw std::runtime_error("read: " + r.error().to_string());
    return std::move(*r);
  }
  static std::string bodies(const Page& p) {
    std::string s;
    for (const auto& e : p.entries) s += std::string(e.message.body_text()) + "@" + std::to_string(e.offset) + " ";
    return s;
  }
  void drop(const std::shared_ptr<Log>& l) {
    auto ch = open();
    (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = l->queue()}, d); });
    ch.close(nullptr);
  }
};

TEST_P(MessagingLog, appends_answer_their_offsets_and_a_page_from_first_ends_complete_at_the_tip) {
  auto m = layer();
  auto l = log(m, "events");
  const auto a = append(l, "a"), b = append(l, "b"), c = append(l, "c");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  auto page = read(l, {.from = {.position = "first"}});
  EXPECT_TRUE(page.complete);
  ASSERT_TRUE(page.tip.has_value());
  EXPECT_EQ(*page.tip, c);
  EXPECT_EQ(bodies(page), "a@" + std::to_string(a) + " b@" + std::to_string(b) + " c@" + std::to_string(c) + " ");
  // Resumed from an entry's offset: that entry and what follows.
  auto resumed = read(l, {.from = {.offset = b}});
  EXPECT_TRUE(resumed.complete);
  EXPECT_EQ(bodies(resumed), "b@" + std::to_string(b) + " c@" + std::to_string(c) + " ");
  // A page bounded by max_entries is handed back incomplete, and the next one resumes.
  auto first_only = read(l, {.from = {.position = "first"}, .max_entries = 1});
  EXPECT_FALSE(first_only.complete);
  ASSERT_EQ(first_only.entries.size(), 1u);
  auto rest = read(l, {.from = {.offset = first_only.entries[0].offset + 1}});
  EXPECT_TRUE(rest.complete);
  EXPECT_EQ(bodies(rest), "b@" + std::to_string(b) + " c@" + std::to_string(c) + " ");
  EXPECT_TRUE(conn->is_open());
  drop(l);
}

TEST_P(MessagingLog, an_empty_stream_is_a_complete_empty_page) {
  auto m = layer();
  auto l = log(m, "empty");
  ASSERT_TRUE(wait<void>([&](auto d) { l->declare(d); }).ok());
  const auto started = std::chrono::steady_clock::now();
  auto page = read(l, {});
  EXPECT_TRUE(page.complete);
  EXPECT_TRUE(page.entries.empty());
  EXPECT_FALSE(page.tip.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);  // empty_wait, not a hang
  drop(l);
}

TEST_P(MessagingLog, a_tail_sees_entries_as_they_are_appended) {
  auto m = layer();
  auto l = log(m, "live");
  append(l, "before");
  std::vector<std::string> seen;
  auto tail = wait<std::shared_ptr<LogTail>>([&](auto d) {
    l->follow({.position = "next"}, [&](const client::Delivery& dl, std::uint64_t offset) {
      seen.push_back(std::string(dl.body_text()) + "@" + std::to_string(offset));
    }, nullptr, d);
  });
  ASSERT_TRUE(tail.ok()) << tail.error().to_string();
  loop.run_until([] { return false; }, 300ms);  // the tail is attached before the append
  const auto after = append(l, "after");
  ASSERT_TRUE(loop.run_until([&] { return !seen.empty(); }));
  EXPECT_EQ(seen, (std::vector<std::string>{"after@" + std::to_string(after)}));
  ASSERT_TRUE(wait<void>([&](auto d) { (*tail)->close(d); }).ok());
  EXPECT_TRUE(conn->is_open());
  drop(l);
}

// The client's cancel rule meets a stream: a pull-mode (receive()) reader with a prefetch of 50
// holds unread, unacked deliveries when it cancels. Handing those back by basic.reject or
// basic.nack would close the whole connection with 540 on RabbitMQ 3.10-3.12 (the control at
// the end shows this broker does); the client leaves them to the channel instead, so the
// connection and the reader's own channel stay open and usable. The layer's readers (pages cut
// short by max_entries, a tail) stop the same way.
TEST_P(MessagingLog, a_stream_reader_cancelled_with_unread_deliveries_keeps_the_connection_open) {
  auto m = layer();
  auto l = log(m, "busy");
  for (int i = 0; i < 40; ++i) append(l, std::string(200, 'x'));

  auto ch = open();
  auto reader = wait<client::Consumer>([&](auto d) {
    ch.consume({.queue = l->queue(), .prefetch = 50, .arguments = {{"x-stream-offset", "first"}}}, d);
  });
  ASSERT_TRUE(reader.ok()) << reader.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return reader->buffered() >= 30; })) << reader->buffered();
  auto first = wait<client::Message>([&](auto d) { reader->receive(d); });
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  ASSERT_TRUE(first->ack().ok());
  ASSERT_GE(reader->buffered(), 29u);  // unread and unacked when the cancel goes out
  ASSERT_TRUE(wait<void>([&](auto d) { reader->cancel(d); }).ok());
  loop.run_until([] { return false; }, 500ms);  // a 540 would have closed it by now
  ASSERT_TRUE(conn->is_open());
  ASSERT_TRUE(ch.is_open());
  auto still = wait<client::QueueDeclared>([&](auto d) { ch.queue_declare({.name = l->queue(), .passive = true}, d); });
  EXPECT_TRUE(still.ok()) << still.error().to_string();
  ch.close(nullptr);

  // The layer's readers: pages cut short with the rest of the stream on its way, and a tail.
  for (int i = 0; i < 2; ++i) EXPECT_EQ(read(l, {.from = {.position = "first"}, .max_entries = 2}).entries.size(), 2u);
  int seen = 0;
  auto tail = wait<std::shared_ptr<LogTail>>([&](auto d) {
    l->follow({.position = "first"}, [&](const client::Delivery&, std::uint64_t) { ++seen; }, nullptr, d);
  });
  ASSERT_TRUE(tail.ok());
  ASSERT_TRUE(loop.run_until([&] { return seen > 0; }));
  ASSERT_TRUE(wait<void>([&](auto d) { (*tail)->close(d); }).ok());
  loop.run_until([] { return false; }, 300ms);
  EXPECT_TRUE(conn->is_open());
  EXPECT_GT(append(l, "still here"), 0u);

  // The control, on a connection of its own: on 3.10-3.12 a nack of a stream delivery does
  // close the connection, so the assertions above would catch a client that handed back.
  const auto version = conn->broker_version();
  ASSERT_TRUE(version.has_value());
  if (*version < client::BrokerVersion{3, 13, 0}) {
    auto other = connect();
    auto och = open(*other);
    auto probe = wait<client::Consumer>([&](auto d) {
      och.consume({.queue = l->queue(), .prefetch = 5, .arguments = {{"x-stream-offset", "first"}}}, d);
    });
    ASSERT_TRUE(probe.ok());
    auto one = wait<client::Message>([&](auto d) { probe->receive(d); });
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE(one->nack({.requeue = true}).ok());
    EXPECT_TRUE(loop.run_until([&] { return !other->is_open(); }, 5s)) << "3.10-3.12 close the connection for it";
  }
  drop(l);
}

// Two layers on two connections append at once: the last chunk read back after a confirm is
// often another appender's, so each append must find its own entry (by its message_id),
// not take the tip. Every offset returned must hold the body that append wrote.
TEST_P(MessagingLog, concurrent_appenders_each_get_their_own_entrys_offset) {
  auto other = connect();
  auto a = log(layer(), "crowd");
  auto b = log(layer(other), "crowd");
  ASSERT_TRUE(wait<void>([&](auto d) { a->declare(d); }).ok());
  constexpr int per_appender = 40;
  std::map<std::string, std::uint64_t> answered;
  std::vector<std::string> errors;
  for (int i = 0; i < per_appender; ++i)
    for (auto* l : {&a, &b}) {
      std::string body = (l == &a ? "a" : "b") + std::to_string(i);
      (*l)->append(body, [&, body](Result<std::uint64_t> r) {
        if (!r) return errors.push_back(body + ": " + r.error().to_string());
        answered[body] = *r;
      });
    }
  ASSERT_TRUE(loop.run_until([&] { return answered.size() + errors.size() == 2 * per_appender; }, 60s));
  ASSERT_TRUE(errors.empty()) << errors.front();
  auto page = read(a, {.from = {.position = "first"}});
  ASSERT_TRUE(page.complete);
  std::map<std::uint64_t, std::string> at;
  for (const auto& e : page.entries) at[e.offset] = std::string(e.message.body_text());
  int wrong = 0;
  for (const auto& [body, offset] : answered)
    if (at[offset] != body) {
      if (++wrong <= 5) ADD_FAILURE() << body << " was told offset " << offset << ", which holds '" << at[offset] << "'";
    }
  EXPECT_EQ(wrong, 0);
  drop(a);
  close(*other);
}

// F1: a read, the tip and an append's read-back end while another connection appends every
// 20 ms, so the stream is never silent: each is bounded by what it asked for, the tip it saw
// and its own entry, not by a pause that never comes.
TEST_P(MessagingLog, reads_tips_and_appends_end_while_someone_appends_all_the_time) {
  auto m = layer();
  auto l = log(m, "busy");
  for (int i = 0; i < 5; ++i) append(l, "seed-" + std::to_string(i));
  // The other appender: its own connection on its own loop thread.
  std::atomic<bool> stop{false};
  std::atomic<int> appended{0};
  const auto url = client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f");
  ASSERT_TRUE(url.ok());
  std::thread other([&] {
    Loop other_loop(GetParam());
    std::optional<bool> ready;
    auto c = client::Connection::connect(other_loop.driver(), *url, {}, [&](Result<void> r) { ready = r.ok(); });
    if (!other_loop.run_until([&] { return ready.has_value(); }) || !*ready) return;
    auto om = Messaging::create(c, {.prefix = prefix});
    auto ol = Log::create(*om, {.name = "busy"});
    while (!stop) {
      std::optional<Result<std::uint64_t>> r;
      (*ol)->append("other", [&](Result<std::uint64_t> x) { r = x; });
      other_loop.run_until([&] { return r.has_value(); }, 10s);
      if (r && r->ok()) ++appended;
      other_loop.run_until([] { return false; }, 20ms);
    }
    c->close(nullptr);
    other_loop.run_until([] { return false; }, 100ms);
  });
  struct Joiner {  // on every way out, an ASSERT's too
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, other};
  ASSERT_TRUE(loop.run_until([&] { return appended >= 3; }, 10s));
  const auto started = std::chrono::steady_clock::now();
  auto tip = wait<std::optional<std::uint64_t>>([&](auto d) { l->tip(d); }, 5s);
  ASSERT_TRUE(tip.ok()) << tip.error().to_string();
  auto page = wait<Page>([&](auto d) { l->read({.from = {.position = "first"}}, d); }, 5s);
  ASSERT_TRUE(page.ok()) << page.error().to_string();
  EXPECT_TRUE(page->complete);
  ASSERT_FALSE(page->entries.empty());
  EXPECT_EQ(page->entries.back().offset, *page->tip) << "the read ends at the tip it saw, not later";
  std::vector<std::uint64_t> mine;
  for (int i = 0; i < 20; ++i) {
    auto offset = wait<std::uint64_t>([&](auto d) { l->append("mine-" + std::to_string(i), d); }, 10s);
    ASSERT_TRUE(offset.ok()) << "append " << i << ": " << offset.error().to_string();
    mine.push_back(*offset);
  }
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  stop = true;
  other.join();
  drop(l);
}

// F5: a tail from "next" that has handed nothing on when its connection is lost starts again
// from where it started, not from "next" again: an entry appended during the outage is handed
// on. The session reaches the broker through a proxy that holds it down meanwhile.
TEST_P(MessagingLog, a_tail_from_next_loses_nothing_appended_while_its_session_was_down) {
  FaultProxy proxy(broker_port());
  auto url = client::parse_url("amqp://127.0.0.1:" + std::to_string(proxy.port()) + "/%2f");
  ASSERT_TRUE(url.ok());
  client::SessionOptions so;
  so.backoff = client::Backoff{50ms, 2.0, 200ms};
  so.client.connect_timeout = 30s;
  so.client.engine.handshake_timeout = 30s;
  auto session = client::Session::start(loop.driver(), *url, so);
  auto sm = Messaging::create(session, {.prefix = prefix});
  ASSERT_TRUE(sm.ok());
  auto l = log(*sm, "outage");
  ASSERT_TRUE(wait<void>([&](auto d) { l->declare(d); }).ok());
  auto direct = log(layer(), "outage");  // appends on the fixture's own connection
  append(direct, "before");
  std::vector<std::string> seen;
  auto tail = wait<std::shared_ptr<LogTail>>([&](auto d) {
    l->follow({.position = "next"}, [&](const client::Delivery& dl, std::uint64_t) { seen.emplace_back(dl.body_text()); },
              nullptr, d);
  });
  ASSERT_TRUE(tail.ok()) << tail.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return (*tail)->healthy(); }));
  proxy.stall(true);  // the next dial's handshake hangs: the session stays down
  proxy.cut_all();
  ASSERT_TRUE(loop.run_until([&] { return !(*tail)->healthy(); }, 10s));
  append(direct, "during the outage");
  proxy.stall(false);
  ASSERT_TRUE(loop.run_until([&] { return (*tail)->healthy() && !seen.empty(); }, 30s)) << "recovered, entries: " << seen.size();
  append(direct, "after");
  ASSERT_TRUE(loop.run_until([&] { return seen.size() >= 2; }, 10s));
  EXPECT_EQ(seen, (std::vector<std::string>{"during the outage", "after"}));
  (void)wait<void>([&](auto d) { (*tail)->close(d); });
  (void)wait<void>([&](auto d) { (*sm)->close(d); });
  (void)wait<void>([&](auto d) { session->close(d); });
  drop(direct);
}

TEST_P(MessagingLog, a_changed_stream_max_bytes_is_a_406_on_one_channel_and_the_layer_goes_on) {
  auto m = layer();
  auto l = log(m, "sized");
  append(l, "one");
  auto other = layer(nullptr, {.stream_max_bytes = 1000000});
  auto same = log(other, "sized");
  auto r = wait<void>([&](auto d) { same->declare(d); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reply_code, 406) << r.error().to_string();
  EXPECT_TRUE(conn->is_open());
  auto fresh = log(other, "sized-other");
  EXPECT_EQ(append(fresh, "fine"), 0u);  // the first entry of a new stream, on a new channel
  drop(l);
  drop(fresh);
}

INSTANTIATE_TEST_SUITE_P(Drivers, MessagingLog, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

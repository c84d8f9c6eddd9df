// The messaging layer (patterns/messaging) against the real broker, on each driver: the work
// queue's retry path with its attempt header, release not counting an attempt, the DLQ after
// the last attempt with its headers (the error cut to fit a small frame_max), a worker's
// unacked message redelivered after its connection dies; an inbox, a service group of two
// competing members, a send to nobody failing; a 406 on one channel leaving the layer
// working, a queue deleted under a member subscribed again (logged once), close() releasing
// the layer's channels but not the connection; a user allowed only the prefix's names.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "client_fixture.hpp"
#include "warren/messaging/backplane.hpp"
#include "warren/messaging/direct.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/subscription.hpp"
#include "warren/messaging/work_queue.hpp"
#include "warren/wire/properties.hpp"

namespace warren::test {
namespace {

using namespace warren::messaging;
using client::FieldTable;

std::string field_text(const FieldTable& t, std::string_view key) {
  const auto* v = t.find(key);
  if (!v) return "<none>";
  if (const auto* s = std::get_if<std::string>(&v->value)) return *s;
  if (const auto* n = std::get_if<std::int64_t>(&v->value)) return std::to_string(*n);
  if (const auto* n = std::get_if<std::int32_t>(&v->value)) return std::to_string(*n);
  return "<other>";
}

class MessagingBroker : public ClientSuite {
 protected:
  std::string prefix = "wt" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                       std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000);
  std::vector<Event> events;

  std::shared_ptr<Messaging> layer(std::shared_ptr<client::Connection> c = nullptr, Options o = {}) {
    o.prefix = prefix;
    o.on_event = [this](const Event& e) { events.push_back(e); };
    auto m = Messaging::create(c ? c : conn, o);
    if (!m) throw std::runtime_error(m.error().to_string());
    return *m;
  }
  std::shared_ptr<WorkQueue> work(const std::shared_ptr<Messaging>& m, WorkQueueOptions o) {
    auto q = WorkQueue::create(m, std::move(o));
    if (!q) throw std::runtime_error(q.error().to_string());
    return *q;
  }
  // A queue's ready messages, by a passive declare on a channel of the test's own.
  std::uint32_t depth(const std::string& queue) {
    auto ch = open();
    auto q = wait<client::QueueDeclared>([&](auto d) { ch.queue_declare({.name = queue, .passive = true}, d); });
    if (!q) throw std::runtime_error("passive declare " + queue + ": " + q.error().to_string());
    ch.close(nullptr);
    return q->message_count;
  }
  void drop_work_queue(const WorkQueue& q) {
    auto ch = open();
    std::vector<std::string> names{q.queue(), q.dead_letter_queue()};
    for (auto level : delay_levels(q.options().backoff)) names.push_back(q.retry_queue(level));
    for (const auto& n : names) (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = n}, d); });
    ch.close(nullptr);
  }
  void put(const std::shared_ptr<WorkQueue>& q, std::string_view body, std::string id) {
    auto r = wait<void>([&](auto d) { q->put({.body = body, .message_id = std::move(id)}, d); });
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
};

TEST_P(MessagingBroker, a_retry_is_republished_with_the_next_attempt_through_its_delay_level) {
  auto m = layer();
  auto q = work(m, {.name = "jobs", .attempts = 5, .backoff = {.base = 100ms, .max = 400ms}, .random = [] { return 0.99; }});
  put(q, "payload", "id-1");
  std::vector<std::uint32_t> attempts;
  std::vector<std::string> ids;
  std::vector<std::chrono::milliseconds> delays;
  bool finished = false;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 attempts.push_back(item.attempt());
                 ids.emplace_back(item.message_id());
                 EXPECT_EQ(item.body(), "payload");
                 if (item.attempt() < 3) {
                   auto shared = std::make_shared<WorkItem>(std::move(item));
                   shared->retry({.error = "boom"}, [&, shared](Result<Retried> r) {
                     ASSERT_TRUE(r.ok()) << r.error().to_string();
                     EXPECT_FALSE(r->dead_lettered);
                     delays.push_back(r->delay);
                   });
                 } else {
                   EXPECT_TRUE(item.done().ok());
                   finished = true;
                 }
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return finished; }, 15s));
  EXPECT_EQ(attempts, (std::vector<std::uint32_t>{1, 2, 3}));
  EXPECT_EQ(ids, (std::vector<std::string>{"id-1", "id-1", "id-1"}));
  // Draw 0.99 takes the ceiling: 100 ms after the first failure, 200 ms after the second.
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{100ms, 200ms}));
  EXPECT_TRUE(m->healthy());
  EXPECT_EQ(depth(q->dead_letter_queue()), 0u);
  ASSERT_TRUE(wait<void>([&](auto d) { m->close(d); }).ok());
  EXPECT_TRUE(conn->is_open());  // the layer never closes what it was given
  drop_work_queue(*q);
}

// Each delay level is a queue of its own, so a short retry never waits behind a long one
// (RabbitMQ expires only a queue's head): a message that fails on its 4th attempt waits 2.7 s,
// one that fails on its 1st waits 100 ms (no jitter), and the second comes back first, end to end.
TEST_P(MessagingBroker, a_short_retry_never_waits_behind_a_long_one) {
  auto m = layer();
  auto q = work(m, {.name = "order",
                    .attempts = 10,
                    .backoff = {.base = 100ms, .max = 3s, .factor = 3.0, .jitter = Jitter::none}});
  ASSERT_TRUE(wait<void>([&](auto d) { q->declare(d); }).ok());
  auto ch = open();
  ASSERT_TRUE(wait<void>([&](auto d) { ch.confirm_select(d); }).ok());
  const FieldTable fourth{{std::string(attempt_header), std::int64_t{4}}};
  ASSERT_EQ(confirm_publish(ch, {.routing_key = q->queue(), .properties = {.headers = fourth, .message_id = "long"}},
                            client::as_bytes("long")),
            "confirmed");
  put(q, "short", "short");
  std::vector<std::string> seen;  // "<id> attempt=<n>" in arrival order
  std::vector<std::chrono::milliseconds> delays;
  auto worker = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 2}, [&](WorkItem item) {
      seen.push_back(std::string(item.message_id()) + " attempt=" + std::to_string(item.attempt()));
      if (seen.size() > 2) {
        EXPECT_TRUE(item.done().ok());
        return;
      }
      auto shared = std::make_shared<WorkItem>(std::move(item));
      shared->retry({.error = "not yet"}, [&, shared](Result<Retried> r) {
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        delays.push_back(r->delay);
      });
    }, d);
  });
  ASSERT_TRUE(worker.ok()) << worker.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return seen.size() == 4; }, 30s)) << ::testing::PrintToString(seen);
  std::sort(delays.begin(), delays.end());  // the two retries' confirms may come in either order
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{100ms, 2700ms}));
  EXPECT_EQ(seen, (std::vector<std::string>{"long attempt=4", "short attempt=1", "short attempt=2", "long attempt=5"}));
  drop_work_queue(*q);
}

TEST_P(MessagingBroker, release_does_not_count_and_the_last_attempt_goes_to_the_dlq_with_why) {
  auto m = layer();
  auto q = work(m, {.name = "poison", .attempts = 2, .backoff = {.base = 100ms, .max = 100ms}});
  put(q, "bad", "id-poison");
  std::vector<std::string> seen;
  bool released = false, dead = false;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 seen.push_back(std::to_string(item.attempt()));
                 if (!released) {
                   released = true;
                   EXPECT_TRUE(item.release().ok());
                   return;
                 }
                 auto shared = std::make_shared<WorkItem>(std::move(item));
                 FieldTable extra{{"x-warren-exit-status", 3}};
                 shared->retry({.error = "line one\nexit 3: it broke", .headers = extra}, [&, shared](Result<Retried> r) {
                   ASSERT_TRUE(r.ok()) << r.error().to_string();
                   if (r->dead_lettered) dead = true;
                 });
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return dead; }, 15s));
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "1", "2"}));  // the release counted nothing
  auto ch = open();
  auto got = wait<std::optional<client::Message>>([&](auto d) { ch.get({.queue = q->dead_letter_queue()}, d); });
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_TRUE(got->has_value());
  auto& msg = **got;
  EXPECT_EQ(msg.body_text(), "bad");
  EXPECT_EQ(msg.properties().message_id.value_or(""), "id-poison");
  auto h = msg.headers();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(field_text(*h, "x-warren-reason"), "attempts exhausted");
  EXPECT_EQ(field_text(*h, "x-warren-attempts"), "2");
  EXPECT_EQ(field_text(*h, "x-warren-attempt"), "2");
  EXPECT_EQ(field_text(*h, "x-warren-error"), "line one\nexit 3: it broke");
  EXPECT_EQ(field_text(*h, "x-warren-exit-status"), "3");
  EXPECT_EQ(field_text(*h, "x-warren-original-routing-key"), q->queue());
  EXPECT_EQ(h->find("x-death"), nullptr);  // the retry level's bookkeeping is not carried
  EXPECT_TRUE(msg.ack().ok());
  EXPECT_EQ(depth(q->queue()), 0u);
  drop_work_queue(*q);
}

// Issue 24: the layer's retries and dead-letters are records for Options::observer, named in
// the one scheme (docs/observability.md), beside the work queue's own outcome.
TEST_P(MessagingBroker, retries_and_dead_letters_reach_the_layers_observer_and_are_counted) {
  struct Records : client::Observer {
    std::vector<std::string> lines;
    void on_record(const client::Record& r) override {
      lines.push_back(std::string(r.name) + " " + client::to_string(r.level) + " " + std::string(r.subject));
    }
  };
  auto records = std::make_shared<Records>();
  auto metrics = std::make_shared<client::Metrics>();
  auto m = layer(nullptr, {.observer = records, .metrics = metrics});
  auto q = work(m, {.name = "observed", .attempts = 2, .backoff = {.base = 100ms, .max = 100ms}});
  put(q, "fails twice", "id-observed");
  bool dead = false;
  std::vector<std::chrono::milliseconds> delays;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 auto shared = std::make_shared<WorkItem>(std::move(item));
                 shared->retry({.error = "it broke"}, [&, shared](Result<Retried> r) {
                   ASSERT_TRUE(r.ok()) << r.error().to_string();
                   if (r->dead_lettered) dead = true;
                   else delays.push_back(r->delay);
                 });
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  auto worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return dead; }, 15s));
  ASSERT_EQ(delays.size(), 1u);
  EXPECT_EQ(records->lines,
            (std::vector<std::string>{"work.retried info " + q->queue() + ": attempt 2 in " +
                                          std::to_string(delays[0].count()) + " ms",
                                      "work.dead_lettered warning " + q->queue() + ": attempts exhausted"}));
  // And counted, by work queue (issue 24, metrics).
  const auto snap = metrics->snapshot();
  const client::MetricLabels this_queue{{"messaging.destination.name", q->queue()}};
  EXPECT_EQ(snap.total("warren.work.retries", this_queue), 1);
  EXPECT_EQ(snap.total("warren.work.dead_letters", this_queue), 1);
  worker->cancel(nullptr);
  drop_work_queue(*q);
}

// A retry level deleted under a running worker (by an operator, or lost with its node): the
// retry comes back unroutable and the message goes back as it was, after the delay it was to
// wait; the worker then declares its levels again, and the next retry goes through.
TEST_P(MessagingBroker, a_retry_into_a_deleted_level_goes_back_as_it_was_then_through_the_level_declared_again) {
  auto m = layer();
  auto q = work(m, {.name = "unrouted", .attempts = 3, .backoff = {.base = 100ms, .max = 100ms}});
  ASSERT_TRUE(wait<void>([&](auto d) { q->declare(d); }).ok());  // so put() declares nothing again
  std::vector<std::string> seen;
  std::vector<std::string> retries;  // each retry's outcome
  bool finished = false;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 seen.push_back(std::string(item.message_id()) + " attempt=" + std::to_string(item.attempt()));
                 if (item.attempt() == 2) {
                   finished = true;
                   return (void)item.done();
                 }
                 auto shared = std::make_shared<WorkItem>(std::move(item));
                 shared->retry({.error = "x"}, [&, shared](Result<Retried> r) {
                   retries.push_back(r ? "retried" : r.error().to_string());
                 });
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  // The only retry level is gone (after the worker declared it): the retry's mandatory
  // republish comes back unroutable.
  auto ch = open();
  ASSERT_TRUE(wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = q->retry_queue(100ms)}, d); }).ok());
  put(q, "keep me", "id-keep");
  ASSERT_TRUE(loop.run_until([&] { return finished; }, 10s)) << ::testing::PrintToString(seen);
  // Back as it was once, not in a loop; then through the level declared again.
  EXPECT_EQ(seen, (std::vector<std::string>{"id-keep attempt=1", "id-keep attempt=1", "id-keep attempt=2"}));
  ASSERT_EQ(retries.size(), 2u);
  EXPECT_NE(retries[0].find("unroutable"), std::string::npos) << retries[0];
  EXPECT_EQ(retries[1], "retried");
  EXPECT_EQ(depth(q->retry_queue(100ms)), 0u);  // there again
  drop_work_queue(*q);
}

TEST_P(MessagingBroker, an_error_too_big_for_the_frame_is_cut_not_allowed_to_break_it) {
  auto small = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f?frame_max=4096");
  auto m = layer(small);
  auto q = work(m, {.name = "big-error", .attempts = 1});
  put(q, "x", "id-big");
  bool dead = false;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 auto shared = std::make_shared<WorkItem>(std::move(item));
                 shared->retry({.error = std::string(20000, 'e')}, [&, shared](Result<Retried> r) {
                   ASSERT_TRUE(r.ok()) << r.error().to_string();
                   dead = r->dead_lettered;
                 });
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return dead; }, 15s));
  EXPECT_TRUE(small->is_open());
  auto ch = open();
  auto got = wait<std::optional<client::Message>>([&](auto d) { ch.get({.queue = q->dead_letter_queue(), .auto_ack = true}, d); });
  ASSERT_TRUE(got.ok() && got->has_value());
  auto h = (*got)->headers();
  ASSERT_TRUE(h.ok());
  const auto error = field_text(*h, "x-warren-error");
  EXPECT_GT(error.size(), 3000u);  // as much as fits
  EXPECT_LT(error.size(), 4096u);
  EXPECT_EQ(error, std::string(error.size(), 'e'));
  close(*small);
  drop_work_queue(*q);
}

// The message's own headers fill the worker's frame (4,096 bytes) so nearly that no retry's
// headers fit beside them: a retry could never be published, and requeueing it would bring it
// back forever. It is dead-lettered at once, with only the x-warren-* headers (and its trace
// context), and says why.
TEST_P(MessagingBroker, a_message_whose_headers_leave_no_room_for_a_retry_is_dead_lettered_with_only_the_layers_headers) {
  auto small = connect("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f?frame_max=4096");
  const WorkQueueOptions options{.name = "fat", .attempts = 3, .backoff = {.base = 100ms, .max = 100ms}};
  auto sender = work(layer(nullptr, {.queue_type = "classic"}), options);  // frame_max 128 KiB
  auto q = work(layer(small, {.queue_type = "classic"}), options);
  // The put's content header made as large as still reaches the worker in one frame.
  const std::string traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto header_size = [&](std::size_t n) {
    FieldTable h{{"filler", std::string(n, 'f')}, {"traceparent", traceparent}, {"x-warren-attempt", std::int64_t{1}}};
    client::Properties p{.headers = wire::TableRef(h), .delivery_mode = client::persistent, .message_id = "id-fat"};
    return *wire::content_header_size(p);
  };
  std::size_t n = 3000;
  while (header_size(n + 1) + 8 <= 4096) ++n;
  const std::string filler(n, 'f');
  auto sent = wait<void>([&](auto d) {
    sender->put({.body = "fat", .headers = {{"filler", filler}, {"traceparent", traceparent}}, .message_id = "id-fat"}, d);
  });
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  std::vector<std::string> outcomes;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 auto shared = std::make_shared<WorkItem>(std::move(item));
                 FieldTable extra{{"x-warren-exit-status", 3}, {"not-ours", "dropped"}};
                 shared->retry({.error = "it broke", .headers = extra}, [&, shared](Result<Retried> r) {
                   outcomes.push_back(!r ? r.error().to_string() : r->dead_lettered ? "dead-lettered" : "retried");
                 });
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return !outcomes.empty(); }, 10s));
  EXPECT_EQ(outcomes.front(), "dead-lettered");
  EXPECT_TRUE(small->is_open());
  auto ch = open();
  auto got = wait<std::optional<client::Message>>([&](auto d) { ch.get({.queue = q->dead_letter_queue(), .auto_ack = true}, d); });
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->body_text(), "fat");
  EXPECT_EQ((*got)->properties().message_id.value_or(""), "id-fat");
  auto h = (*got)->headers();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->find("filler"), nullptr);
  EXPECT_EQ(h->find("not-ours"), nullptr);
  EXPECT_EQ(field_text(*h, "traceparent"), traceparent) << "its trace context is kept with the layer's headers";
  EXPECT_NE(field_text(*h, "x-warren-reason").find("frame_max 4096"), std::string::npos) << field_text(*h, "x-warren-reason");
  EXPECT_EQ(field_text(*h, "x-warren-attempts"), "1");
  EXPECT_EQ(field_text(*h, "x-warren-error"), "it broke");
  EXPECT_EQ(field_text(*h, "x-warren-exit-status"), "3");
  EXPECT_EQ(field_text(*h, "x-warren-original-routing-key"), q->queue());
  EXPECT_EQ(depth(q->queue()), 0u);
  EXPECT_EQ(outcomes.size(), 1u);  // tried once, not requeued again and again
  close(*small);
  drop_work_queue(*q);
}

// The broker's version comes from connection.start's server-properties: the same as
// rabbitmqctl reports, and on this machine RabbitMQ 3.10 (shared/reference/broker/BROKER.md).
TEST_P(MessagingBroker, the_broker_version_is_read_from_server_properties) {
  const auto version = conn->broker_version();
  ASSERT_TRUE(version.has_value());
  const auto ctl = rabbitmqctl("version");
  const auto expected = client::parse_broker_version(ctl);
  ASSERT_TRUE(expected.has_value()) << ctl;
  EXPECT_EQ(*version, *expected) << ctl;
  EXPECT_EQ(version->major, 3u);
  EXPECT_EQ(version->minor, 10u);
  const auto* product = conn->server_properties().find("product");
  ASSERT_NE(product, nullptr);
  EXPECT_EQ(std::get<std::string>(product->value), "RabbitMQ");
  EXPECT_EQ(layer()->broker_version(), version);
}

// A connection that says it is RabbitMQ 4.1 (where a quorum queue counts every return, a
// release's nack included, and dead-letters at 20): a message the broker counted 10 returns
// for is released as a fresh copy, so the count starts again and the attempt is unchanged.
// On the real 3.10 underneath, the count is visible as x-delivery-count.
class Claims41 final : public ChannelSource {
 public:
  explicit Claims41(std::shared_ptr<client::Connection> c) : c_(std::move(c)) {}
  void open_channel(client::Callback<client::Channel> done) override { c_->open_channel(std::move(done)); }
  [[nodiscard]] bool is_open() const override { return c_->is_open(); }
  [[nodiscard]] std::uint32_t frame_max_bytes() const override { return c_->frame_max_bytes(); }
  [[nodiscard]] client::Driver& driver() const override { return c_->driver(); }
  [[nodiscard]] std::optional<client::BrokerVersion> broker_version() const override { return client::BrokerVersion{4, 1, 0}; }

 private:
  std::shared_ptr<client::Connection> c_;
};

TEST_P(MessagingBroker, on_4_0_to_4_2_a_much_returned_release_goes_back_as_a_fresh_copy) {
  auto m = Messaging::create(std::make_unique<Claims41>(conn), {.prefix = prefix});
  ASSERT_TRUE(m.ok());
  auto q = work(*m, {.name = "released"});
  put(q, "again", "id-again");
  std::vector<std::string> seen;  // x-delivery-count (0: none) and attempt of each delivery
  bool finished = false;
  std::shared_ptr<Subscription> worker;
  auto started = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 auto h = item.message().headers();
                 const auto count = h.ok() && h->find("x-delivery-count") ? field_text(*h, "x-delivery-count") : "0";
                 seen.push_back(count + "/" + std::to_string(item.attempt()));
                 if (seen.size() == 13) {
                   finished = true;
                   return (void)item.done();
                 }
                 EXPECT_TRUE(item.release().ok());
               },
               d);
  });
  ASSERT_TRUE(started.ok()) << started.error().to_string();
  worker = *started;
  ASSERT_TRUE(loop.run_until([&] { return finished; }, 20s));
  EXPECT_EQ(seen, (std::vector<std::string>{"0/1", "1/1", "2/1", "3/1", "4/1", "5/1", "6/1", "7/1", "8/1", "9/1", "10/1",
                                            "0/1", "1/1"}));
  EXPECT_EQ(depth(q->queue()), 0u);
  drop_work_queue(*q);
}

TEST_P(MessagingBroker, a_workers_unacked_message_is_redelivered_after_its_connection_dies) {
  auto doomed = connect();
  auto dying = layer(doomed);
  auto q_dying = work(dying, {.name = "crash"});
  put(q_dying, "survive", "id-crash");
  bool held = false;
  std::optional<WorkItem> kept;
  auto w1 = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q_dying->consume({.prefetch = 1}, [&](WorkItem item) { held = true; kept.emplace(std::move(item)); }, d);
  });
  ASSERT_TRUE(w1.ok()) << w1.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return held; }));
  close(*doomed);  // the worker's connection goes with its message unacked
  EXPECT_FALSE(dying->healthy());
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](const Event& e) { return e.what == "connection"; }), 1);

  auto m = layer();
  auto q = work(m, {.name = "crash"});
  std::optional<std::string> again;
  bool redelivered = false;
  auto w2 = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({.prefetch = 1},
               [&](WorkItem item) {
                 again = std::string(item.message_id()) + " attempt=" + std::to_string(item.attempt());
                 redelivered = item.message().redelivered();
                 EXPECT_TRUE(item.done().ok());
               },
               d);
  });
  ASSERT_TRUE(w2.ok()) << w2.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return again.has_value(); }));
  EXPECT_EQ(*again, "id-crash attempt=1");  // a crash is not the message's failure
  EXPECT_TRUE(redelivered);
  drop_work_queue(*q);
}

TEST_P(MessagingBroker, a_406_on_one_channel_leaves_the_layer_working) {
  auto ch = open();
  // Someone else's queue under the same name, with other arguments.
  ASSERT_TRUE(wait<client::QueueDeclared>([&](auto d) { ch.queue_declare({.name = prefix + ".clash", .durable = true}, d); }).ok());
  auto m = layer();
  auto clash = work(m, {.name = "clash"});
  auto r = wait<void>([&](auto d) { clash->declare(d); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().reply_code, 406) << r.error().to_string();
  EXPECT_TRUE(conn->is_open());
  auto fine = work(m, {.name = "fine"});
  put(fine, "after", "id-after");  // on a new control channel
  EXPECT_EQ(depth(fine->queue()), 1u);
  EXPECT_TRUE(m->healthy());
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = prefix + ".clash"}, d); });
  drop_work_queue(*fine);
}

// A subscription dropped while its channel is on its way: the channel, once open, is nobody's
// and is closed (it used to stay open for the life of the connection, one per drop).
TEST_P(MessagingBroker, a_subscription_dropped_while_its_channel_opens_leaves_no_channel_behind) {
  const std::string name = prefix + "-drops";
  client::ClientOptions options;
  options.engine.connection_name = name;
  auto c = connect("", options);
  auto m = layer(c);
  for (int i = 0; i < 3; ++i) {
    auto s = Subscription::start(m,
                                 {.queue = prefix + ".dropped",
                                  .setup = [](const client::Channel&, client::Callback<void> done) { done(Result<void>()); },
                                  .on_delivery = [](const client::Delivery&) {}},
                                 [](Result<void>) {});
    s.reset();  // its channel.open is on the wire
  }
  // A channel of the test's own opened after them: theirs are open (or closing) by its reply.
  auto mine = wait<client::Channel>([&](auto d) { c->open_channel(d); });
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  int channels = -1;
  const bool only_mine = loop.run_until([&] { return (channels = broker_channels_of(name)) == 1; }, 15s);
  EXPECT_TRUE(only_mine) << "the broker counts " << channels << " channels on " << name;
  close(*c);
}

TEST_P(MessagingBroker, an_inbox_receives_what_is_sent_to_its_address) {
  auto m = layer();
  std::vector<std::string> got;
  auto inbox = wait<std::shared_ptr<Inbox>>([&](auto d) {
    open_inbox(m, {}, [&](const client::Delivery& dl) {
      got.push_back(std::string(dl.body_text()) + "/" + std::string(dl.properties().correlation_id.value_or("")));
    }, d);
  });
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  EXPECT_EQ((*inbox)->address().rfind(prefix + ".inbox.", 0), 0u);
  auto sent = wait<void>([&](auto d) { send(m, {.address = (*inbox)->address(), .body = "hi", .correlation_id = "c1"}, d); });
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return got.size() == 1; }));
  EXPECT_EQ(got[0], "hi/c1");
  EXPECT_TRUE(m->healthy());
}

// The layer acks after the callback; a callback that acks the same view itself must not make
// that a double ack (the broker's 406 for an unknown tag closed the channel, the subscription
// resubscribed, and what was in flight came again). The view settles once.
TEST_P(MessagingBroker, an_inbox_callback_that_acks_itself_is_not_acked_twice) {
  auto m = layer();
  std::vector<std::string> got;
  auto inbox = wait<std::shared_ptr<Inbox>>([&](auto d) {
    open_inbox(m, {}, [&](const client::Delivery& dl) {
      got.push_back(std::string(dl.body_text()) + (dl.redelivered() ? "/again" : ""));
      EXPECT_TRUE(dl.ack().ok());
    }, d);
  });
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  std::vector<std::string> sent;
  for (const char* body : {"m1", "m2", "m3"}) {
    sent.emplace_back(body);
    auto r = wait<void>([&](auto d) { send(m, {.address = (*inbox)->address(), .body = body}, d); });
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_TRUE(loop.run_until([&] { return got.size() >= sent.size(); }));
  }
  EXPECT_EQ(got, sent);
  EXPECT_TRUE((*inbox)->healthy());
  for (const auto& e : events) ADD_FAILURE() << e.what << " " << e.subject << ": " << e.cause.to_string();
}

TEST_P(MessagingBroker, a_service_groups_members_compete_for_its_messages) {
  auto m = layer();
  auto other = connect();
  auto m2 = layer(other);
  std::map<int, std::multiset<std::string>> by_member;
  auto member = [&](const std::shared_ptr<Messaging>& l, int n) {
    auto s = wait<std::shared_ptr<Subscription>>([&](auto d) {
      join_group(l, {.address = "billing", .prefetch = 1},
                 [&by_member, n](const client::Delivery& dl) { by_member[n].insert(std::string(dl.body_text())); }, d);
    });
    if (!s) throw std::runtime_error(s.error().to_string());
    return *s;
  };
  auto a = member(m, 1);
  auto b = member(m2, 2);
  for (int i = 0; i < 20; ++i) {
    auto sent = wait<void>([&](auto d) { send(m, {.address = "billing", .body = "m" + std::to_string(i)}, d); });
    ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  }
  ASSERT_TRUE(loop.run_until([&] { return by_member[1].size() + by_member[2].size() == 20; }));
  EXPECT_GT(by_member[1].size(), 0u);
  EXPECT_GT(by_member[2].size(), 0u);
  std::set<std::string> all(by_member[1].begin(), by_member[1].end());
  all.insert(by_member[2].begin(), by_member[2].end());
  EXPECT_EQ(all.size(), 20u);  // each message to one member only
  ASSERT_TRUE(wait<void>([&](auto d) { m2->close(d); }).ok());
  EXPECT_TRUE(other->is_open());
  close(*other);
  auto ch = open();
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = prefix + ".group.billing"}, d); });
}

TEST_P(MessagingBroker, a_send_to_an_address_nobody_listens_on_is_an_error) {
  auto m = layer();
  auto r = wait<void>([&](auto d) { send(m, {.address = "nobody-home", .body = "lost?"}, d); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, make_error_code(errc::unroutable)) << r.error().to_string();
  EXPECT_EQ(r.error().reply_code, 312);
  // The channel survives a return: the next send works as well as it can.
  auto again = wait<void>([&](auto d) { send(m, {.address = "nobody-home", .body = "lost?"}, d); });
  EXPECT_EQ(again.error().code, make_error_code(errc::unroutable));
}

TEST_P(MessagingBroker, a_group_queue_deleted_under_its_member_is_subscribed_again_and_logged_once) {
  auto m = layer();
  std::vector<std::string> got;
  auto s = wait<std::shared_ptr<Subscription>>([&](auto d) {
    join_group(m, {.address = "svc"}, [&](const client::Delivery& dl) { got.emplace_back(dl.body_text()); }, d);
  });
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto ch = open();
  ASSERT_TRUE(wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = prefix + ".group.svc"}, d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return !m->healthy(); }));
  ASSERT_TRUE(loop.run_until([&] { return m->healthy(); }, 15s));
  EXPECT_EQ((*s)->resubscribed(), 1u);
  auto closed = std::count_if(events.begin(), events.end(), [](const Event& e) { return e.what == "consumer.closed"; });
  EXPECT_EQ(closed, 1);
  auto sent = wait<void>([&](auto d) { send(m, {.address = "svc", .body = "back"}, d); });
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return got.size() == 1; }));
  ASSERT_TRUE(wait<void>([&](auto d) { m->close(d); }).ok());
  // close() cancelled the member: the group's queue has no consumer left.
  auto q = wait<client::QueueDeclared>([&](auto d) { ch.queue_declare({.name = prefix + ".group.svc", .passive = true}, d); });
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->consumer_count, 0u);
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = prefix + ".group.svc"}, d); });
}

TEST_P(MessagingBroker, a_user_allowed_only_the_prefix_names_can_use_every_pattern) {
  const std::string user = prefix + "-user";
  rabbitmqctl("add_user " + user + " secret-" + user);
  const std::string names = "'^" + prefix + "\\.'";
  rabbitmqctl("set_permissions " + user + " " + names + " " + names + " " + names);
  auto limited = connect("amqp://" + user + ":secret-" + user + "@127.0.0.1:" + env("RMQ_PORT") + "/%2f");
  auto m = layer(limited);
  auto q = work(m, {.name = "perm", .attempts = 2, .backoff = {.base = 100ms, .max = 100ms}});
  put(q, "p", "id-perm");
  std::vector<std::string> outcomes;
  auto worker = wait<std::shared_ptr<Subscription>>([&](auto d) {
    q->consume({}, [&](WorkItem item) {
      auto shared = std::make_shared<WorkItem>(std::move(item));
      shared->retry({.error = "no"}, [&, shared](Result<Retried> r) {
        outcomes.push_back(r ? (r->dead_lettered ? "dead" : "retry") : r.error().to_string());
      });
    }, d);
  });
  ASSERT_TRUE(worker.ok()) << worker.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return outcomes.size() == 2; }, 15s));
  EXPECT_EQ(outcomes, (std::vector<std::string>{"retry", "dead"}));
  EXPECT_EQ(depth(q->dead_letter_queue()), 1u);
  std::vector<std::string> got;
  auto inbox = wait<std::shared_ptr<Inbox>>([&](auto d) { open_inbox(m, {}, [&](const client::Delivery& dl) { got.emplace_back(dl.body_text()); }, d); });
  ASSERT_TRUE(inbox.ok()) << inbox.error().to_string();
  auto member = wait<std::shared_ptr<Subscription>>([&](auto d) {
    join_group(m, {.address = "perm-svc"}, [&](const client::Delivery& dl) { got.emplace_back(dl.body_text()); }, d);
  });
  ASSERT_TRUE(member.ok()) << member.error().to_string();
  ASSERT_TRUE(wait<void>([&](auto d) { send(m, {.address = (*inbox)->address(), .body = "to-inbox"}, d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { send(m, {.address = "perm-svc", .body = "to-group"}, d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return got.size() == 2; }));
  // The log and the backplane, under the same user.
  auto log = Log::create(m, {.name = "perm-log"});
  ASSERT_TRUE(log.ok()) << log.error().to_string();
  auto offset = wait<std::uint64_t>([&](auto d) { (*log)->append("entry", d); });
  ASSERT_TRUE(offset.ok()) << offset.error().to_string();
  auto page = wait<Page>([&](auto d) { (*log)->read({}, d); });
  ASSERT_TRUE(page.ok()) << page.error().to_string();
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].message.body_text(), "entry");
  auto bp = wait<std::shared_ptr<Backplane>>([&](auto d) {
    Backplane::start(m, {}, [&](std::string_view room, const client::Delivery& dl) {
      got.push_back(std::string(room) + ":" + std::string(dl.body_text()));
    }, d);
  });
  ASSERT_TRUE(bp.ok()) << bp.error().to_string();
  ASSERT_TRUE(wait<void>([&](auto d) { (*bp)->join("lobby", d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { (*bp)->publish("lobby", "hi", d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return got.size() == 3; }));
  EXPECT_EQ(got[2], "lobby:hi");
  EXPECT_TRUE(m->healthy());
  EXPECT_TRUE(limited->is_open());

  // What the four patterns leave on the broker: two exchanges in all; every queue that
  // outlives its connection durable; the group's queue expiring after inbox_ttl; the log's
  // stream without x-max-length-bytes (stream_max_bytes 0).
  std::vector<std::string> exchanges;
  {
    std::istringstream lines(rabbitmqctl("list_exchanges name"));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(prefix + ".", 0) == 0) exchanges.push_back(line);
  }
  EXPECT_EQ(exchanges.size(), 2u) << ::testing::PrintToString(exchanges);
  std::map<std::string, std::string> queues;  // name -> "durable exclusive arguments"
  {
    std::istringstream lines(rabbitmqctl("list_queues name durable exclusive arguments"));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(prefix + ".", 0) == 0) queues[line.substr(0, line.find('\t'))] = line.substr(line.find('\t') + 1);
  }
  ASSERT_TRUE(queues.contains(prefix + ".group.perm-svc")) << ::testing::PrintToString(queues);
  ASSERT_TRUE(queues.contains((*log)->queue())) << ::testing::PrintToString(queues);
  for (const auto& [name, facts] : queues) {
    if (facts.find("\tfalse\t") == std::string::npos) continue;  // exclusive: it dies with its connection
    EXPECT_EQ(facts.rfind("true\t", 0), 0u) << name << " is shared but not durable: " << facts;
  }
  const std::string ttl = "{\"x-expires\"," + std::to_string(m->options().inbox_ttl.count()) + "}";
  EXPECT_NE(queues[prefix + ".group.perm-svc"].find(ttl), std::string::npos) << queues[prefix + ".group.perm-svc"];
  EXPECT_EQ(queues[(*log)->queue()].find("x-max-length-bytes"), std::string::npos) << queues[(*log)->queue()];

  (void)wait<void>([&](auto d) { (*bp)->close(d); });
  close(*limited);
  rabbitmqctl("delete_user " + user);
  drop_work_queue(*q);
  auto ch = open();
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = prefix + ".group.perm-svc"}, d); });
  (void)wait<std::uint32_t>([&](auto d) { ch.queue_delete({.queue = (*log)->queue()}, d); });
}

INSTANTIATE_TEST_SUITE_P(Drivers, MessagingBroker, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

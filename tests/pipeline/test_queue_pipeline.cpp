// The pipeline's queue transport against the real broker, on both drivers: every settlement
// mapping counted on the broker (messages_ready / messages_unacknowledged from rabbitmqctl,
// the dead-letter queue's contents and envelope headers), native DLX, an unroutable
// destination as the record's error, a failed dead-letter publish requeuing the source, a
// drain handing back what never started, and a dead channel's deliveries never settled.
#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "integration/client_fixture.hpp"
#include "warren/pipeline/dead_letter.hpp"
#include "warren/pipeline/queue_pipeline.hpp"
#include "warren/pipeline/status_board.hpp"
#include "warren/pipeline/topology.hpp"

namespace warren::test {
namespace {

using pipeline::Outcome;
using pipeline::QueuePipeline;
using pipeline::QueuePipelineOptions;
using pipeline::Record;
using pipeline::Stage;

struct Counts {
  long ready = -1;
  long unacked = -1;
  friend bool operator==(const Counts&, const Counts&) = default;
};

// messages_ready and messages_unacknowledged of one queue, as the broker counts them.
Counts queue_counts(const std::string& queue) {
  std::istringstream out(rabbitmqctl("list_queues name messages_ready messages_unacknowledged"));
  std::string line;
  Counts c;
  while (std::getline(out, line)) {  // the first line is the column names
    std::istringstream fields(line);
    std::string name;
    long ready = 0, unacked = 0;
    if (fields >> name >> ready >> unacked && name == queue) c = {ready, unacked};
  }
  return c;
}

std::string text_value(const wire::FieldTable& t, std::string_view key) {
  const wire::FieldValue* v = t.find(key);
  if (!v) return "<absent>";
  if (auto s = std::get_if<std::string>(&v->value)) return *s;
  return "<not a string>";
}

// RabbitMQ reads consumer_timeout and its check interval when a channel opens: while this
// lives, channels opened close (406) once a delivery stays unacked 2 s, checked every 0.5 s.
// restore() (or the destructor, on any exit from the test) puts the defaults back; should the
// test die first, the node does it itself 10 s later unless a later guard took over meanwhile
// (its token).
class ShortConsumerTimeout {
 public:
  ShortConsumerTimeout() {
    eval("T = make_ref(), application:set_env(rabbit, warren_test_short_timeout, T), "
         "application:set_env(rabbit, consumer_timeout, 2000), application:set_env(rabbit, channel_tick_interval, 500), "
         "spawn(fun() -> timer:sleep(10000), case application:get_env(rabbit, warren_test_short_timeout) of "
         "{ok, T} -> application:set_env(rabbit, consumer_timeout, 1800000), "
         "application:set_env(rabbit, channel_tick_interval, 60000); _ -> ok end end), ok.");
  }
  ~ShortConsumerTimeout() {
    try {
      restore();
    } catch (...) {  // the node restores it itself
    }
  }
  ShortConsumerTimeout(const ShortConsumerTimeout&) = delete;
  ShortConsumerTimeout& operator=(const ShortConsumerTimeout&) = delete;
  // (Unsetting channel_tick_interval instead would make every new channel crash its connection.)
  void restore() {
    if (std::exchange(restored_, true)) return;
    eval("application:unset_env(rabbit, warren_test_short_timeout), application:set_env(rabbit, consumer_timeout, 1800000), "
         "application:set_env(rabbit, channel_tick_interval, 60000), ok.");
  }

 private:
  static void eval(const std::string& code) {
    const auto out = rabbitmqctl("eval '" + code + "'");
    if (out.find("ok") == std::string::npos) throw std::runtime_error("rabbitmqctl eval: " + out);
  }
  bool restored_ = false;
};

class PipelineSuite : public ClientSuite {
 protected:
  client::Channel ch;
  std::string prefix;

  void SetUp() override {
    ClientSuite::SetUp();
    ch = open();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    prefix = "pipe-" + name + "-";
  }
  void TearDown() override {
    for (const auto& q : declared_) {
      auto c = open();
      (void)wait<std::uint32_t>([&](auto done) { c.queue_delete({.queue = q}, done); });
    }
    ClientSuite::TearDown();
  }
  std::string queue(const std::string& suffix, wire::FieldTable arguments = {}) {
    std::string name = prefix + suffix;
    auto q = wait<client::QueueDeclared>(
        [&](auto done) { ch.queue_declare({.name = name, .arguments = arguments}, done); });
    if (!q) throw std::runtime_error("declare " + name + ": " + q.error().to_string());
    (void)wait<std::uint32_t>([&](auto done) { ch.queue_purge({.queue = name}, done); });
    declared_.push_back(name);
    return name;
  }
  void put(const std::string& q, std::string_view body, client::Properties props = {}) {
    ASSERT_EQ(confirm_publish(ch, {.routing_key = q, .properties = props}, text(body)), "confirmed");
  }
  void confirm_mode() { ASSERT_TRUE(wait<void>([&](auto done) { ch.confirm_select(done); })); }
  std::optional<std::optional<std::string>> stopped;  // what on_stopped said, once it did
  std::shared_ptr<QueuePipeline> start(QueuePipelineOptions o, std::vector<Stage> stages) {
    o.on_stopped = [this](const std::optional<std::string>& why) { stopped = why; };
    std::optional<Result<void>> ready;
    auto p = QueuePipeline::start(conn, std::move(o), std::move(stages), [&](Result<void> r) { ready.emplace(r); });
    if (!loop.run_until([&] { return ready.has_value(); })) throw std::runtime_error("pipeline start timed out");
    if (!*ready) throw std::runtime_error("pipeline start: " + ready->error().to_string());
    return p;
  }
  // Waits until the broker counts `expected` for the queue (its counters settle shortly after).
  Counts counts_become(const std::string& q, Counts expected) {
    Counts c;
    for (int i = 0; i < 8; ++i) {  // rabbitmqctl takes a second or two per call
      loop.run_until([] { return false; }, std::chrono::milliseconds(i ? 300 : 20));
      c = queue_counts(q);
      if (c == expected) break;
    }
    return c;
  }
  std::optional<client::Message> get(const std::string& q) {
    auto m = wait<std::optional<client::Message>>([&](auto done) { ch.get({.queue = q, .auto_ack = true}, done); });
    if (!m) throw std::runtime_error("get: " + m.error().to_string());
    return std::move(*m);
  }
  bool settled(const QueuePipeline& p, std::uint64_t n) {
    auto s = p.status();
    return s.completed + s.skipped + s.dead_lettered + s.failed + s.dropped >= n && s.in_flight == 0;
  }

 private:
  std::vector<std::string> declared_;
};

TEST_P(PipelineSuite, NegotiatedFrameMaxIsVisibleOnTheConnection) {
  EXPECT_EQ(conn->frame_max_bytes(), 131072u);  // the broker's proposal, taken as it is
}

TEST_P(PipelineSuite, CompletedAndSkippedAreAckedAndTheDestinationKeepsTypedHeaders) {
  const auto src = queue("src"), out = queue("out");
  confirm_mode();
  for (int i = 0; i < 10; ++i) {
    wire::FieldTable h{{"n", std::int32_t{i}}, {"big", std::int64_t{1} << 40}, {"flag", true},
                       {"at", wire::Timestamp{1700000000}}, {"nested", wire::FieldTable{{"k", "v"}}}};
    put(src, "m" + std::to_string(i),
        {.content_type = "text/plain", .headers = h, .delivery_mode = client::persistent, .message_id = "id" + std::to_string(i)});
  }
  auto metrics = std::make_shared<client::Metrics>();
  auto p = start({.core = {.name = "pass", .concurrency = 4},
                  .source = {.queue = src},
                  .destination = pipeline::DestinationOptions{.exchange = "", .routing_key = out},
                  .metrics = metrics},
                 {Stage::sync([](Record& r) {
                   const auto n = std::get<std::int32_t>(r.headers.find("n")->value);
                   if (n % 2) return pipeline::Verdict::skip;
                   r.body += "!";
                   return pipeline::Verdict::next;
                 })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 10); }));
  auto s = p->status();
  EXPECT_EQ(s.completed, 5u);
  EXPECT_EQ(s.skipped, 5u);
  // Counted by outcome too (issue 24, metrics).
  const auto snap = metrics->snapshot();
  EXPECT_EQ(snap.total("warren.pipeline.records", {{"pipeline", "pass"}, {"outcome", "completed"}}), 5);
  EXPECT_EQ(snap.total("warren.pipeline.records", {{"pipeline", "pass"}, {"outcome", "skipped"}}), 5);
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
  EXPECT_EQ(counts_become(out, {5, 0}), (Counts{5, 0}));
  auto m = get(out);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body_text(), "m0!");
  EXPECT_EQ(m->properties().content_type.value_or(""), "text/plain");
  EXPECT_EQ(m->properties().message_id.value_or(""), "id0");
  EXPECT_EQ(m->properties().delivery_mode.value_or(0), client::persistent);
  auto h = m->headers();
  ASSERT_TRUE(h);
  EXPECT_EQ(*h->find("n"), wire::FieldValue(std::int32_t{0}));
  EXPECT_EQ(*h->find("big"), wire::FieldValue(std::int64_t{1} << 40));
  EXPECT_EQ(*h->find("flag"), wire::FieldValue(true));
  EXPECT_EQ(*h->find("at"), wire::FieldValue(wire::Timestamp{1700000000}));
  EXPECT_EQ(*h->find("nested"), wire::FieldValue(wire::FieldTable{{"k", "v"}}));
}

TEST_P(PipelineSuite, DeadLetteredIsPublishedWithItsEnvelopeThenAcked) {
  const auto src = queue("src"), dlq = queue("dlq");
  confirm_mode();
  wire::FieldTable h{{"tenant", std::int32_t{7}}};
  put(src, "short", {.headers = h});
  put(src, "long", {.headers = h});
  auto p = start({.core = {.name = "billing"},
                  .source = {.queue = src},
                  .dead_letter = pipeline::DeadLetterOptions{.exchange = "", .routing_key = dlq}},
                 {Stage::sync([](Record& r) {
                   if (r.body == "short") throw std::runtime_error("bad amount");
                   throw std::length_error(std::string(300000, 'e'));  // far over one frame
                 })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 2); }));
  EXPECT_EQ(p->status().dead_lettered, 2u);
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
  EXPECT_EQ(counts_become(dlq, {2, 0}), (Counts{2, 0}));
  for (int i = 0; i < 2; ++i) {
    auto m = get(dlq);
    ASSERT_TRUE(m);
    auto e = m->headers();
    ASSERT_TRUE(e);
    EXPECT_EQ(*e->find("tenant"), wire::FieldValue(std::int32_t{7}));
    EXPECT_EQ(text_value(*e, pipeline::envelope::original_exchange), "");
    EXPECT_EQ(text_value(*e, pipeline::envelope::original_routing_key), src);
    EXPECT_EQ(text_value(*e, pipeline::envelope::pipeline), "billing");
    EXPECT_EQ(*e->find(pipeline::envelope::attempt), wire::FieldValue(std::int64_t{1}));
    ASSERT_NE(e->find(pipeline::envelope::failed_at), nullptr);
    if (m->body_text() == "short") {
      EXPECT_EQ(text_value(*e, pipeline::envelope::error_type), "std::runtime_error");
      EXPECT_EQ(text_value(*e, pipeline::envelope::error_message), "bad amount");
    } else {
      EXPECT_EQ(m->body_text(), "long");
      EXPECT_EQ(text_value(*e, pipeline::envelope::error_type), "std::length_error");
      const auto cut = text_value(*e, pipeline::envelope::error_message);
      EXPECT_LT(cut.size(), 131072u);
      EXPECT_GT(cut.size(), 100000u);
      EXPECT_TRUE(cut.ends_with("..."));
    }
  }
}

// A source message with a per-message TTL: its dead-letter copy must not carry it, or the
// record expires in the dead-letter queue (lost, though the source was acked).
TEST_P(PipelineSuite, ADeadLetteredRecordDoesNotInheritItsSourcesTimeToLive) {
  const auto src = queue("src"), dlq = queue("dlq");
  confirm_mode();
  put(src, "perishable", {.expiration = "1500"});
  auto p = start({.core = {.name = "ttl"},
                  .source = {.queue = src},
                  .dead_letter = pipeline::DeadLetterOptions{.exchange = "", .routing_key = dlq}},
                 {Stage::sync([](Record&) { throw std::runtime_error("always"); })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 1); }));
  EXPECT_EQ(p->status().dead_lettered, 1u);
  loop.run_until([] { return false; }, std::chrono::milliseconds(2500));  // past the source's TTL
  EXPECT_EQ(counts_become(dlq, {1, 0}), (Counts{1, 0}));
  auto m = get(dlq);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->properties().expiration.has_value());
  auto e = m->headers();
  ASSERT_TRUE(e);
  EXPECT_EQ(text_value(*e, pipeline::envelope::original_expiration), "1500");
}

TEST_P(PipelineSuite, NativeDeadLetteringNacksWithoutRequeueToTheQueuesDlx) {
  const auto dlq = queue("dlq");
  const auto src = queue("src", {{"x-dead-letter-exchange", ""}, {"x-dead-letter-routing-key", dlq}});
  confirm_mode();
  put(src, "bad");
  put(src, "good");
  auto p = start({.source = {.queue = src}, .native_dead_letter = true}, {Stage::sync([](Record& r) {
                   if (r.body == "bad") throw std::runtime_error("no");
                 })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 2); }));
  EXPECT_EQ(p->status().dead_lettered, 1u);
  EXPECT_EQ(p->status().completed, 1u);
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
  EXPECT_EQ(counts_become(dlq, {1, 0}), (Counts{1, 0}));
  auto m = get(dlq);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body_text(), "bad");
  auto h = m->headers();
  ASSERT_TRUE(h);
  EXPECT_NE(h->find("x-death"), nullptr) << "the broker's own dead-lettering";
}

TEST_P(PipelineSuite, ARequeuedFailureCanBeRejectedInstead) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "a");
  put(src, "b");
  auto p = start({.core = {.on_error = [](const Record&, const pipeline::RecordError&) { return Outcome::requeued; }},
                  .source = {.queue = src},
                  .on_requeued = pipeline::FailureSettle::reject},
                 {Stage::sync([](Record&) { throw std::runtime_error("no"); })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 2); }));
  EXPECT_EQ(p->status().failed, 2u);
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));  // rejected without requeue: gone
}

TEST_P(PipelineSuite, StopRequeuesTheRecordAndDrains) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "poison");
  auto p = start({.core = {.on_error = [](const Record&, const pipeline::RecordError&) { return Outcome::stop; }},
                  .source = {.queue = src}},
                 {Stage::sync([](Record&) { throw std::runtime_error("stop here"); })});
  ASSERT_TRUE(loop.run_until([&] { return stopped.has_value(); }));
  ASSERT_TRUE(stopped->has_value());
  EXPECT_EQ(**stopped, "stop: std::runtime_error: stop here");
  EXPECT_EQ(p->status().state, pipeline::State::stopped);
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));  // nacked with requeue: back in the queue
}

TEST_P(PipelineSuite, RethrowEndsThePipelineWithTheErrorAndRequeues) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "x");
  auto p = start({.core = {.on_error = [](const Record&, const pipeline::RecordError&) { return Outcome::rethrow; }},
                  .source = {.queue = src}},
                 {Stage::sync([](Record&) { throw std::logic_error("bug"); })});
  ASSERT_TRUE(loop.run_until([&] { return stopped.has_value(); }));
  EXPECT_EQ(stopped->value_or(""), "rethrow: std::logic_error: bug");
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));
}

TEST_P(PipelineSuite, AnUnroutableDestinationIsTheRecordsError) {
  const auto src = queue("src"), dlq = queue("dlq");
  const std::string nowhere = prefix + "nowhere";
  ASSERT_TRUE(wait<void>([&](auto done) { ch.exchange_declare({.name = nowhere, .auto_delete = false}, done); }));
  confirm_mode();
  put(src, "lost?");
  auto p = start({.source = {.queue = src},
                  .destination = pipeline::DestinationOptions{.exchange = nowhere, .routing_key = "none"},
                  .dead_letter = pipeline::DeadLetterOptions{.routing_key = dlq}},
                 {});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 1); }));
  EXPECT_EQ(p->status().completed, 0u);
  EXPECT_EQ(p->status().dead_lettered, 1u);
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
  auto m = get(dlq);
  ASSERT_TRUE(m);
  auto e = m->headers();
  ASSERT_TRUE(e);
  EXPECT_EQ(text_value(*e, pipeline::envelope::error_type), "warren::publish");
  EXPECT_NE(text_value(*e, pipeline::envelope::error_message).find("312"), std::string::npos)
      << text_value(*e, pipeline::envelope::error_message);
  (void)wait<void>([&](auto done) { ch.exchange_delete({.name = nowhere}, done); });
}

TEST_P(PipelineSuite, AFailedDeadLetterPublishRequeuesTheSource) {
  const auto src = queue("src");
  const std::string nowhere = prefix + "dlx-nowhere";  // an exchange no queue is bound to
  ASSERT_TRUE(wait<void>([&](auto done) { ch.exchange_declare({.name = nowhere}, done); }));
  confirm_mode();
  put(src, "keep me");
  auto p = start({.source = {.queue = src}, .dead_letter = pipeline::DeadLetterOptions{.exchange = nowhere}},
                 {Stage::sync([](Record&) { throw std::runtime_error("fails"); })});
  // The record comes back and fails again; after the first failed dead-letter, drain.
  ASSERT_TRUE(loop.run_until([&] { return p->status().failed >= 1; }));
  p->drain(std::chrono::seconds(5), nullptr);
  ASSERT_TRUE(loop.run_until([&] { return stopped.has_value(); }));
  EXPECT_EQ(p->status().dead_lettered, 0u);
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));  // requeued, never acked
  (void)wait<void>([&](auto done) { ch.exchange_delete({.name = nowhere}, done); });
}

TEST_P(PipelineSuite, DrainRequeuesWhatNeverStartedAndFinishesWhatIsInFlight) {
  const auto src = queue("src"), out = queue("out");
  confirm_mode();
  for (int i = 0; i < 5; ++i) put(src, std::to_string(i));
  std::vector<pipeline::StageDone> held;
  auto p = start({.core = {.concurrency = 1},
                  .source = {.queue = src, .prefetch = 5},
                  .destination = pipeline::DestinationOptions{.routing_key = out}},
                 {Stage::async([&](Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })});
  ASSERT_TRUE(loop.run_until([&] { return p->status().in_flight == 5; }));
  ASSERT_EQ(held.size(), 1u);
  bool drained = false;
  // A deadline well past the counts' polling below (rabbitmqctl takes seconds on a busy
  // machine): the held record must still be in flight, not given up on, when it ends.
  p->drain(std::chrono::seconds(60), [&](Result<void>) { drained = true; });
  EXPECT_EQ(p->status().state, pipeline::State::draining);
  EXPECT_EQ(p->status().in_flight, 1u);  // the four that never started went back at once
  EXPECT_EQ(counts_become(src, {4, 1}), (Counts{4, 1}));
  held[0]({});
  ASSERT_TRUE(loop.run_until([&] { return drained; }));
  EXPECT_EQ(p->status().state, pipeline::State::stopped);
  EXPECT_EQ(p->status().completed, 1u);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(counts_become(src, {4, 0}), (Counts{4, 0}));
  EXPECT_EQ(counts_become(out, {1, 0}), (Counts{1, 0}));
}

// The broker closes the source channel alone (406, its consumer timeout) under a held record,
// and the connection stays up: a new channel on it takes the redelivered message (its number
// and delivery tag may well be the dead channel's), and the held record's end settles nothing
// there.
TEST_P(PipelineSuite, ADeadChannelsDeliveryIsNeverSettledOnAnother) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "held");
  std::vector<pipeline::StageDone> held;
  ShortConsumerTimeout short_timeout;  // for the pipeline's channels
  auto p = start({.source = {.queue = src}},
                 {Stage::async([&](Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })});
  ASSERT_TRUE(loop.run_until([&] { return held.size() == 1; }));
  ASSERT_TRUE(loop.run_until([&] { return stopped.has_value(); }, std::chrono::seconds(8)))
      << "state " << pipeline::to_string(p->status().state);
  short_timeout.restore();  // before the next channel opens
  ASSERT_TRUE(stopped->has_value());
  EXPECT_NE((*stopped)->find("406"), std::string::npos) << **stopped;
  ASSERT_TRUE(conn->is_open()) << "only the source channel was lost";
  // Another channel of the same connection takes the message the broker requeued.
  auto other = open();
  std::vector<client::Message> taken;
  auto sub = wait<client::Consumer>([&](auto done) {
    other.consume({.queue = src, .prefetch = 1}, [&](const client::Delivery& d) { taken.push_back(d.take()); }, done);
  });
  ASSERT_TRUE(sub) << sub.error().to_string();
  ASSERT_TRUE(loop.run_until([&] { return taken.size() == 1; }));
  EXPECT_EQ(taken[0].body_text(), "held");
  held[0]({});  // the dead channel's record ends now: nothing may be acked for it
  loop.run_until([] { return false; }, std::chrono::milliseconds(200));
  EXPECT_EQ(p->status().dropped, 1u);
  EXPECT_EQ(p->status().completed, 0u);
  EXPECT_EQ(counts_become(src, {0, 1}), (Counts{0, 1}));  // still unacked on the new channel
  EXPECT_TRUE(other.is_open());
  EXPECT_TRUE(taken[0].ack());
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
}

// The slow-delivery report comes before the broker's own consumer timeout closes the channel
// (here 2 s, checked every 0.5 s, for the pipeline's channels only).
TEST_P(PipelineSuite, ASlowDeliveryIsReportedBeforeTheBrokersConsumerTimeoutCutsItOff) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "slow");
  std::vector<pipeline::StageDone> held;
  std::optional<engine::Instant> reported_at, stopped_at;
  ShortConsumerTimeout short_timeout;  // for the pipeline's channels
  auto p = start({.source = {.queue = src},
                  .slow_delivery_warning = std::chrono::milliseconds(1000),
                  .on_slow_delivery = [&](std::uint64_t, engine::Duration) { reported_at = conn->driver().now(); }},
                 {Stage::async([&](Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })});
  ASSERT_TRUE(loop.run_until([&] { return held.size() == 1; }));
  ASSERT_TRUE(loop.run_until([&] {
    if (stopped && !stopped_at) stopped_at = conn->driver().now();
    return stopped_at.has_value();
  }, std::chrono::seconds(8)));
  short_timeout.restore();
  ASSERT_TRUE(reported_at.has_value()) << "the broker cut the channel off first";
  EXPECT_LT(*reported_at, *stopped_at);
  ASSERT_TRUE(stopped->has_value());
  EXPECT_NE((*stopped)->find("406"), std::string::npos) << **stopped;
  EXPECT_EQ(p->status().slow, 1u);
  held[0]({});
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));
}

// A drain whose connection is lost under a held record still ends, on a loop run the way a
// program's main runs it (until nothing is left): on libuv the drain's own timer must keep the
// loop alive until it sees the source channel gone, or `done` never runs.
TEST_P(PipelineSuite, ADrainEndsWhenItsConnectionIsLostWithNothingElseKeepingTheLoopAlive) {
  const std::string name = prefix + "victim";  // the broker picks this connection out by name
  client::ClientOptions named;
  named.engine.connection_name = name;
  auto victim = connect("", named);
  const auto src = queue("src");
  confirm_mode();
  put(src, "held");
  std::vector<pipeline::StageDone> held;
  std::optional<Result<void>> ready;
  auto p = QueuePipeline::start(victim, {.source = {.queue = src}},
                                {Stage::async([&](Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })},
                                [&](Result<void> r) { ready.emplace(r); });
  ASSERT_TRUE(loop.run_until([&] { return ready.has_value() && held.size() == 1; }));
  ASSERT_TRUE(*ready);
  bool drained = false;
  p->drain(std::chrono::seconds(30), [&](Result<void>) { drained = true; });
  EXPECT_FALSE(drained);  // the held record is still in flight
  close(*conn);  // the test's own connection: nothing but the victim is left on the loop
  ASSERT_EQ(close_connections_named(name, "test"), 1);
  const auto began = std::chrono::steady_clock::now();
  loop.run_to_completion();
  EXPECT_TRUE(drained) << "the loop ran out before the drain ended";
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
  EXPECT_EQ(p->status().state, pipeline::State::stopped);
  EXPECT_EQ(p->status().dropped, 1u);
  held[0]({});
  EXPECT_EQ(p->status().completed, 0u);
  conn = connect();  // for the queue's deletion
  ch = open();
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));  // the broker requeued it
}

TEST_P(PipelineSuite, VerifyNamesEveryMissingOrMismatchedObjectAndKeepsTheConnection) {
  const auto existing = queue("existing");  // no arguments
  const std::string gone_exchange = prefix + "no-exchange", gone_queue = prefix + "no-queue";
  pipeline::Topology t{.exchanges = {{.name = gone_exchange, .type = "topic"}},
                       .queues = {{.name = gone_queue},
                                  {.name = existing, .durable = false, .arguments = {{"x-max-length", 10}}}}};
  auto r = wait<void>([&](auto done) { pipeline::verify_topology(conn, t, {}, done); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(errc::not_found));
  const std::string text = r.error().to_string();
  EXPECT_NE(text.find("missing exchange '" + gone_exchange + "', queue '" + gone_queue + "'"), std::string::npos) << text;
  EXPECT_NE(text.find("mismatched queue '" + existing + "' (precondition failed (406)"), std::string::npos) << text;
  EXPECT_NE(text.find("x-max-length"), std::string::npos) << text;
  EXPECT_TRUE(conn->is_open());
  EXPECT_TRUE(ch.is_open());
  // The checks created nothing.
  auto probe = open();
  auto q = wait<client::QueueDeclared>([&](auto done) { probe.queue_declare({.name = gone_queue, .passive = true}, done); });
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().reply_code, 404);
}

// A passive declare cannot see a queue's x-dead-letter-exchange; the redeclare on throwaway
// channels reads it from the 406, past what RabbitMQ compares before it (durable, x-expires,
// x-message-ttl), and after it (a matching DLX, then x-dead-letter-routing-key).
TEST_P(PipelineSuite, TheQueuesDeadLetterExchangeIsFoundWithoutClosingTheConnection) {
  const auto none = queue("none", {{"x-max-length", 5}});
  const auto plain = queue("plain", {{"x-dead-letter-exchange", "dlx1"}});
  const auto ttl = queue("ttl", {{"x-expires", 3600000}, {"x-message-ttl", std::int64_t{60000}},
                                 {"x-dead-letter-exchange", ""}, {"x-dead-letter-routing-key", "dead"}});
  const std::string transient = prefix + "transient";
  ASSERT_TRUE(wait<client::QueueDeclared>([&](auto done) {
    ch.queue_declare({.name = transient, .durable = false, .auto_delete = true, .arguments = {{"x-dead-letter-exchange", "dlx2"}}}, done);
  }));
  auto find = [&](const std::string& q, const std::string& expected) {
    return wait<std::optional<std::string>>(
        [&](auto done) { pipeline::find_dead_letter_exchange(conn, q, expected, done); });
  };
  auto r = find(none, "");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, std::nullopt);
  r = find(plain, "probe");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, std::optional<std::string>("dlx1"));
  r = find(plain, "dlx1");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, std::optional<std::string>("dlx1"));
  r = find(ttl, "");  // x-expires, x-message-ttl, then a matching DLX and its routing key
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, std::optional<std::string>(""));
  r = find(transient, "probe");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, std::optional<std::string>("dlx2"));
  EXPECT_TRUE(conn->is_open());
  EXPECT_TRUE(ch.is_open());
  // Nothing changed: the queue without a DLX still declares as it was.
  EXPECT_TRUE(wait<client::QueueDeclared>([&](auto done) { ch.queue_declare({.name = none, .arguments = {{"x-max-length", 5}}}, done); }));
  (void)wait<std::uint32_t>([&](auto done) { ch.queue_delete({.queue = transient}, done); });
}

TEST_P(PipelineSuite, DeclareBuildsTheTopologyAndVerifyThenPasses) {
  const std::string ex = prefix + "ex", q = prefix + "q", dlq = prefix + "dlq";
  pipeline::Topology t{
      .exchanges = {{.name = ex, .type = "topic", .durable = false}},
      .queues = {{.name = dlq, .durable = false},
                 {.name = q, .durable = false, .arguments = {{"x-dead-letter-exchange", ""}, {"x-dead-letter-routing-key", dlq}}}},
      .bindings = {{.queue = q, .exchange = ex, .routing_key = "orders.#"}}};
  auto declared = wait<void>([&](auto done) { pipeline::declare_topology(conn, t, done); });
  ASSERT_TRUE(declared) << declared.error().to_string();
  auto verified = wait<void>([&](auto done) { pipeline::verify_topology(conn, t, {}, done); });
  EXPECT_TRUE(verified) << verified.error().to_string();
  confirm_mode();
  EXPECT_EQ(confirm_publish(ch, {.exchange = ex, .routing_key = "orders.eu", .mandatory = true}, text("routed")), "confirmed");
  EXPECT_EQ(counts_become(q, {1, 0}), (Counts{1, 0}));
  for (const auto& name : {q, dlq}) (void)wait<std::uint32_t>([&](auto done) { ch.queue_delete({.queue = name}, done); });
  (void)wait<void>([&](auto done) { ch.exchange_delete({.name = ex}, done); });
}

TEST_P(PipelineSuite, ADeliveryHeldTooLongIsReportedBeforeTheConsumerTimeout) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "slow");
  std::vector<pipeline::StageDone> held;
  std::vector<std::uint64_t> reported;
  auto p = start({.source = {.queue = src},
                  .slow_delivery_warning = std::chrono::milliseconds(300),
                  .on_slow_delivery = [&](std::uint64_t tag, engine::Duration held_for) {
                    EXPECT_GE(held_for, std::chrono::milliseconds(300));
                    reported.push_back(tag);
                  }},
                 {Stage::async([&](Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })});
  ASSERT_TRUE(loop.run_until([&] { return held.size() == 1; }));
  EXPECT_TRUE(reported.empty());
  ASSERT_TRUE(loop.run_until([&] { return !reported.empty(); }, std::chrono::seconds(3)));
  loop.run_until([] { return false; }, std::chrono::milliseconds(500));
  EXPECT_EQ(reported.size(), 1u) << "reported once";
  EXPECT_EQ(p->status().slow, 1u);
  held[0]({});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 1); }));
  EXPECT_EQ(counts_become(src, {0, 0}), (Counts{0, 0}));
}

TEST_P(PipelineSuite, WorkersOfOnePipelineSeeEachOthersStatusAndForgetTheSilent) {
  auto other_conn = connect();
  const std::string q = prefix + "leased";
  pipeline::Status a{.pipeline = "board", .queue = q, .state = pipeline::State::running, .completed = 3};
  pipeline::Status b{.pipeline = "board", .queue = q, .state = pipeline::State::draining, .in_flight = 2};
  pipeline::Status elsewhere{.pipeline = "board", .queue = q + "-other", .state = pipeline::State::running};
  auto start_board = [&](std::shared_ptr<client::Connection> c, std::string worker, pipeline::Status* s) {
    auto r = std::make_shared<std::optional<Result<void>>>();
    auto board = pipeline::StatusBoard::start(c, {.worker = std::move(worker), .interval = std::chrono::milliseconds(100)},
                                              [s] { return *s; }, [r](Result<void> x) { r->emplace(x); });
    EXPECT_TRUE(loop.run_until([&] { return r->has_value(); }));
    EXPECT_TRUE(r->has_value() && r->value().ok());
    return board;
  };
  auto board_a = start_board(conn, "a", &a);
  auto board_b = start_board(other_conn, "b", &b);
  auto board_c = start_board(other_conn, "c", &elsewhere);  // another queue: another pipeline
  ASSERT_TRUE(loop.run_until([&] { return board_a->workers().size() == 2 && board_b->workers().size() == 2; }));
  auto seen = board_a->workers();
  EXPECT_EQ(seen[0].worker, "a");
  EXPECT_EQ(seen[1].worker, "b");
  EXPECT_EQ(seen[1].status.queue, q);
  EXPECT_EQ(seen[1].status.state, pipeline::State::draining);
  EXPECT_EQ(seen[1].status.in_flight, 2u);
  EXPECT_EQ(board_b->workers()[0].status.completed, 3u);
  EXPECT_EQ(board_c->workers().size(), 1u);
  // b stops: its last report says so; then it falls silent and is forgotten.
  b.state = pipeline::State::stopped;
  board_b->stop();
  ASSERT_TRUE(loop.run_until([&] {
    auto w = board_a->workers();
    return w.size() == 2 && w[1].status.state == pipeline::State::stopped;
  }));
  ASSERT_TRUE(loop.run_until([&] { return board_a->workers().size() == 1; }, std::chrono::seconds(3)));
  // Forgotten, it is dropped too, not kept for the life of the board.
  ASSERT_TRUE(loop.run_until([&] { return board_a->remembered() == 1; }, std::chrono::seconds(3)))
      << board_a->remembered() << " workers held";
  close(*other_conn);
}

TEST_P(PipelineSuite, ARequeueDelayKeepsAnAlwaysFailingRecordOutOfAHotLoop) {
  const auto src = queue("src");
  confirm_mode();
  put(src, "poison");
  std::vector<std::chrono::steady_clock::time_point> tries;  // when each try ended
  auto p = start({.core = {.on_error = [](const Record&, const pipeline::RecordError&) { return Outcome::requeued; }},
                  .source = {.queue = src},
                  .requeue_delay = std::chrono::milliseconds(250),
                  .on_outcome = [&](const Record&, const pipeline::Finished&) {
                    tries.push_back(std::chrono::steady_clock::now());
                  }},
                 {Stage::sync([](Record&) { throw std::runtime_error("always"); })});
  // One try per 250 ms, not thousands: the third try ends two delays after the first at the
  // soonest. Waited for rather than counted in a fixed window, which a busy machine's slower
  // round trips to the broker can leave with one try.
  ASSERT_TRUE(loop.run_until([&] { return tries.size() >= 3; }));
  EXPECT_GE(tries[2] - tries[0], 2 * std::chrono::milliseconds(250));
  EXPECT_EQ(queue_counts(src), (Counts{0, 1}));  // held, unacked, while it waits
  bool drained = false;
  p->drain(std::chrono::seconds(5), [&](Result<void>) { drained = true; });
  ASSERT_TRUE(loop.run_until([&] { return drained; }));
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));  // the drain sent the held requeue at once
}

// A dead-letter target that refuses the envelope (unroutable) refuses it again at once: the
// source goes back to the queue after requeue_delay, as any requeued failure does, not in a
// hot loop of command runs and refused publishes.
TEST_P(PipelineSuite, ARefusedDeadLetterRequeuesAfterTheRequeueDelay) {
  const auto src = queue("src");
  const std::string nowhere = prefix + "dlx-nowhere";
  ASSERT_TRUE(wait<void>([&](auto done) { ch.exchange_declare({.name = nowhere}, done); }));
  confirm_mode();
  put(src, "poison");
  std::vector<std::chrono::steady_clock::time_point> tries;  // when each try began
  auto p = start({.source = {.queue = src},
                  .dead_letter = pipeline::DeadLetterOptions{.exchange = nowhere},
                  .requeue_delay = std::chrono::milliseconds(250)},
                 {Stage::sync([&](Record&) {
                   tries.push_back(std::chrono::steady_clock::now());
                   throw std::runtime_error("always");
                 })});
  // One try per 250 ms, not hundreds (as in the test above: waited for, not counted in a window).
  ASSERT_TRUE(loop.run_until([&] { return tries.size() >= 3; }));
  EXPECT_GE(tries[2] - tries[0], 2 * std::chrono::milliseconds(250));
  EXPECT_EQ(p->status().dead_lettered, 0u);
  bool drained = false;
  p->drain(std::chrono::seconds(5), [&](Result<void>) { drained = true; });
  ASSERT_TRUE(loop.run_until([&] { return drained; }));
  EXPECT_EQ(counts_become(src, {1, 0}), (Counts{1, 0}));
  (void)wait<void>([&](auto done) { ch.exchange_delete({.name = nowhere}, done); });
}

// Issue 24, traces: a stage's output is a child of its input's context, not a copy of its
// header: the same trace, a new span (which a stage sees in its record's traceparent), the
// tracestate kept. A record that came without one goes on without one.
TEST_P(PipelineSuite, AStagesOutputCarriesAChildOfItsInputsTraceContext) {
  const auto src = queue("src"), out = queue("out");
  confirm_mode();
  const std::string input = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  put(src, "traced", {.headers = wire::FieldTable{{"traceparent", input}, {"tracestate", "congo=t61rcWkgMzE"}, {"k", "v"}}});
  put(src, "untraced", {});
  std::vector<std::string> seen;  // what each stage saw as its record's traceparent
  auto p = start({.core = {.name = "trace"}, .source = {.queue = src},
                  .destination = pipeline::DestinationOptions{.exchange = "", .routing_key = out}},
                 {Stage::sync([&](Record& r) {
                   const auto* tp = r.headers.find("traceparent");
                   seen.push_back(tp ? std::get<std::string>(tp->value) : "");
                   return pipeline::Verdict::next;
                 })});
  ASSERT_TRUE(loop.run_until([&] { return settled(*p, 2); }));
  ASSERT_EQ(counts_become(out, {2, 0}), (Counts{2, 0}));
  auto traced = get(out);
  ASSERT_TRUE(traced);
  const auto in = client::TraceContext::parse(input).value();
  const auto got = traced->trace();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->trace_id, in.trace_id);
  EXPECT_NE(got->span_id, in.span_id) << "a child, not a copy";
  EXPECT_EQ(got->tracestate, "congo=t61rcWkgMzE");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], got->traceparent()) << "the stage ran in the span its output names as parent";
  EXPECT_EQ(*traced->headers()->find("k"), wire::FieldValue("v"));
  auto untraced = get(out);
  ASSERT_TRUE(untraced);
  EXPECT_EQ(untraced->trace(), std::nullopt);
  EXPECT_EQ(seen[1], "");
}

INSTANTIATE_TEST_SUITE_P(Drivers, PipelineSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

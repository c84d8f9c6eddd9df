// The pipeline's queue source on the fake driver (virtual clock, model broker), for what a real
// broker cannot show deterministically: a record that ends after its source channel died but
// before the drain's 100 ms check noticed is dropped. It must count as dropped only (not also
// as completed), and nothing may be settled or published for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "support/nested_headers.hpp"
#include "warren/pipeline/queue_pipeline.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

// A connection to the model broker on the fake driver.
class PipelineOnTheModelBroker : public ::testing::Test {
 protected:
  void SetUp() override {
    driver.hosts[5001] = FakeDriver::Host::broker;
    driver.broker_configs[5001] = FakeBroker::Config{false, false, &world, 0};
    auto url = client::parse_url("amqp://guest:guest@fake:5001");
    ASSERT_TRUE(url.ok());
    std::optional<Result<void>> connected;
    conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { connected.emplace(r); });
    driver.run();
    ASSERT_TRUE(connected && connected->ok());
  }
  FakeDriver driver;
  BrokerWorld world;
  std::shared_ptr<client::Connection> conn;
};

TEST_F(PipelineOnTheModelBroker, ARecordEndingAfterItsChannelDiedCountsAsDroppedOnly) {
  world.queues["src"];
  world.queues["out"];

  std::vector<pipeline::StageDone> held;
  std::optional<Result<void>> ready;
  std::vector<pipeline::Outcome> outcomes;
  auto p = pipeline::QueuePipeline::start(
      conn,
      {.source = {.queue = "src"},
       .destination = pipeline::DestinationOptions{.routing_key = "out"},
       .on_outcome = [&](const pipeline::Record&, const pipeline::Finished& f) { outcomes.push_back(f.outcome); }},
      {pipeline::Stage::async([&](pipeline::Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })},
      [&](Result<void> r) { ready.emplace(r); });
  driver.run();
  ASSERT_TRUE(ready && ready->ok());
  FakeBroker& broker = driver.last_broker();
  const auto channels = broker.open_channels();
  ASSERT_EQ(channels.size(), 2u);  // the publishing channel, then the source's
  const std::uint16_t source = channels.back();

  world.queues["src"].push_back(BrokerWorld::Message{"one", {}, {}, false});
  world.dispatch();
  driver.run();
  ASSERT_EQ(held.size(), 1u);
  bool drained = false;
  p->drain(30s, [&](Result<void>) { drained = true; });
  driver.run();
  // The broker closes the source channel; no virtual time passes, so the drain's check has
  // not run yet when the record ends.
  broker.close_channel(source, 406, "PRECONDITION_FAILED - delivery acknowledgement on channel timed out");
  driver.run();
  const auto settles_before = broker.settles;
  const auto published_before = broker.published;
  held[0]({});
  driver.run();
  auto s = p->status();
  EXPECT_EQ(s.completed, 0u) << "a record whose delivery could not be acked counted as completed";
  EXPECT_EQ(s.dropped, 1u);
  EXPECT_EQ(broker.settles, settles_before);
  EXPECT_EQ(broker.published, published_before) << "published for a delivery the broker will redeliver";
  EXPECT_EQ(outcomes.size(), 1u);
  driver.advance(100ms);
  driver.run();
  EXPECT_TRUE(drained);
  EXPECT_EQ(p->status().state, pipeline::State::stopped);
  EXPECT_EQ(world.queues["src"].size(), 1u);  // the broker has it again
}

// F10: a drain hands back the records the core never started, named by the core, not
// inferred. A delivery whose headers cannot be decoded is settled outside the core (dead-
// lettered) and is the newest pending one while its envelope's confirm is on its way (held
// here): it used to be taken for a waiting record (requeued while its envelope was published,
// so dead-lettered and delivered again) while a record that really waited was never handed
// back (the drain waited for it until its deadline).
TEST_F(PipelineOnTheModelBroker, ADrainHandsBackWhatTheCoreHeldNotWhatItGuessed) {
  for (const char* q : {"src", "out", "dlq"}) world.queues[q];

  std::vector<pipeline::StageDone> held;
  std::optional<Result<void>> ready;
  auto p = pipeline::QueuePipeline::start(
      conn,
      {.core = {.concurrency = 1},
       .source = {.queue = "src", .prefetch = 5},
       .destination = pipeline::DestinationOptions{.routing_key = "out"},
       .dead_letter = pipeline::DeadLetterOptions{.exchange = "", .routing_key = "dlq"}},
      {pipeline::Stage::async([&](pipeline::Record&, pipeline::StageDone done) { held.push_back(std::move(done)); })},
      [&](Result<void> r) { ready.emplace(r); });
  driver.run();
  ASSERT_TRUE(ready && ready->ok());
  FakeBroker& broker = driver.last_broker();
  broker.hold_confirms(true);

  const std::vector<std::byte> deep = nested_headers(100);  // the decoder stops at 64
  for (const char* body : {"a", "b", "c"}) world.queues["src"].push_back(BrokerWorld::Message{body, {}, {}, false});
  BrokerWorld::Message poison{"poison", {}, {}, false};
  poison.headers = deep;
  world.queues["src"].push_back(std::move(poison));
  world.dispatch();
  driver.run();
  // "a" in the stage, "b" and "c" waiting in the core, "poison" waiting for its envelope's confirm.
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(p->status().in_flight, 4u);
  bool drained = false;
  p->drain(60s, [&](Result<void>) { drained = true; });
  driver.run();
  std::vector<std::string> back;
  for (const auto& m : world.queues["src"]) back.push_back(m.body);
  std::sort(back.begin(), back.end());  // each goes back to the head: order is the model's
  EXPECT_EQ(back, (std::vector<std::string>{"b", "c"})) << "the drain handed back what the core never started";
  held[0]({});
  driver.run();
  broker.hold_confirms(false);  // the output and the envelope are confirmed
  driver.run();
  EXPECT_TRUE(drained) << "the drain waited for a record it lost";
  const auto s = p->status();
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(world.queues["dlq"].size(), 1u) << "the poison was dead-lettered once";
  EXPECT_EQ(world.queues["out"].size(), 1u);
  back.clear();
  for (const auto& m : world.queues["src"]) back.push_back(m.body);
  std::sort(back.begin(), back.end());
  EXPECT_EQ(back, (std::vector<std::string>{"b", "c"}));
  // Each delivery settled on its own: a multiple ack could settle one the pipeline still holds.
  EXPECT_EQ(broker.settles.size(), 4u);
  for (const auto& settle : broker.settles) EXPECT_FALSE(settle.multiple) << settle.method << " " << settle.delivery_tag;
}

// A record the policy dead-letters with nowhere to put it (no dead_letter target, no native
// DLX) is not dropped: it goes back to the queue and counts as failed, not dead-lettered.
TEST_F(PipelineOnTheModelBroker, ADeadLetterWithNoTargetGoesBackToTheQueue) {
  world.queues["src"];
  std::vector<pipeline::Outcome> outcomes;
  std::optional<Result<void>> ready;
  auto p = pipeline::QueuePipeline::start(
      conn,
      {.source = {.queue = "src", .limit = 1},
       .on_outcome = [&](const pipeline::Record&, const pipeline::Finished& f) { outcomes.push_back(f.outcome); }},
      {pipeline::Stage::async([](pipeline::Record&, pipeline::StageDone done) {
        done({.error = pipeline::RecordError{"test", "fails"}});
      })},
      [&](Result<void> r) { ready.emplace(r); });
  driver.run();
  ASSERT_TRUE(ready && ready->ok());
  world.queues["src"].push_back(BrokerWorld::Message{"one", {}, {}, false});
  world.dispatch();
  driver.run();
  ASSERT_EQ(outcomes, (std::vector<pipeline::Outcome>{pipeline::Outcome::dead_lettered}));
  const auto s = p->status();
  EXPECT_EQ(s.dead_lettered, 0u);
  EXPECT_EQ(s.failed, 1u);
  ASSERT_EQ(world.queues["src"].size(), 1u) << "the record was dropped";
  EXPECT_EQ(world.queues["src"].front().body, "one");
  EXPECT_EQ(driver.last_broker().settles,
            (std::vector<FakeBroker::Settle>{{"basic.nack", driver.last_broker().open_channels().back(), 1, true}}));
}

}  // namespace
}  // namespace warren::test

// The pipeline's queue source on the fake driver (virtual clock, model broker), for what a real
// broker cannot show deterministically: a record that ends after its source channel died but
// before the drain's 100 ms check noticed is dropped. It must count as dropped only (not also
// as completed), and nothing may be settled or published for it.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "warren/pipeline/queue_pipeline.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

TEST(PipelineOnTheModelBroker, ARecordEndingAfterItsChannelDiedCountsAsDroppedOnly) {
  FakeDriver driver;
  BrokerWorld world;
  driver.hosts[5001] = FakeDriver::Host::broker;
  driver.broker_configs[5001] = FakeBroker::Config{false, false, &world, 0};
  auto url = client::parse_url("amqp://guest:guest@fake:5001");
  ASSERT_TRUE(url.ok());
  std::optional<Result<void>> connected;
  auto conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) { connected.emplace(r); });
  driver.run();
  ASSERT_TRUE(connected && connected->ok());
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

}  // namespace
}  // namespace warren::test

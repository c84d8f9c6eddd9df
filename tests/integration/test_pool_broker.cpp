// The Pool against the real broker, on both drivers: many concurrent borrows over `size`
// connections (the broker sees no more than that), each doing a confirmed publish in a lease.
#include "client_fixture.hpp"
#include "warren/client/pool.hpp"

namespace warren::test {
namespace {

using PoolSuite = ClientSuite;

TEST_P(PoolSuite, twenty_borrows_share_two_connections_and_each_does_its_work) {
  auto url = client::parse_url("amqp://127.0.0.1:" + env("RMQ_PORT") + "/%2f");
  ASSERT_TRUE(url.ok());
  const std::string queue = temp_queue(open());
  client::PoolOptions options;
  options.size = 2;
  options.client.engine.connection_name = "warren-pool-test";
  int setups = 0;
  options.on_connect = [&](client::Connection&, client::Callback<void> done) {
    ++setups;
    done(Result<void>());
  };
  auto pool = client::Pool::create(loop.driver(), *url, options);

  int confirmed = 0, failed = 0;
  std::size_t most_open = 0;
  for (int i = 0; i < 20; ++i) {
    pool->borrow([&, queue](Result<client::Lease> lease) {
      most_open = std::max(most_open, pool->open());
      if (!lease) {
        ++failed;
        return;
      }
      auto shared = std::make_shared<client::Lease>(std::move(*lease));
      (*shared)->open_channel([&, shared, queue](Result<client::Channel> ch) {
        if (!ch) {
          ++failed;
          return;
        }
        ch->confirm_select([&, shared, queue, ch = *ch](Result<void> r) {
          if (!r) {
            ++failed;
            return;
          }
          ch.publish({.routing_key = queue}, text("pooled"), [&, shared, ch](Result<engine::PublishOutcome> o) {
            (o ? confirmed : failed) += 1;
            ch.close([shared](Result<void>) {
              shared->release();  // the work is done: give it back
            });
          });
        });
      });
    });
  }
  ASSERT_TRUE(loop.run_until([&] { return confirmed + failed == 20; }, 30s));
  EXPECT_EQ(confirmed, 20);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(setups, 2);
  EXPECT_LE(most_open, 2u);
  // The broker's own count of the pool's connections.
  const std::string listing = rabbitmqctl("list_connections client_properties");
  std::size_t seen = 0;
  for (std::size_t at = listing.find("warren-pool-test"); at != std::string::npos;
       at = listing.find("warren-pool-test", at + 1))
    ++seen;
  EXPECT_EQ(seen, 2u) << listing;

  bool closed = false;
  pool->close([&](Result<void>) { closed = true; });
  ASSERT_TRUE(loop.run_until([&] { return closed; }));
  EXPECT_EQ(pool->open(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Drivers, PoolSuite, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

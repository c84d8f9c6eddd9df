// The Pool on the fake driver: lending and reuse, the size bound under concurrent borrows,
// dead connections dropped before their replacements are dialled, on_connect on every new
// connection, failed dials and refused logins failing the borrow, and close.
#include <gtest/gtest.h>

#include "client/fake_driver.hpp"
#include "warren/client/pool.hpp"

namespace warren::test {
namespace {

class PoolTest : public ::testing::Test {
 protected:
  FakeDriver driver;
  client::PoolOptions options;

  std::shared_ptr<client::Pool> make_pool(std::uint16_t port = 5001) {
    auto url = client::parse_url("amqp://guest:guest@fake:" + std::to_string(port));
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    return client::Pool::create(driver, *url, options);
  }

  // Borrows and runs the fake network until the borrow is answered (or nothing is left).
  struct Outcome {
    std::optional<std::string> error;
    client::Lease lease;
    bool answered = false;
  };
  std::shared_ptr<Outcome> borrow(client::Pool& pool) {
    auto out = std::make_shared<Outcome>();
    pool.borrow([out](Result<client::Lease> r) {
      out->answered = true;
      if (!r) out->error = r.error().to_string();
      else out->lease = std::move(*r);
    });
    return out;
  }
};

TEST_F(PoolTest, a_returned_connection_is_lent_again_without_a_new_dial) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto pool = make_pool();
  auto first = borrow(*pool);
  driver.run();
  ASSERT_TRUE(first->answered);
  ASSERT_FALSE(first->error) << *first->error;
  auto* connection = first->lease.connection().get();
  EXPECT_TRUE(connection->is_open());
  first->lease.release();
  EXPECT_EQ(pool->idle(), 1u);

  auto second = borrow(*pool);
  driver.run();
  ASSERT_TRUE(second->answered);
  EXPECT_EQ(second->lease.connection().get(), connection);
  EXPECT_EQ(driver.dials, 1);
}

TEST_F(PoolTest, size_bounds_the_sockets_under_concurrent_borrows) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  options.size = 2;
  auto pool = make_pool();
  std::vector<std::shared_ptr<Outcome>> borrows;
  for (int i = 0; i < 5; ++i) borrows.push_back(borrow(*pool));
  EXPECT_EQ(pool->open(), 2u);
  driver.run();
  EXPECT_EQ(driver.dials, 2);
  EXPECT_EQ(driver.open_connections(), 2u);
  int served = 0;
  for (auto& b : borrows) served += b->answered ? 1 : 0;
  EXPECT_EQ(served, 2);
  EXPECT_EQ(pool->waiting(), 3u);

  // Each lease given back serves the next waiter, in order, with no new socket.
  for (int next = 2; next < 5; ++next) {
    for (auto& b : borrows)
      if (b->lease) {
        b->lease.release();
        break;
      }
    driver.run();
    EXPECT_TRUE(borrows[static_cast<std::size_t>(next)]->answered) << next;
    EXPECT_EQ(driver.dials, 2);
    EXPECT_LE(driver.open_connections(), 2u);
  }
}

TEST_F(PoolTest, a_dead_connection_is_dropped_before_its_replacement_is_dialled) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  options.size = 1;
  auto pool = make_pool();
  auto held = borrow(*pool);
  driver.run();
  ASSERT_TRUE(held->lease);
  auto waiting = borrow(*pool);
  driver.run();
  EXPECT_FALSE(waiting->answered);  // the only slot is lent

  driver.reset_all();  // the broker drops the connection while it is lent
  EXPECT_FALSE(held->lease->is_open());
  // The dead one's slot was freed, and only then was the replacement dialled.
  driver.run();
  EXPECT_EQ(driver.dials, 2);
  EXPECT_EQ(driver.open_connections(), 1u);
  ASSERT_TRUE(waiting->answered);
  ASSERT_FALSE(waiting->error) << *waiting->error;
  EXPECT_TRUE(waiting->lease->is_open());
  EXPECT_NE(waiting->lease.connection(), held->lease.connection());
  held->lease.release();  // a dead connection given back is not kept
  EXPECT_EQ(pool->idle(), 0u);
  EXPECT_EQ(pool->open(), 1u);
}

TEST_F(PoolTest, a_connection_that_fails_while_idle_is_not_lent_again) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  auto pool = make_pool();
  auto first = borrow(*pool);
  driver.run();
  auto old = first->lease.connection();
  first->lease.release();
  driver.reset_all();
  EXPECT_EQ(pool->idle(), 0u);
  EXPECT_EQ(pool->open(), 0u);
  auto second = borrow(*pool);
  driver.run();
  ASSERT_TRUE(second->lease);
  EXPECT_NE(second->lease.connection(), old);
  EXPECT_TRUE(second->lease->is_open());
  EXPECT_EQ(driver.dials, 2);
}

TEST_F(PoolTest, on_connect_runs_on_every_new_connection_and_nothing_is_replayed) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  int setups = 0;
  options.on_connect = [&](client::Connection& c, client::Callback<void> done) {
    ++setups;
    c.open_channel([done](Result<client::Channel> ch) {
      if (!ch) return done(ch.error());
      ch->queue_declare({.name = "work"}, [done](Result<client::QueueDeclared> q) {
        if (!q) return done(q.error());
        done(Result<void>());
      });
    });
  };
  auto pool = make_pool();
  auto b = borrow(*pool);
  driver.run();
  ASSERT_TRUE(b->lease);
  EXPECT_EQ(setups, 1);
  b->lease.release();
  driver.reset_all();
  auto again = borrow(*pool);
  driver.run();
  ASSERT_TRUE(again->lease);
  EXPECT_EQ(setups, 2);  // the hook ran again; the pool itself declared nothing
}

TEST_F(PoolTest, a_failing_on_connect_fails_the_borrow_and_frees_the_slot) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  options.size = 1;
  options.on_connect = [](client::Connection&, client::Callback<void> done) {
    done(make_error(errc::precondition_failed, "setup refused"));
  };
  auto pool = make_pool();
  auto b = borrow(*pool);
  driver.run();
  ASSERT_TRUE(b->answered);
  EXPECT_EQ(b->error.value_or(""), "precondition failed: setup refused");
  EXPECT_EQ(pool->open(), 0u);
}

TEST_F(PoolTest, a_refused_dial_fails_the_borrow) {
  auto pool = make_pool(5999);  // nothing listens there
  auto b = borrow(*pool);
  driver.run();
  ASSERT_TRUE(b->answered);
  EXPECT_EQ(b->error.value_or(""), "connection lost: connect fake:5999: connection refused");
  EXPECT_EQ(pool->open(), 0u);
}

TEST_F(PoolTest, a_refused_login_fails_the_borrow) {
  driver.hosts[5001] = FakeDriver::Host::refuse_login;
  auto pool = make_pool();
  auto b = borrow(*pool);
  driver.run();
  ASSERT_TRUE(b->answered);
  EXPECT_EQ(b->error.value_or("").rfind("access refused (403)", 0), 0u) << b->error.value_or("");
  EXPECT_EQ(pool->open(), 0u);
}

TEST_F(PoolTest, a_dial_into_a_black_hole_fails_at_the_connect_timeout) {
  driver.hosts[5001] = FakeDriver::Host::black_hole;
  options.client.connect_timeout = 2000ms;
  auto pool = make_pool();
  auto b = borrow(*pool);
  driver.advance(1999ms);
  EXPECT_FALSE(b->answered);
  driver.advance(1ms);
  ASSERT_TRUE(b->answered);
  EXPECT_NE(b->error.value_or("").find("no connection within 2000 ms"), std::string::npos) << b->error.value_or("");
}

TEST_F(PoolTest, close_fails_the_waiters_and_closes_every_connection) {
  driver.hosts[5001] = FakeDriver::Host::broker;
  options.size = 1;
  auto pool = make_pool();
  auto lent = borrow(*pool);
  auto waiting = borrow(*pool);
  driver.run();
  ASSERT_TRUE(lent->lease);
  bool closed = false;
  pool->close([&](Result<void>) { closed = true; });
  driver.run();
  ASSERT_TRUE(waiting->answered);
  EXPECT_EQ(waiting->error.value_or(""), "connection closed: the pool is closing");
  EXPECT_FALSE(closed);  // a lease is still out
  lent->lease.release();
  driver.run();
  EXPECT_TRUE(closed);
  EXPECT_EQ(driver.open_connections(), 0u);
  auto late = borrow(*pool);
  driver.run();
  EXPECT_EQ(late->error.value_or(""), "connection closed: the pool is closing");
}

}  // namespace
}  // namespace warren::test

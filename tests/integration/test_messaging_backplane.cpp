// The messaging layer's backplane against the real broker, on each driver: a room event fans
// out to every instance in the room and to none outside it, leaving a room stops its events,
// and an instance's channel count on the broker does not grow with its rooms.
#include <map>
#include <sstream>

#include "client_fixture.hpp"
#include "warren/messaging/backplane.hpp"

namespace warren::test {
namespace {

using namespace warren::messaging;

class MessagingBackplane : public ClientSuite {
 protected:
  std::string prefix = "wb" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000);

  std::shared_ptr<Messaging> layer(std::shared_ptr<client::Connection> c) {
    auto m = Messaging::create(c, {.prefix = prefix});
    if (!m) throw std::runtime_error(m.error().to_string());
    return *m;
  }
  std::shared_ptr<Backplane> instance(const std::shared_ptr<Messaging>& m, std::vector<std::string>* got) {
    auto bp = wait<std::shared_ptr<Backplane>>([&](auto d) {
      Backplane::start(m, {}, [got](std::string_view room, const client::Delivery& dl) {
        got->push_back(std::string(room) + ":" + std::string(dl.body_text()));
      }, d);
    });
    if (!bp) throw std::runtime_error(bp.error().to_string());
    return *bp;
  }
  void join(const std::shared_ptr<Backplane>& bp, const std::string& room) {
    auto r = wait<void>([&](auto d) { bp->join(room, d); });
    if (!r) throw std::runtime_error("join: " + r.error().to_string());
  }
};

TEST_P(MessagingBackplane, a_room_event_reaches_every_instance_in_the_room_and_none_outside) {
  auto m = layer(conn);
  std::vector<std::string> a, b, c, outside;
  auto ia = instance(m, &a), ib = instance(m, &b), ic = instance(m, &c), io = instance(m, &outside);
  for (auto* i : {&ia, &ib, &ic}) join(*i, "lobby");
  join(io, "elsewhere");
  ASSERT_TRUE(wait<void>([&](auto d) { ia->publish("lobby", "hello", d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return a.size() == 1 && b.size() == 1 && c.size() == 1; }));
  loop.run_until([] { return false; }, 300ms);  // anything stray would have arrived by now
  EXPECT_EQ(a, (std::vector<std::string>{"lobby:hello"}));
  EXPECT_EQ(b, (std::vector<std::string>{"lobby:hello"}));
  EXPECT_EQ(c, (std::vector<std::string>{"lobby:hello"}));
  EXPECT_TRUE(outside.empty());
  // Leaving stops the room's events for that instance alone.
  ASSERT_TRUE(wait<void>([&](auto d) { ic->leave("lobby", d); }).ok());
  ASSERT_TRUE(wait<void>([&](auto d) { io->publish("lobby", "again", d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return a.size() == 2 && b.size() == 2; }));
  loop.run_until([] { return false; }, 300ms);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_TRUE(outside.empty());
  // A room nobody is in takes the event nowhere, without an error.
  EXPECT_TRUE(wait<void>([&](auto d) { ia->publish("empty-room", "x", d); }).ok());
  EXPECT_TRUE(m->healthy());
}

TEST_P(MessagingBackplane, the_channel_count_does_not_grow_with_the_rooms) {
  client::ClientOptions options;
  const std::string name = prefix + "-bp-conn";
  options.engine.connection_name = name;
  auto own = connect("", options);
  auto m = layer(own);
  std::vector<std::string> got;
  auto bp = instance(m, &got);
  join(bp, "room-0");  // the layer's control channel and the instance's consumer channel
  int before = -1;
  for (int i = 0; i < 5 && before != 2; ++i) {
    before = broker_channels_of(name);
    if (before != 2) loop.run_until([] { return false; }, 200ms);
  }
  EXPECT_EQ(before, 2);
  for (int room = 1; room < 25; ++room) join(bp, "room-" + std::to_string(room));
  EXPECT_EQ(bp->rooms().size(), 25u);
  EXPECT_EQ(broker_channels_of(name), 2);
  ASSERT_TRUE(wait<void>([&](auto d) { bp->publish("room-17", "x", d); }).ok());
  ASSERT_TRUE(loop.run_until([&] { return got.size() == 1; }));
  EXPECT_EQ(got[0], "room-17:x");
  close(*own);
}

INSTANTIATE_TEST_SUITE_P(Drivers, MessagingBackplane, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

// A Session on a three-node cluster (scripts/cluster-start.sh: RMQ_CLUSTER_PORTS,
// RMQ_CLUSTER_DIRS) with a multi-host URL, publishing to and consuming from a quorum queue
// while the node it is connected to is stopped. It carries on through another node, and
// every confirmed message is consumed.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "faults/traffic.hpp"

namespace warren::test {
namespace {

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

class Cluster : public ::testing::TestWithParam<DriverKind> {
 protected:
  Loop loop{GetParam()};
};

TEST_P(Cluster, a_session_keeps_going_when_the_node_it_is_connected_to_stops) {
  const auto ports = words(env("RMQ_CLUSTER_PORTS"));
  const auto dirs = words(env("RMQ_CLUSTER_DIRS"));
  const std::string scripts = env("RMQ_SCRIPTS");
  ASSERT_EQ(ports.size(), 3u);
  ASSERT_EQ(dirs.size(), 3u);
  std::string hosts;
  for (const auto& p : ports) hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + p;
  auto url = client::parse_url("amqp://" + hosts + "/%2f");
  ASSERT_TRUE(url.ok()) << url.error().to_string();
  client::SessionOptions options;
  options.backoff = client::Backoff{50ms, 2.0, 1000ms};
  auto session = client::Session::start(loop.driver(), *url, options);

  wire::FieldTable quorum;
  quorum.set("x-queue-type", std::string("quorum"));
  const std::string queue = std::string("warren-cluster-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  Traffic t(loop, session, queue, true, quorum);
  ASSERT_TRUE(t.run_until([&] { return session->healthy() && t.setups == 1; }, 30s));
  constexpr int total = 1500;
  t.publish(total, 50);
  ASSERT_TRUE(t.run_until([&] { return t.settled() >= 500; }, 60s));

  const std::uint16_t victim = t.connected_port();
  ASSERT_NE(victim, 0);
  const auto at = std::find(ports.begin(), ports.end(), std::to_string(victim));
  ASSERT_NE(at, ports.end());
  const std::string victim_dir = dirs[static_cast<std::size_t>(at - ports.begin())];
  std::atomic<bool> stopped{false};
  std::atomic<int> rc{0};
  std::thread stopper([&] {
    rc = std::system((scripts + "/broker-stop.sh " + victim_dir + " >/dev/null 2>&1").c_str());
    stopped = true;
  });
  std::uint16_t now_on = 0;
  const bool moved = t.run_until([&] {
    now_on = t.connected_port();  // 0 until the new channel's setup has run
    return t.setups >= 2 && session->healthy() && now_on != 0 && now_on != victim;
  }, 90s);
  stopper.join();
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(moved) << "the session did not move to another node";
  ASSERT_TRUE(t.run_until([&] { return t.all_settled() && t.all_confirmed_consumed(); }, 120s))
      << "settled " << t.settled() << ", confirmed " << t.confirmed.size() << ", consumed " << t.received.size();
  for (int id : t.unknown) EXPECT_FALSE(t.confirmed.contains(id)) << id;
  std::printf("[cluster] %s: node %u stopped, carried on through %u; %d published, %zu confirmed, %zu outcome unknown, "
              "%zu distinct consumed, %ld deliveries\n",
              GetParam() == DriverKind::uv ? "libuv" : "asio", victim, now_on, total, t.confirmed.size(), t.unknown.size(),
              t.received.size(), t.deliveries);
  bool closed = false;
  session->close([&](Result<void>) { closed = true; });
  loop.run_until([&] { return closed; });
  // The node comes back with its data and rejoins, so the next test has three again.
  ASSERT_EQ(std::system(("RMQ_KEEP_DATA=1 " + scripts + "/broker-start.sh " + victim_dir + " " + std::to_string(victim) +
                         " >/dev/null 2>&1 && " + victim_dir + "/rabbitmqctl -q await_online_nodes 3 -t 60 >/dev/null 2>&1")
                            .c_str()),
            0);
}

INSTANTIATE_TEST_SUITE_P(Drivers, Cluster, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

// Faults under a running Session, against a real broker: a proxy that cuts every connection
// or stalls them, and a restart of the broker node itself. What must hold: the consumer
// resumes after setup runs again, every confirmed message is consumed at least once, every
// publish is settled exactly once, and a publish with an unknown outcome is never reported
// as confirmed. The figures (recovery times, confirmed vs consumed) are printed for the
// closing notes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <map>
#include <thread>

#include "faults/fault_proxy.hpp"
#include "faults/traffic.hpp"

namespace warren::test {
namespace {

using Clock = std::chrono::steady_clock;

class Faults : public ::testing::TestWithParam<DriverKind> {
 protected:
  Loop loop{GetParam()};

  std::shared_ptr<client::Session> session(std::uint16_t port, const std::string& params = "") {
    auto url = client::parse_url("amqp://127.0.0.1:" + std::to_string(port) + "/%2f" + params);
    if (!url.ok()) throw std::runtime_error(url.error().to_string());
    client::SessionOptions options;
    options.backoff = client::Backoff{50ms, 2.0, 1000ms};
    auto s = client::Session::start(loop.driver(), *url, options);
    s->on_status = [this](const client::Session::Status& st) {
      statuses.push_back(st.state);
      if (st.state == client::Session::State::reconnecting && !lost_at) lost_at = Clock::now();
      if (st.state == client::Session::State::connected) connected_at = Clock::now();
    };
    return s;
  }
  static void check_accounting(const Traffic& t, int total) {
    EXPECT_EQ(t.settled(), total);
    for (const auto& [id, n] : t.outcomes) EXPECT_EQ(n, 1) << "publish " << id << " settled " << n << " times";
    for (int id : t.unknown) EXPECT_FALSE(t.confirmed.contains(id)) << id;
    std::vector<int> missing;
    std::set_difference(t.confirmed.begin(), t.confirmed.end(), t.received.begin(), t.received.end(),
                        std::back_inserter(missing));
    EXPECT_TRUE(missing.empty()) << missing.size() << " confirmed messages never consumed, first " << missing.front();
  }
  void close(client::Session& s) {
    bool closed = false;
    s.close([&](Result<void>) { closed = true; });
    loop.run_until([&] { return closed; });
  }

  std::vector<client::Session::State> statuses;
  std::optional<Clock::time_point> lost_at, connected_at;
};

TEST_P(Faults, cutting_every_connection_twice_under_traffic_loses_no_confirmed_message) {
  FaultProxy proxy(broker_port());
  const std::string queue = std::string("warren-faults-cut-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  rabbitmqctl("-q delete_queue " + queue);
  auto s = session(proxy.port());
  Traffic t(loop, s, queue, false);
  ASSERT_TRUE(t.run_until([&] { return s->healthy() && t.setups == 1; }, 10s));
  constexpr int total = 1500;
  t.publish(total, 50);
  for (int cut_at : {500, 1000}) {
    ASSERT_TRUE(t.run_until([&] { return t.settled() >= cut_at; }, 30s));
    proxy.cut_all();
    ASSERT_TRUE(t.run_until([&] { return !s->healthy(); }, 10s));
  }
  ASSERT_TRUE(t.run_until([&] { return t.all_settled() && t.all_confirmed_consumed(); }, 60s))
      << "settled " << t.settled() << ", confirmed " << t.confirmed.size() << ", consumed " << t.received.size();
  EXPECT_EQ(t.setups, 3);
  check_accounting(t, total);
  std::printf("[faults] cut x2, %s: %d published, %zu confirmed, %zu outcome unknown, %zu distinct consumed, %ld deliveries\n",
              GetParam() == DriverKind::uv ? "libuv" : "asio", total, t.confirmed.size(), t.unknown.size(),
              t.received.size(), t.deliveries);
  close(*s);
  rabbitmqctl("-q delete_queue " + queue);
}

TEST_P(Faults, a_stalled_connection_is_found_dead_by_heartbeats_and_replaced) {
  FaultProxy proxy(broker_port());
  auto s = session(proxy.port(), "?heartbeat=1");
  Traffic t(loop, s, std::string("warren-faults-stall-") + (GetParam() == DriverKind::uv ? "uv" : "asio"), false);
  ASSERT_TRUE(t.run_until([&] { return s->healthy() && t.setups == 1; }, 10s));
  proxy.stall(true);
  const auto stalled_at = Clock::now();
  ASSERT_TRUE(t.run_until([&] { return !s->healthy(); }, 10s));
  const double detected_s = std::chrono::duration<double>(Clock::now() - stalled_at).count();
  EXPECT_LT(detected_s, 3.5) << "a 1 s heartbeat must find a silent peer within about two intervals";
  proxy.stall(false);
  ASSERT_TRUE(t.run_until([&] { return s->healthy() && t.setups == 2; }, 20s));
  std::printf("[faults] stall, %s: detected after %.2f s, setup re-ran\n", GetParam() == DriverKind::uv ? "libuv" : "asio",
              detected_s);
  close(*s);
}

TEST_P(Faults, a_slow_link_is_slow_but_not_a_fault) {
  FaultProxy proxy(broker_port());
  proxy.delay(150ms);  // each chunk, each way: slow, yet well inside two 1 s heartbeat intervals
  auto s = session(proxy.port(), "?heartbeat=1");
  const std::string queue = std::string("warren-faults-slow-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  Traffic t(loop, s, queue, false);
  ASSERT_TRUE(t.run_until([&] { return s->healthy() && t.setups == 1; }, 20s));
  constexpr int total = 300;
  t.publish(total, 50);
  ASSERT_TRUE(t.run_until([&] { return t.all_settled() && t.all_confirmed_consumed(); }, 60s))
      << "settled " << t.settled() << ", confirmed " << t.confirmed.size() << ", consumed " << t.received.size();
  EXPECT_EQ(t.confirmed.size(), static_cast<std::size_t>(total));
  EXPECT_EQ(t.setups, 1) << "a delay is not a lost connection";
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), client::Session::State::reconnecting), 0);
  close(*s);
  rabbitmqctl("-q delete_queue " + queue);
}

// The faults broker (RMQ_FAULT_DIR/RMQ_FAULT_PORT) is this test's alone: it is stopped and
// started three times under a running publisher and consumer.
TEST_P(Faults, a_broker_restart_under_traffic_recovers_and_loses_no_confirmed_message) {
  const std::string dir = env("RMQ_FAULT_DIR"), scripts = env("RMQ_SCRIPTS");
  const auto port = static_cast<std::uint16_t>(std::stoi(env("RMQ_FAULT_PORT")));
  auto s = session(port);
  const std::string queue = std::string("warren-faults-restart-") + (GetParam() == DriverKind::uv ? "uv" : "asio");
  Traffic t(loop, s, queue, true);  // durable, with persistent messages: they outlive the node
  ASSERT_TRUE(t.run_until([&] { return s->healthy() && t.setups == 1; }, 10s));
  constexpr int total = 1500;
  t.publish(total, 50);
  std::vector<double> recovery_s, restart_script_s;
  for (int restart = 1; restart <= 3; ++restart) {
    ASSERT_TRUE(t.run_until([&] { return t.settled() >= restart * 300; }, 60s));
    std::atomic<bool> back{false};
    std::atomic<int> rc{0};
    Clock::time_point back_at;
    lost_at.reset();
    const auto restart_began = Clock::now();
    std::thread restarter([&] {
      // The same node on the same port, with its data: the durable queue and its
      // persistent messages must outlive the restart.
      rc = std::system((scripts + "/broker-stop.sh " + dir + " >/dev/null 2>&1 && RMQ_KEEP_DATA=1 " + scripts +
                        "/broker-start.sh " + dir + " " + std::to_string(port) + " >/dev/null 2>&1")
                           .c_str());
      back_at = Clock::now();
      back = true;
    });
    const bool recovered = t.run_until([&] { return back && s->healthy() && t.setups == restart + 1; }, 120s);
    restarter.join();
    ASSERT_EQ(rc, 0) << "the faults broker did not restart";
    ASSERT_TRUE(recovered) << "no recovery after restart " << restart;
    ASSERT_TRUE(lost_at.has_value());
    // The client's outage: from noticing the loss to connected again (the node's own stop
    // and start take most of it).
    recovery_s.push_back(std::chrono::duration<double>(*connected_at - *lost_at).count());
    restart_script_s.push_back(std::chrono::duration<double>(back_at - restart_began).count());
  }
  ASSERT_TRUE(t.run_until([&] { return t.all_settled() && t.all_confirmed_consumed(); }, 120s))
      << "settled " << t.settled() << ", confirmed " << t.confirmed.size() << ", consumed " << t.received.size();
  check_accounting(t, total);
  std::sort(recovery_s.begin(), recovery_s.end());
  std::sort(restart_script_s.begin(), restart_script_s.end());
  std::printf("[faults] broker restart x3, %s: client outage (loss noticed to connected) %.3f / %.3f / %.3f s (median "
              "%.3f), stop+start of the node itself median %.3f s; %d published, %zu confirmed, %zu outcome unknown, "
              "%zu distinct consumed, %ld deliveries\n",
              GetParam() == DriverKind::uv ? "libuv" : "asio", recovery_s[0], recovery_s[1], recovery_s[2], recovery_s[1],
              restart_script_s[1], total, t.confirmed.size(), t.unknown.size(), t.received.size(), t.deliveries);
  close(*s);
}

INSTANTIATE_TEST_SUITE_P(Drivers, Faults, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test

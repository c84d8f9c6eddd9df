// A deterministic simulation of the client layer on the fake driver: a list of commands (user
// actions, faults, time passing) runs against Connections, up to three Sessions with
// recovering channels and plain ones (Session::open_channel, which waits through a
// reconnect), a Pool, an RpcClient and RpcServers, all talking to the model broker of
// tests/client/fake_driver.hpp on a virtual clock; any of them may be dropped (its last
// reference let go) at any point. After every step and at the end the invariants below are
// checked; a broken one is a Violation (its text says which).
//
//   exactly once   every callback handed in runs exactly once (at the end, after closing
//                  everything and waiting out every timeout), and none runs after its
//                  connection's, session's or pool's final close report
//   confirms       no publish is reported confirmed unless the broker acked it; the broker
//                  never receives one publish twice (nobody republishes an unknown outcome)
//   deliveries     every message the broker handed to a live consumer of ours reached its
//                  on_delivery (or, for a stream consumer, its buffer or a receive); no
//                  message bounces between broker and client forever; a manual-ack stream
//                  consumer never hands out a message once it ended or its channel closed;
//                  a stream subscription's delivery (x-stream-offset) is never rejected
//   returns        on_returned sees a returned publish at most as often as the broker
//                  returned it
//   stale handles  a verb on an empty Channel fails with invalid_argument, on a closed one
//                  with an error, and neither sends the broker anything; a Message whose
//                  channel closed acks with channel_closed and sends nothing
//   heartbeats     the broker never hears nothing from a client for two heartbeat intervals
//   protocol       the library itself never makes the broker close a channel (a direct
//                  reply-to publish before its reply consumer, an acking reply consumer)
//   flow           every channel.flow the broker sent is answered with flow-ok
//   quiet loop     once everything is closed: no armed timer, no posted work, no open stream
//   recovery       a Session whose broker keeps coming back ends healthy, every recovering
//                  channel ready; its on_status says nothing after `closed`
//
// Used by sim_tests.cpp (rapidcheck generates the commands) and test_regressions.cpp (the
// shrunk counterexamples, written out). It may not reach into client/ internals: only the
// public API and what the fake driver shows.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "warren/client/pool.hpp"
#include "warren/client/rpc.hpp"
#include "warren/client/session.hpp"

namespace warren::sim {

enum class Op : std::uint8_t {
  // the Connection (port by b % 4: 0 and 3 the broker on 5001, 1 a black hole on 5006, 2 mute
  // on 5007) and its Channel, Consumer and Message handles
  connect, open_channel, close_channel, declare, publish, publish_no_callback, publish_null_callback,
  publish_large, confirm_select, consume, consume_stream, cancel, receive, ack, ack_dead, get, rpc_start, rpc_call,
  close_connection,
  // the Session (hosts 5004 then 5002) and its recovering channels
  session_start, session_channel, session_open_channel, session_publish, session_ack, session_close,
  // the Pool (5003)
  pool_borrow, pool_release, pool_close_lease, pool_close,
  // time
  advance,
  // faults (port by a: 5001, 5002, 5003, 5004)
  cut, stall, broker_close_channel, broker_close_connection, blocked, unblocked, silent, broker_cancel,
  hold_confirms, release_confirms, nack_next, hold_input, release_input, other_publisher, host_5004,
  // exchanges and bindings, channel.flow, the RPC server (on the newest connection)
  exchange_declare, queue_bind, publish_exchange, channel_flow, rpc_serve, rpc_server_drop,
  // dropping the last reference to a live object
  drop_connection, drop_rpc, drop_session, drop_pool,
  // more faults (port by a): channel.flow from the broker; the broker's bytes split into pieces
  broker_flow, split_reads,
};

struct Cmd {
  Op op = Op::advance;
  int a = 0;
  int b = 0;
};

const char* name(Op op);
void showValue(const Cmd& c, std::ostream& os);
std::ostream& operator<<(std::ostream& os, const Cmd& c);

// A broken invariant.
struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Sim {
 public:
  Sim();
  ~Sim();
  Sim(const Sim&) = delete;
  Sim& operator=(const Sim&) = delete;

  // One command, then the loop drained and the invariants checked (throws Violation).
  void step(const Cmd& c);
  // Heals the network, checks recovery, closes everything, waits out every timeout, and
  // checks that every callback ran exactly once and the loop is quiet (throws Violation).
  void finish();
  // Both, for a whole list.
  void run(const std::vector<Cmd>& cmds);

  test::FakeDriver driver;
  test::BrokerWorld world;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace warren::sim

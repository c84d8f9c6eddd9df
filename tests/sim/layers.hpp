// A deterministic simulation of the messaging layer (work queue and log) on the fake driver's
// model broker (tests/client/fake_driver.hpp with model_queues.hpp: quorum queues and
// x-delivery-count, TTL and dead-lettering, streams with offsets and retention, exclusive
// queues, user_id checked). Two Sessions (two processes, say) each run a Messaging layer;
// seeded lists of putters, workers with chosen outcomes, several appenders, readers and
// tails, with faults anywhere (cut connections, hung brokers, channels the broker closes, held confirms,
// a message published by another user, retention trimming the stream) and time passing.
// After every step and at the end the invariants below are checked; a broken one is a
// Violation whose text says which.
//
//   user_id        the layer never makes the broker refuse a user_id (a republish carries
//                  none it cannot vouch for)
//   stream acks    a stream delivery is only ever acked (a reject closes the connection)
//   settles        no delivery is settled twice (406 unknown delivery tag), also where the
//                  application acks what a tail handed it
//   attempts       a worker never sees a copy nobody made: attempt 1 of a message once
//                  fresh (not redelivered), attempt n+1 only as often as attempt n was retried
//   puts           every confirmed put, and every message another user put, ends done or in
//                  the dead-letter queue: never lost, never bounced forever
//   appends        an append's offset holds its entry
//   reads          a page is consecutive offsets from where it was asked, at most
//                  max_entries, each the entry the stream holds there; a complete page ends
//                  at the tip it saw
//   tails          a tail hands on each offset at most once, in order, each the entry the
//                  stream holds there, and skips one only where its log reported a gap; at
//                  the end a live tail has had every offset from where it started
//   pipeline       each delivery settled once and one at a time (never a multiple ack), by
//                  its record's outcome (what the stage said); at the end every record is
//                  where its outcome puts it (the destination, the dead-letter queue, or
//                  nowhere when skipped), and, unless a fault could duplicate it, once
//   stalls         applications that settle at random (leave it to the layer, copy(), take()
//                  and settle later, ack, nack or reject the view: direct_sim.hpp) never make a
//                  delivery settle twice, and at the end every live subscription's queue is
//                  empty with nothing unacked: nothing stops at a prefetch; every confirmed
//                  send to the group reached a member
//   trace          every message's trace id survives every hop (a retry, a dead-letter, a
//                  group member, an inbox, the backplane, a pipeline's output and envelope, an
//                  RPC reply), with or without an observer recording spans (traces.hpp)
//   exactly once   every callback handed in runs exactly once by the end
//   quiet loop     once everything is closed: no armed timer, no open stream
//
// Used by layer_sim_tests.cpp (rapidcheck generates the commands, and the shrunk
// counterexamples are written out there). Through the public API only.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "client/fake_driver.hpp"

namespace warren::layersim {

enum class Op : std::uint8_t {
  put,           // a putter on session a % 2
  foreign,       // a message another user published lands in the work queue
  worker,        // a worker on session a % 2, prefetch 1 + b % 3
  mode,          // worker a's outcome from now on: b % 5 = done, retry, release, dead_letter, hold
  settle_held,   // the oldest held item: done (b even) or retried
  stop_worker,   // worker a cancelled
  append,        // an appender on session a % 2
  read,          // a page from b % 4 = first, last, next, offset a; max_entries 1 + a % 4
  tail,          // a tail on session a % 2 from b % 4 = first, last, next, offset a
  close_tail,    // tail a closed
  advance,       // time passes: b % 6 picks 0, 10, 100, 1000, 3000, 11000 ms
  cut,           // session a % 2's connection is reset
  close_channel, // the broker closes session a % 2's b-th open channel (406)
  hold_confirms, // session a % 2's broker holds confirms (b odd) or sends them
  truncate,      // retention drops the stream's 1 + b % 3 oldest entries no reader is on
  // the pipeline (a queue pipeline on a plain connection of its own, port 5003, as `warren
  // pipe` runs: restarted by the sim, as by a service manager, once it stopped)
  pipe_start,    // concurrency 1 + a % 2, prefetch 1 + b % 5
  pipe_put,      // a record in its source: b % 6 = completes, fails (dead-lettered), skipped,
                 // held in its stage, undecodable headers, fails once (requeued); a odd: from
                 // another user
  pipe_release,  // the oldest record held in a stage completes
  pipe_drain,    // drain(5 s)
  pipe_cut,      // its connection is reset
  pipe_hold,     // its broker holds confirms (b odd) or sends them
  // the settling applications (direct_sim.hpp)
  member,        // a member of the group "billing" on session a % 2, prefetch 1 + b % 3
  inbox,         // session a % 2's inbox
  backplane,     // session a % 2's backplane instance, in the room "lobby"
  send,          // b % 3: to the group, to session a % 2's inbox, to the room; traced when a / 2 is even
  app_mode,      // application a settles as b % 7 says: leave it to the layer, copy(), take()
                 // and settle later, ack, nack once, reject, take() and ack at once
  settle_taken,  // the oldest taken message: b % 3 = ack, nack, reject
  rpc_serve,     // an RpcServer and an RpcClient on a plain connection (port 5004)
  rpc_call,      // a call, traced when a is even
  hang,          // session a % 2's broker goes silent (a hung node): the session gives it up
                 // after two missed heartbeats (1 s) and dials a fresh one
  levels_down,   // the work queue's retry levels (classic queues) lose their node (b even) or
                 // get it back (b odd): declaring one is a 404, nothing is routed into one
};

struct Cmd {
  Op op = Op::advance;
  int a = 0;
  int b = 0;
};

const char* name(Op op);
void showValue(const Cmd& c, std::ostream& os);
std::ostream& operator<<(std::ostream& os, const Cmd& c);

struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class LayerSim {
 public:
  // `spans`: every connection's observer records spans (a publish without a context starts
  // a trace), as a traced application's would.
  explicit LayerSim(bool spans = false);
  ~LayerSim();
  LayerSim(const LayerSim&) = delete;
  LayerSim& operator=(const LayerSim&) = delete;

  void step(const Cmd& c);  // one command, the loop drained, the invariants checked
  void finish();            // heal, drain, check what must have ended, close, check the rest
  void run(const std::vector<Cmd>& cmds);

  test::FakeDriver driver;
  test::BrokerWorld world;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace warren::layersim

// The layer simulation as a rapidcheck property (tests/sim/layers.hpp): random lists of
// putters, workers, appenders, readers, tails, faults and time passing must keep every
// invariant. A failure prints the shrunk list ({Op::..., a, b}) and the seed; replay it with
//   RC_PARAMS="seed=<seed>" build/tests/layer-sim-tests --gtest_filter='LayerSimulation.*'
// and write it out below as a regression case.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "sim/layers.hpp"

namespace warren::layersim {
namespace {

rc::Gen<Op> gen_op() {
  return rc::gen::weightedElement<Op>({
      {8, Op::put},        {2, Op::foreign},     {4, Op::worker},  {4, Op::mode},    {2, Op::settle_held},
      {1, Op::stop_worker}, {8, Op::append},     {4, Op::read},    {3, Op::tail},    {1, Op::close_tail},
      {10, Op::advance},   {2, Op::cut},         {2, Op::close_channel}, {1, Op::hold_confirms}, {2, Op::truncate},
      {3, Op::pipe_start}, {8, Op::pipe_put},    {3, Op::pipe_release}, {2, Op::pipe_drain}, {1, Op::pipe_cut},
      {2, Op::pipe_hold},  {3, Op::member},      {2, Op::inbox},   {2, Op::backplane}, {8, Op::send},
      {4, Op::app_mode},   {2, Op::settle_taken}, {1, Op::rpc_serve}, {3, Op::rpc_call}, {2, Op::hang}, {1, Op::levels_down},
  });
}

rc::Gen<Cmd> gen_cmd() {
  return rc::gen::build<Cmd>(rc::gen::set(&Cmd::op, gen_op()), rc::gen::set(&Cmd::a, rc::gen::inRange(0, 8)),
                             rc::gen::set(&Cmd::b, rc::gen::inRange(0, 8)));
}

// Half the cases with an observer recording spans on every connection, half without.
RC_GTEST_PROP(LayerSimulation, PutsEndDoneOrDeadLetteredReadsAndTailsExactCallbacksOnce, ()) {
  const bool spans = *rc::gen::arbitrary<bool>();
  const auto cmds = *rc::gen::scale(1.0, rc::gen::container<std::vector<Cmd>>(gen_cmd()));
  RC_TAG(spans ? "spans" : "no spans");
  LayerSim sim(spans);
  try {
    sim.run(cmds);
  } catch (const Violation& v) {
    RC_FAIL(v.what());
  }
}

void replay(const std::vector<Cmd>& cmds, bool spans = false) {
  LayerSim sim(spans);
  try {
    sim.run(cmds);
  } catch (const Violation& v) {
    FAIL() << v.what();
  }
}

// Issue 39's soak: an appender waited forever once its node hung past the heartbeat. Found by
// the simulation's hung broker: a worker cancelled while its broker is silent was never told.
TEST(LayerRegressions, a_worker_cancelled_while_its_broker_hangs_is_told) {
  replay({{Op::worker, 0, 0}, {Op::hang, 0, 0}, {Op::stop_worker, 0, 0}});
}

// A worker in retry mode behind a broker that hangs: its retry levels cannot be declared on
// the hung connection, and a message must not bounce between broker and worker in a loop
// while they are missing (found by the random runs once the hung broker was drawn).
TEST(LayerRegressions, a_retry_whose_levels_are_missing_after_a_hang_does_not_spin) {
  replay({{Op::hang, 0, 0}, {Op::worker, 0, 0}, {Op::mode, 0, 6}, {Op::advance, 0, 4}, {Op::foreign, 0, 0}});
}

// A retry level whose node is down: each retry into it comes back unroutable and its declare
// is a 404. The message waits out its delay in the worker before it goes back, not in a loop;
// once the node is back, the levels are declared again and the message ends done or
// dead-lettered (the simulation's end checks every put for that).
TEST(LayerRegressions, a_retry_into_a_level_whose_node_is_down_waits_its_delay_then_goes_through) {
  replay({{Op::worker, 0, 0}, {Op::advance, 0, 3}, {Op::levels_down, 0, 0}, {Op::mode, 0, 1}, {Op::foreign, 0, 0},
          {Op::advance, 0, 4}, {Op::advance, 0, 4}, {Op::levels_down, 0, 1}, {Op::advance, 0, 4}});
}

// A worker in retry mode whose broker holds confirms while the retry levels lose their node:
// the second put was neither done nor dead-lettered, nor queued anywhere (found by the random
// runs with levels_down drawn).
TEST(LayerRegressions, a_retry_held_unconfirmed_while_its_levels_go_down_is_not_lost) {
  replay({{Op::worker, 0, 1}, {Op::hold_confirms, 0, 1}, {Op::mode, 0, 1}, {Op::put, 0, 0}, {Op::levels_down, 0, 0},
          {Op::put, 0, 0}});
}

// A message another user published is retried and dead-lettered like any other: the
// republish carries no user_id (F2).
TEST(LayerRegressions, another_users_message_is_retried_then_dead_lettered) {
  replay({{Op::worker, 1, 0}, {Op::mode, 0, 1}, {Op::advance, 0, 3}, {Op::foreign, 0, 0}, {Op::advance, 0, 4},
          {Op::advance, 0, 4}});
}

// A tail from "next" that is cut before its first entry misses nothing appended during the
// outage (F5).
TEST(LayerRegressions, a_tail_from_next_cut_before_its_first_entry_misses_nothing) {
  replay({{Op::append, 0, 0}, {Op::advance, 0, 3}, {Op::tail, 1, 2}, {Op::advance, 0, 3}, {Op::cut, 1, 0},
          {Op::append, 0, 0}, {Op::append, 0, 0}, {Op::advance, 0, 4}});
}

// A tail from "first" on an empty stream, away before its first entry while retention drops
// an entry appended meanwhile, reports the gap when it comes back (it consumed "first" again,
// which had moved on, and skipped offset 0 in silence).
TEST(LayerRegressions, a_tail_from_first_away_before_its_first_entry_reports_what_retention_took) {
  replay({{Op::tail, 3, 0}, {Op::advance, 0, 3}, {Op::cut, 1, 0}, {Op::append, 0, 0}, {Op::append, 0, 0},
          {Op::truncate, 0, 0}});
}

// A broker that holds a dead-letter's confirm for 44 s: the worker hands the message back at
// each timeout and tries again, in time, not in a loop.
TEST(LayerRegressions, a_held_confirm_is_retried_in_time_not_in_a_loop) {
  replay({{Op::hold_confirms, 7, 3}, {Op::worker, 3, 0}, {Op::mode, 0, 3}, {Op::put, 0, 0}, {Op::advance, 0, 5},
          {Op::advance, 0, 5}, {Op::advance, 0, 5}, {Op::advance, 0, 5}});
}

// An application that acks what its tail handed it: the tail acked the delivery already, and
// the view settles once (a second ack is a 406 that closes the tail's channel).
TEST(LayerRegressions, an_application_acking_a_tail_entry_settles_nothing_twice) {
  replay({{Op::append, 0, 0}, {Op::advance, 0, 3}, {Op::tail, 1, 0}, {Op::advance, 0, 3}});
}

// F10: a drain hands back what the core never started, named by the core. With one record in
// its stage, two waiting (prefetch 5 over concurrency 1) and an undecodable one whose
// envelope's confirm is held, the drain used to requeue the undecodable one (its envelope on
// its way: a second one later) and never hand back a waiting one (waiting out its deadline).
TEST(LayerRegressions, a_pipeline_drain_hands_back_what_the_core_held) {
  replay({{Op::pipe_start, 0, 4}, {Op::pipe_hold, 0, 1}, {Op::pipe_put, 0, 3}, {Op::pipe_put, 0, 0}, {Op::pipe_put, 0, 0},
          {Op::pipe_put, 0, 4}, {Op::pipe_drain, 0, 0}, {Op::pipe_release, 0, 0}, {Op::pipe_hold, 0, 0}, {Op::advance, 0, 5}});
}

// Issue 36: with spans recorded, a put's traceparent (in its headers) was replaced by a new
// root: the worker was handed the message in another trace.
TEST(LayerRegressions, a_traced_put_reaches_its_worker_in_its_trace_with_spans_on) {
  replay({{Op::put, 0, 0}}, /*spans=*/true);
}

// Issue 36: an inbox or group member whose callback keeps a copy (as docs/messaging.md said:
// take() a copy to keep it) held the settle in the copy, and the delivery stayed unacked.
TEST(LayerRegressions, an_inbox_that_keeps_a_copy_leaves_the_ack_to_the_layer) {
  replay({{Op::inbox, 0, 0}, {Op::app_mode, 0, 1}, {Op::send, 0, 1}});
}
TEST(LayerRegressions, a_group_member_that_keeps_copies_after_a_cut_leaves_the_ack_to_the_layer) {
  replay({{Op::member, 0, 0}, {Op::cut, 0, 0}, {Op::send, 0, 0}, {Op::app_mode, 0, 1}});
}

// Issue 38: every layer at work once, each step checked by the invariant that the model broker
// saw nothing RabbitMQ 4.3 refuses by default (a transient non-exclusive queue, global QoS,
// x-queue-mode, x-queue-master-locator): work queue with retries and its DLQ, log and tail,
// pipeline, group member, inbox, backplane, direct sends, RPC.
TEST(Compatibility, nothing_the_layers_declare_is_refused_by_rabbitmq_4_3) {
  replay({{Op::worker, 0, 0}, {Op::put, 0, 0}, {Op::mode, 0, 1}, {Op::put, 1, 0}, {Op::advance, 0, 5},
          {Op::append, 0, 0}, {Op::read, 0, 0}, {Op::tail, 0, 0}, {Op::pipe_start, 0, 1}, {Op::pipe_put, 0, 0},
          {Op::member, 0, 0}, {Op::inbox, 0, 0}, {Op::backplane, 0, 0}, {Op::send, 0, 0}, {Op::send, 1, 1},
          {Op::rpc_serve, 0, 0}, {Op::rpc_call, 0, 0}, {Op::cut, 0, 0}, {Op::advance, 0, 5}});
}

}  // namespace
}  // namespace warren::layersim

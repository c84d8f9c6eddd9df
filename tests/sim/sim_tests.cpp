// The simulation as a rapidcheck property: random lists of user actions, faults and time
// passing (tests/sim/sim.hpp) must keep every invariant. A failure prints the shrunk list of
// commands ({Op::..., a, b}) and the seed; replay it with
//   RC_PARAMS="seed=<seed>" build-sim/tests/sim-tests
// and write it out as a test in test_regressions.cpp. Longer runs: RC_PARAMS="max_success=5000"
// (the default in tests/meson.build keeps the run to a few seconds).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>

#include "sim/sim.hpp"

namespace warren::sim {
namespace {

rc::Gen<Op> gen_op() {
  return rc::gen::weightedElement<Op>({
      {6, Op::connect},         {8, Op::open_channel},      {3, Op::close_channel},   {5, Op::declare},
      {6, Op::publish},         {2, Op::publish_no_callback}, {1, Op::publish_null_callback},
      {1, Op::publish_large},   {4, Op::confirm_select},    {4, Op::consume},         {2, Op::consume_stream},
      {2, Op::cancel},          {3, Op::receive},           {3, Op::ack},             {2, Op::ack_dead},
      {3, Op::get},             {2, Op::rpc_start},
      {3, Op::rpc_call},        {2, Op::close_connection},  {3, Op::session_start},   {3, Op::session_channel},
      {2, Op::session_open_channel},
      {4, Op::session_publish}, {2, Op::session_ack},       {1, Op::session_close},   {3, Op::pool_borrow},
      {2, Op::pool_release},    {1, Op::pool_close_lease},  {1, Op::pool_close},      {8, Op::advance},
      {2, Op::cut},             {1, Op::stall},             {2, Op::broker_close_channel},
      {1, Op::broker_close_connection}, {1, Op::blocked},   {1, Op::unblocked},       {1, Op::silent},
      {1, Op::broker_cancel},   {1, Op::hold_confirms},     {1, Op::release_confirms}, {1, Op::nack_next},
      {1, Op::hold_input},      {1, Op::release_input},     {2, Op::other_publisher}, {1, Op::host_5004},
      {2, Op::exchange_declare}, {2, Op::queue_bind},       {2, Op::publish_exchange}, {1, Op::channel_flow},
      {2, Op::rpc_serve},       {1, Op::rpc_server_drop},   {1, Op::drop_connection}, {1, Op::drop_rpc},
      {1, Op::drop_session},    {1, Op::drop_pool},         {1, Op::broker_flow},     {1, Op::split_reads},
  });
}

rc::Gen<Cmd> gen_cmd() {
  return rc::gen::build<Cmd>(rc::gen::set(&Cmd::op, gen_op()), rc::gen::set(&Cmd::a, rc::gen::inRange(0, 8)),
                             rc::gen::set(&Cmd::b, rc::gen::inRange(0, 8)));
}

RC_GTEST_PROP(Simulation, EveryCallbackOnceConfirmsHonestLoopQuietSessionRecovers, ()) {
  // Up to 300 commands: the interesting interleavings need a connection, channels and a fault.
  const auto cmds = *rc::gen::scale(3.0, rc::gen::container<std::vector<Cmd>>(gen_cmd()));
  if (std::getenv("SIM_STATS")) RC_TAG(cmds.size() / 25 * 25);
  Sim sim;
  try {
    sim.run(cmds);
  } catch (const Violation& v) {
    RC_FAIL(v.what());
  }
}

}  // namespace
}  // namespace warren::sim

// The simulation's shrunk counterexamples, one test each, replayed on the fake driver through
// the same harness (tests/sim/sim.hpp: ports, timeouts and the model broker are set up there;
// each Cmd is {operation, a, b}). Each says which invariant it breaks and which known bug (by
// its number in the brief on main) or NEW finding it shows. They fail until the fixes land;
// that is expected, and none is skipped.
#include <gtest/gtest.h>

#include "sim/sim.hpp"

namespace warren::sim {
namespace {

void expect_holds(const std::vector<Cmd>& cmds) {
  Sim sim;
  try {
    sim.run(cmds);
  } catch (const Violation& v) {
    ADD_FAILURE() << v.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "exception: " << e.what();
  }
}

// Invariant "exactly once / nothing after the final report"; bug 5. connect to a host whose
// TCP connect never completes (port 5006, b=1), then close(): done(nullptr) runs at once, the
// dial goes on, and connect's on_ready(error) runs after that "final" report.
TEST(SimRegression, close_before_the_tcp_connect_completes_still_reports_on_ready_later) {
  expect_holds({{Op::connect, 0, 1}, {Op::close_connection, 0, 0}});
}

// Invariant "exactly once"; bug 5. connect to a host that accepts TCP and never answers the
// handshake (port 5007, b=2), then close(): its done never runs.
TEST(SimRegression, close_during_the_handshake_never_runs_its_done) {
  expect_holds({{Op::connect, 0, 2}, {Op::close_connection, 0, 0}});
}

// Invariant "exactly once" (here: no exception out of the loop); bug 4. A publish with a null
// callback that the connection refuses, and the failure path calls the null callback:
// std::bad_function_call from FakeDriver::run(). Through the Channel handle the refusal comes
// from the connection while it closes (the broker's close-ok is held back, so the channel's
// handle is still open): the same failure path in Connection::publish.
TEST(SimRegression, publish_with_a_null_settled_callback_on_the_failure_path) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::hold_input, 0, 0}, {Op::close_connection, 0, 0},
                {Op::publish_null_callback, 0, 0}});
}

// The original list of bug 4: with no channel open the publish goes to an empty Channel
// handle, which must fail (invalid_argument) without calling the null callback.
TEST(SimRegression, publish_with_a_null_callback_on_an_empty_channel_handle) {
  expect_holds({{Op::connect, 0, 0}, {Op::publish_null_callback, 0, 0}});
}

// Invariants "deliveries" and "exactly once" (on_ended of a started subscription); bug 3.
// A no_wait consume reported success but registered no handler: the broker's delivery never
// reached on_message, and on_ended never ran. The public API has no no_wait consume any more
// (ConsumeOptions has none); the same list now runs the subscription with a tag of our own
// that replaced it, registered on consume-ok: the delivery must reach on_delivery, and
// on_ended must run once when the connection closes at the end.
TEST(SimRegression, a_no_wait_consume_receives_nothing_and_never_ends) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::declare, 0, 0}, {Op::consume, 0, 0},
                {Op::other_publisher, 0, 0}});
}

// Invariant "exactly once"; bug 2. The broker goes silent, open_channel waits, the heartbeat
// (1 s) latches the connection: the open_channel callback is never called.
TEST(SimRegression, an_open_channel_in_flight_when_the_connection_dies_is_never_answered) {
  expect_holds({{Op::connect, 0, 0}, {Op::silent, 0, 0}, {Op::open_channel, 0, 0}});
}

// Invariant "exactly once"; bug 2. The network stalls, the application closes a channel and
// waits for close-ok, the heartbeat latches the connection: close_channel's done never runs.
TEST(SimRegression, a_close_channel_awaiting_close_ok_when_the_connection_dies_is_never_answered) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::stall, 0, 0}, {Op::close_channel, 0, 0}});
}

// Invariant "recovery"; bug 10. The Session's URL lists 5004 then 5002; 5004 accepts TCP and
// never finishes the handshake (b=3: mute). Every attempt times out on 5004 and retries it;
// the dial never moves on to 5002, where a broker is up: the session never becomes healthy.
TEST(SimRegression, a_host_that_hangs_in_the_handshake_keeps_the_session_from_the_next_host) {
  expect_holds({{Op::host_5004, 0, 3}, {Op::session_start, 0, 0}});
}

// Invariant "recovery"; bug 9. The broker closes a recovering channel (404, channel.close):
// the session stays healthy, the channel still says ready(), and its publishes fail with
// "channel 1 is not open" for ever: the channel is never re-opened.
TEST(SimRegression, a_broker_channel_close_is_never_recovered) {
  expect_holds({{Op::session_start, 0, 0}, {Op::session_channel, 0, 0}, {Op::broker_close_channel, 1, 0}});
}

// Invariant "exactly once"; NEW. The lessee closes a lent connection, and the close-ok has
// not arrived (the stream holds its input) when the lease is released. Pool::give_back sees
// !is_open() and drops it (client/src/pool.cpp:124), releasing the last reference: the
// Connection is destroyed mid-close (connection.cpp:22, the destructor closes the stream and
// reports nothing) and the lessee's close done never runs.
TEST(SimRegression, a_lent_connection_closed_by_its_lessee_loses_the_close_done_when_returned) {
  expect_holds({{Op::pool_borrow, 0, 0}, {Op::hold_input, 2, 0}, {Op::pool_close_lease, 0, 0}, {Op::pool_release, 0, 0}});
}

// Invariant "nothing after the final report"; NEW (two parts). RpcClient::start on a channel
// the application already put in confirm mode fails: the engine refuses a second
// confirm.select with precondition_failed (engine/src/engine/commands.cpp:230), where RabbitMQ
// accepts it. Then the failed client still takes calls (rpc.cpp:35 returns without setting
// gone_, so rpc.cpp:52 lets them through): a call is published, nobody consumes replies, and
// its done runs on its timer after the connection's close was reported.
TEST(SimRegression, an_rpc_client_whose_start_failed_still_takes_calls_that_outlive_the_connection) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::confirm_select, 0, 0}, {Op::rpc_start, 0, 0},
                {Op::rpc_call, 0, 0}, {Op::close_connection, 0, 0}});
}

// Invariant "nothing after the final report": a consumer live when the application closes the
// connection. Connection::dispatch runs close()'s done first and the subscriptions' on_ended
// after it (client/src/connection.cpp:146-150).
TEST(SimRegression, on_ended_of_a_live_consumer_runs_after_the_close_done) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::declare, 0, 0}, {Op::consume, 0, 0},
                {Op::close_connection, 0, 0}});
}

// Invariant "deliveries" (a stream subscription's delivery is never rejected); NEW, found
// while porting to the Channel/Consumer API; the cause was in engine/ (fixed there: a consume
// naming x-stream-offset is a stream subscription to the engine, whose raced deliveries are
// left to the channel).
// A stream subscription (x-stream-offset, a=4) on q0, manual ack (b=0); the stream to the
// client holds what the broker sends; a message reaches the queue and is delivered (held);
// the consumer is cancelled; the held delivery arrives while the cancel awaits cancel-ok. The
// engine hands back a delivery that raced a cancel with basic.reject
// (engine/src/engine/input.cpp, Assembly::Kind::deliver) without knowing the subscription is a
// stream, so the broker gets the reject RabbitMQ 3.10-3.12 answers with a 540 connection close
// and consumer.hpp promises never to send.
TEST(SimRegression, a_stream_subscriptions_delivery_that_raced_the_cancel_is_rejected) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::consume_stream, 4, 0}, {Op::hold_input, 0, 0},
                {Op::other_publisher, 0, 0}, {Op::cancel, 0, 0}, {Op::release_input, 0, 0}});
}

// Invariant "nothing after the final report"; issue 27 (seed 5760532807976329183, 20,000 cases
// at max_size 300). A stream consumer with a buffer of 2 fills it and the connection stops
// reading, so the RPC client's confirm.select-ok never arrives: a call made meanwhile was
// published at once (the reply consumer did not exist yet), and when the connection ended,
// the never-finished start did not fail it. It ran on its own timeout, after the
// connection's final report. Now a call before ready waits in the client and a start that
// ends fails it.
TEST(SimRegression, an_rpc_call_made_before_ready_outlives_the_connection) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::declare, 0, 2}, {Op::publish, 0, 6},
                {Op::other_publisher, 0, 0}, {Op::publish, 0, 2}, {Op::other_publisher, 0, 2},
                {Op::other_publisher, 0, 0}, {Op::consume_stream, 3, 5}, {Op::rpc_start, 0, 0}, {Op::receive, 0, 0},
                {Op::consume_stream, 3, 3}, {Op::rpc_call, 0, 2}, {Op::receive, 0, 0}});
}

// Invariant "exactly once"; issue 27 (the simulation now drops Pools). The pool is dropped
// while its close waits for a connection that is still dialling: the close's done was never
// told (nor would a waiting borrow be).
TEST(SimRegression, a_pool_dropped_while_it_closes_never_tells_the_close) {
  expect_holds({{Op::pool_borrow, 0, 0}, {Op::pool_close, 0, 0}, {Op::drop_pool, 0, 0}});
}

// Invariant "exactly once"; issue 27. Both connections of the pool (size 2) are lent, a third
// borrow waits for one to come back, and the pool goes.
TEST(SimRegression, a_pool_dropped_with_a_borrow_waiting_never_tells_the_borrow) {
  expect_holds({{Op::pool_borrow, 0, 0}, {Op::pool_borrow, 0, 0}, {Op::pool_borrow, 0, 0}, {Op::drop_pool, 0, 0}});
}

// A crash (use after free); issue 27 (the simulation now drops Sessions). The application
// keeps a recovering channel and drops its session (b=1): the channel's publish read the
// destroyed session through a reference.
TEST(SimRegression, a_publish_on_a_recovering_channel_whose_session_was_dropped) {
  expect_holds({{Op::session_start, 0, 0}, {Op::session_channel, 0, 0}, {Op::drop_session, 0, 1},
                {Op::session_publish, 0, 0}});
}

// Invariant "exactly once"; issue 27. A publish waits for a recovering channel (the session
// never got a connection: 5004 refuses, then 5002's dial is held) when the session and its
// channels are dropped: the publish's done was destroyed untold.
TEST(SimRegression, a_waiting_publish_of_a_dropped_session_is_never_told) {
  expect_holds({{Op::session_start, 0, 0}, {Op::session_channel, 0, 0}, {Op::stall, 1, 0}, {Op::session_publish, 0, 3},
                {Op::drop_session, 0, 0}});
}

// Invariant "exactly once"; issue 27 (the simulation now drops live Connections). A
// basic.get is in flight (the network stalls) when the application drops the connection:
// its done ran twice.
TEST(SimRegression, a_get_in_flight_when_a_live_connection_is_dropped_runs_twice) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::stall, 0, 0}, {Op::get, 0, 0},
                {Op::drop_connection, 0, 0}});
}

// Invariant "protocol"; issue 27. The connection is blocked, so a call's publish waits in the
// client; the RpcClient is dropped: its reply consumer was cancelled at once, and the publish
// naming amq.rabbitmq.reply-to went out after it (RabbitMQ: 406, fast reply consumer does not
// exist). The dropped client now closes its channel, so the waiting publish never goes out.
TEST(SimRegression, a_dropped_rpc_clients_waiting_call_reaches_the_broker_after_its_reply_consumer) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::blocked, 0, 0}, {Op::rpc_start, 0, 0},
                {Op::rpc_call, 0, 0}, {Op::drop_rpc, 0, 0}});
}

// Invariant "exactly once"; issue 27. The RpcClient is dropped while its start waits (the
// network stalls): its ready was destroyed untold.
TEST(SimRegression, an_rpc_client_dropped_before_ready_never_tells_ready) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::stall, 0, 0}, {Op::rpc_start, 0, 0},
                {Op::drop_rpc, 0, 0}});
}

// Invariant "exactly once"; issue 27. An RpcServer dropped before its consume-ok (the stream
// holds its input) never told its ready.
TEST(SimRegression, an_rpc_server_dropped_before_it_started_never_tells_ready) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::hold_input, 0, 0}, {Op::rpc_serve, 0, 0},
                {Op::rpc_server_drop, 0, 0}});
}

// Invariant "deliveries"; issue 22 (F8). An auto-ack stream consumer's full buffer holds the
// input while reads are split into pieces; the held connection used to die of its own pause
// (so the check skipped it). Now it lives, reading a piece per half heartbeat: the third
// delivery arrives once the application reads the buffer again, as the finish now does.
TEST(SimRegression, a_held_connection_that_lives_gets_its_deliveries_once_the_buffer_is_read) {
  expect_holds({{Op::connect, 0, 0}, {Op::open_channel, 0, 0}, {Op::consume_stream, 1, 3}, {Op::split_reads, 0, 0},
                {Op::publish_large, 0, 0}, {Op::other_publisher, 0, 0}, {Op::publish_large, 0, 0}});
}

}  // namespace
}  // namespace warren::sim

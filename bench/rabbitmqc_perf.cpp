// The rabbitmq-c side of the side-by-side benchmark (bench/compare.sh): the same three
// workloads as `warren perf`, written the way rabbitmq-c's own examples use it (blocking
// socket, one connection), and the same JSON summary line.
//   rabbitmqc-perf --port P --queue Q --workload publish|confirm|consume --count N [--size B]
// Q must exist (compare.sh declares it, with the same arguments for every client).
//   publish: N messages without confirms, until the broker holds them
//   confirm: N messages with at most 1,000 unconfirmed in flight, topped up once 250 are free
//   consume: N messages already in Q, prefetch 500, a multiple ack every 100
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "perf_summary.hpp"
#include "process_usage.hpp"

namespace {

using warren::cli::cpu_seconds;

[[noreturn]] void die(const char* what, const char* why) {
  std::fprintf(stderr, "rabbitmqc-perf: %s: %s\n", what, why);
  std::exit(1);
}

void check_reply(amqp_rpc_reply_t r, const char* what) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return;
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) die(what, amqp_error_string2(r.library_error));
  die(what, "the broker closed the channel or connection");
}

std::uint32_t queue_depth(amqp_connection_state_t conn, const std::string& queue) {
  auto* ok = amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue.c_str()), 1, 0, 0, 0, amqp_empty_table);
  check_reply(amqp_get_rpc_reply(conn), "queue.declare");
  return ok->message_count;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 5672;
  std::string queue, workload;
  std::uint64_t count = 0;
  std::size_t size = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--port") port = std::atoi(argv[i + 1]);
    else if (a == "--queue") queue = argv[i + 1];
    else if (a == "--workload") workload = argv[i + 1];
    else if (a == "--count") count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--size") size = std::strtoull(argv[i + 1], nullptr, 10);
    else die("usage", "--port P --queue Q --workload publish|confirm|consume --count N [--size B]");
  }
  if (queue.empty() || count == 0 || (workload != "publish" && workload != "confirm" && workload != "consume"))
    die("usage", "--port P --queue Q --workload publish|confirm|consume --count N [--size B]");

  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn);
  if (amqp_socket_open(socket, "127.0.0.1", port) != AMQP_STATUS_OK) die("connect", "failed");
  check_reply(amqp_login(conn, "/", 0, 131072, 60, AMQP_SASL_METHOD_PLAIN, "guest", "guest"), "login");
  amqp_channel_open(conn, 1);
  check_reply(amqp_get_rpc_reply(conn), "channel.open");
  const std::uint32_t initial = queue_depth(conn, queue);

  std::string body(size, 'c');
  amqp_bytes_t body_bytes{body.size(), body.data()};
  amqp_bytes_t routing_key = amqp_cstring_bytes(queue.c_str());
  std::uint64_t sent = 0, confirmed = 0, received = 0;
  const bool confirms = workload == "confirm";
  if (confirms) {
    amqp_confirm_select(conn, 1);
    check_reply(amqp_get_rpc_reply(conn), "confirm.select");
  }
  if (workload == "consume") {
    amqp_basic_qos(conn, 1, 0, 500, 0);
    check_reply(amqp_get_rpc_reply(conn), "basic.qos");
    amqp_basic_consume(conn, 1, routing_key, amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    check_reply(amqp_get_rpc_reply(conn), "basic.consume");
  }

  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  // Reads one frame (blocking) and counts the confirms it carries.
  auto read_confirm = [&] {
    amqp_frame_t frame;
    if (amqp_simple_wait_frame(conn, &frame) != AMQP_STATUS_OK) die("wait frame", "failed");
    if (frame.frame_type != AMQP_FRAME_METHOD) return;
    if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
      auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
      const std::uint64_t upto = ack->delivery_tag;
      if (ack->multiple) confirmed = upto;
      else if (upto > confirmed) confirmed = upto;  // acks come in order on one channel
    } else if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
      die("publish", "nacked");
    } else {
      die("publish", "unexpected method");
    }
  };
  if (workload == "publish" || confirms) {
    while (sent < count) {
      if (confirms) {
        // A full window is topped up once a quarter of it is free, as warren perf does.
        if (sent - confirmed >= 1000)
          while (sent - confirmed > 750) read_confirm();
      }
      if (amqp_basic_publish(conn, 1, amqp_empty_bytes, routing_key, 0, 0, nullptr, body_bytes) != AMQP_STATUS_OK)
        die("publish", "failed");
      ++sent;
    }
    if (confirms) {
      while (confirmed < sent) read_confirm();
    } else {
      // Polled every 5 ms, as warren perf does, so neither side pays for a busy loop.
      while (queue_depth(conn, queue) < initial + sent) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } else {
    while (received < count) {
      amqp_envelope_t envelope;
      amqp_maybe_release_buffers(conn);
      check_reply(amqp_consume_message(conn, &envelope, nullptr, 0), "consume");
      ++received;
      if (received % 100 == 0 || received == count)
        if (amqp_basic_ack(conn, 1, envelope.delivery_tag, 1) != AMQP_STATUS_OK) die("ack", "failed");
      amqp_destroy_envelope(&envelope);
    }
  }
  warren::bench::print_summary(sent, confirmed, received, start, cpu_start);
  amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
  return 0;
}

// W3 on the Asio driver two ways, to weigh the stream against the callback: `receive` reads
// with `co_await consumer.receive(asio::use_awaitable)` (an owned Message per delivery),
// `push` takes each delivery as a zero-copy view in the consume callback. Both read N
// messages already in Q with prefetch 500 and a multiple ack every 100, as bench/compare.sh's
// W3. CPU is the process's user + system time (getrusage, as warren perf measures it) from the
// consume to the last message; allocations are counted by a global operator new over the
// middle 80% of the run (steady state: the buffers are warm, the connection is set up).
//   bench-asio-receive --port P --queue Q --mode receive|push --count N [--prefetch N] [--ack-every N]
// Q must exist and hold N messages (bench/asio_receive.sh fills it as compare.sh does). Prints
// one line of JSON.
#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "alloc_counter.hpp"
#include "process_usage.hpp"
#include "warren/asio/async.hpp"

namespace {

using namespace warren;
using asio::use_awaitable;

struct Args {
  int port = 5672;
  std::string queue;
  std::string mode;
  std::uint64_t count = 0;
  std::uint16_t prefetch = 500;
  std::uint64_t ack_every = 100;
};

// Counts messages; marks the time, the CPU and the allocation counter at the run's edges.
struct Meter {
  std::uint64_t count = 0;
  std::uint64_t received = 0;
  std::chrono::steady_clock::time_point started;
  double cpu_start = 0, cpu_seconds = 0, seconds = 0;
  std::size_t allocs_from = 0, allocs_to = 0;

  void start() {
    started = std::chrono::steady_clock::now();
    cpu_start = cli::cpu_seconds();
  }
  // One more message; true when it was the last.
  bool tick() {
    ++received;
    if (received == count / 10) allocs_from = bench::allocations;
    if (received == count - count / 10) allocs_to = bench::allocations;
    if (received < count) return false;
    cpu_seconds = cli::cpu_seconds() - cpu_start;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return true;
  }
  [[nodiscard]] double allocs_per_msg() const {
    const auto window = count - count / 10 - count / 10;
    return window ? static_cast<double>(allocs_to - allocs_from) / static_cast<double>(window) : 0.0;
  }
};

asio::awaitable<Result<void>> run(asio_driver::AsioDriver& driver, const Args& args, Meter& meter) {
  auto url = client::parse_url("amqp://127.0.0.1:" + std::to_string(args.port) + "/%2f");
  if (!url) co_return url.error();
  auto conn = co_await asio_driver::async_connect(driver, *url, use_awaitable);
  if (!conn) co_return conn.error();
  auto ch = co_await asio_driver::async_open_channel(*conn, use_awaitable);
  if (!ch) co_return ch.error();
  const client::ConsumeOptions options{.queue = args.queue, .prefetch = args.prefetch};
  const auto multiple = client::AckOptions{.multiple = true};
  // Both live until the connection is closed: the push callback may run until then.
  asio::steady_timer finished(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  std::optional<Error> failed;
  meter.start();
  if (args.mode == "receive") {
    auto consumer = co_await ch->consume(options, use_awaitable);
    if (!consumer) failed = consumer.error();
    for (bool last = false; !last && !failed;) {
      auto message = co_await consumer->receive(use_awaitable);
      if (!message) {
        failed = message.error();
        break;
      }
      last = meter.tick();
      if (meter.received % args.ack_every == 0 || last)
        if (auto acked = message->ack(multiple); !acked) failed = acked.error();
    }
  } else {
    auto on_delivery = [&](const client::Delivery& d) {
      if (meter.received == meter.count || failed) return;
      const bool last = meter.tick();
      if (meter.received % args.ack_every == 0 || last)
        if (auto acked = d.ack(multiple); !acked) failed = acked.error();
      if (last || failed) finished.cancel();
    };
    auto consumer = co_await ch->consume(options, on_delivery, use_awaitable);
    if (!consumer) failed = consumer.error();
    std::error_code cancelled;
    if (!failed) co_await finished.async_wait(asio::redirect_error(use_awaitable, cancelled));
  }
  auto closed = co_await asio_driver::async_close(*conn, use_awaitable);
  if (failed) co_return *failed;
  co_return closed;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bench-asio-receive --port P --queue Q --mode receive|push --count N [--prefetch N] "
               "[--ack-every N]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--port") args.port = std::atoi(argv[i + 1]);
    else if (a == "--queue") args.queue = argv[i + 1];
    else if (a == "--mode") args.mode = argv[i + 1];
    else if (a == "--count") args.count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--prefetch") args.prefetch = static_cast<std::uint16_t>(std::atoi(argv[i + 1]));
    else if (a == "--ack-every") args.ack_every = std::strtoull(argv[i + 1], nullptr, 10);
    else usage();
  }
  if (args.queue.empty() || args.count == 0 || args.ack_every == 0 || (args.mode != "receive" && args.mode != "push"))
    usage();
  asio::io_context io(1);
  asio_driver::AsioDriver driver(io);
  Meter meter{.count = args.count};
  auto done = asio::co_spawn(io, run(driver, args, meter), asio::use_future);
  io.run();
  if (auto result = done.get(); !result) {
    std::fprintf(stderr, "bench-asio-receive: %s\n", result.error().to_string().c_str());
    return 1;
  }
  std::printf(
      "{\"mode\":\"%s\",\"received\":%llu,\"seconds\":%.6f,\"receive_rate\":%.1f,\"cpu_seconds\":%.6f,"
      "\"cpu_us_per_msg\":%.4f,\"allocs_per_msg\":%.4f,\"peak_rss_kb\":%ld}\n",
      args.mode.c_str(), static_cast<unsigned long long>(meter.received), meter.seconds,
      static_cast<double>(meter.received) / meter.seconds, meter.cpu_seconds,
      meter.cpu_seconds * 1e6 / static_cast<double>(meter.received), meter.allocs_per_msg(), cli::peak_rss_kb());
  return 0;
}

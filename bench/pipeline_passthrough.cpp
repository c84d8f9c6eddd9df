// Records per second through a pass-through pipeline: a queue filled with N messages, a
// QueuePipeline with no stage of its own publishing each record (confirmed, mandatory) to
// another queue and acking its source once confirmed. bench/pipeline.sh runs it beside
// `warren perf` with the same sizes (the broker's own ceiling for publish-with-confirms and
// consume, in the same run).
//   pipeline-passthrough PORT [RECORDS] [BODY_BYTES] [CONCURRENCY] [uv|asio]
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "warren/asio/asio_driver.hpp"
#include "warren/pipeline/queue_pipeline.hpp"
#include "warren/uv/uv_driver.hpp"

using namespace warren;

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s PORT [RECORDS] [BODY_BYTES] [CONCURRENCY] [uv|asio]\n", argv[0]), 2;
  const std::string port = argv[1];
  const std::uint64_t records = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20000;
  const std::size_t body_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64;
  const std::size_t concurrency = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 250;
  const std::string driver_name = argc > 5 ? argv[5] : "uv";
  auto url = client::parse_url("amqp://guest:guest@127.0.0.1:" + port + "/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;

  asio::io_context io{1};
  asio_driver::AsioDriver asio_driver(io);
  uv::UvDriver uv_driver(uv_default_loop());
  client::Driver& driver = driver_name == "asio" ? static_cast<client::Driver&>(asio_driver) : uv_driver;

  const std::string src = "warren-bench-pipe-src", out = "warren-bench-pipe-out", body(body_bytes, 'x');
  std::shared_ptr<client::Connection> conn;
  std::shared_ptr<pipeline::QueuePipeline> pipe;
  client::Channel ch;
  std::uint64_t sent = 0, confirmed = 0;
  std::chrono::steady_clock::time_point started;
  double seconds = 0;
  int code = 0;
  auto fail = [&](const Error& e) {
    std::fprintf(stderr, "pipeline-passthrough: %s\n", e.to_string().c_str());
    code = 1;
    conn->close([](Result<void>) {});
  };
  auto run_pipeline = [&] {
    started = std::chrono::steady_clock::now();
    pipe = pipeline::QueuePipeline::start(
        conn,
        {.core = {.name = "bench", .concurrency = concurrency},
         .source = {.queue = src},
         .destination = pipeline::DestinationOptions{.routing_key = out},
         .on_outcome =
             [&](const pipeline::Record&, const pipeline::Finished& f) {
               if (f.outcome != pipeline::Outcome::completed) fail(make_error(errc::nacked, "a record failed"));
             },
         .on_stopped = [&](const std::optional<std::string>&) { conn->close([](Result<void>) {}); }},
        {}, [&](Result<void> r) {
          if (!r) fail(r.error());
        });
  };
  std::function<void()> fill = [&] {
    while (sent < records && sent - confirmed < 1000) {
      ++sent;
      ch.publish({.routing_key = src}, client::as_bytes(body), [&](Result<engine::PublishOutcome> r) {
        if (!r) return fail(r.error());
        if (++confirmed == records) return run_pipeline();
        fill();
      });
    }
  };
  std::unique_ptr<client::Timer> watch;
  conn = client::Connection::connect(driver, *url, {}, [&](Result<void> ready) {
    if (!ready) return fail(ready.error());
    conn->open_channel([&](Result<client::Channel> c) {
      if (!c) return fail(c.error());
      ch = *c;
      for (const auto& q : {src, out}) {
        ch.queue_declare({.name = q}, [](Result<client::QueueDeclared>) {});
        ch.queue_purge({.queue = q}, [](Result<std::uint32_t>) {});
      }
      ch.confirm_select([&](Result<void> r) {
        if (!r) return fail(r.error());
        fill();
      });
    });
  });
  // Completion is polled (every millisecond) rather than counted in on_outcome, so the
  // measurement includes the last record's ack, which is sent after its outcome.
  watch = driver.timer([&] {
    if (pipe && pipe->status().completed == records && pipe->status().in_flight == 0 && seconds == 0) {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      pipe->drain(std::chrono::seconds(5), nullptr);
      return;
    }
    if (code == 0) watch->arm(driver.now() + std::chrono::milliseconds(1));
  });
  watch->arm(driver.now() + std::chrono::milliseconds(1));
  if (driver_name == "asio") io.run();
  else uv_run(uv_default_loop(), UV_RUN_DEFAULT);
  if (code) return code;
  std::printf("{\"driver\":\"%s\",\"records\":%llu,\"body_bytes\":%zu,\"concurrency\":%zu,\"seconds\":%.3f,\"records_per_s\":%.0f}\n",
              driver_name.c_str(), static_cast<unsigned long long>(records), body_bytes, concurrency, seconds,
              static_cast<double>(records) / seconds);
  return 0;
}

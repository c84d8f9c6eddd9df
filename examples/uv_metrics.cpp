// Metrics and trace context on libuv: the quick start's ten confirmed publishes and their
// deliveries, counted in a client::Metrics and printed at the end in Prometheus's text format
// (what a service would serve at /metrics: the CLI's --metrics-listen does). Each publish
// carries a trace context; each delivery reads it back.
// Usage: uv_metrics [URL]   (else $WARREN_URL, else amqp://guest:guest@127.0.0.1:5672/%2f)
#include <cstdio>
#include <cstdlib>
#include <warren/client/connection.hpp>
#include <warren/uv/uv_driver.hpp>

using namespace warren;

int main(int argc, char** argv) {
  const char* text = argc > 1 ? argv[1] : std::getenv("WARREN_URL");
  auto url = client::parse_url(text ? text : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;
  uv::UvDriver driver(uv_default_loop());
  auto metrics = std::make_shared<client::Metrics>();  // shared by every connection given it
  const auto trace = client::TraceContext::new_root();  // the span this program's work is in
  client::Consumer consumer;
  int settled = 0, traced = 0;
  auto ok = [](const auto& result) {
    if (!result) std::fprintf(stderr, "%s\n", result.error().to_string().c_str()), uv_stop(uv_default_loop());
    return result.ok();
  };
  std::shared_ptr<client::Connection> conn =
      client::Connection::connect(driver, *url, {.metrics = metrics}, [&](Result<void> r) {
        if (!ok(r)) return;
        conn->open_channel([&](Result<client::Channel> ch) {
          if (!ok(ch)) return;
          ch->confirm_select([&](Result<void> r) { ok(r); });
          ch->queue_declare({.name = "metrics-example", .exclusive = true}, [&](Result<client::QueueDeclared> q) { ok(q); });
          for (int i = 0; i < 10; ++i)
            ch->publish({.routing_key = "metrics-example", .trace = trace}, "message " + std::to_string(i),
                        [&](Result<engine::PublishOutcome> r) { if (ok(r) && ++settled == 20) conn->close({}); });
          ch->consume({.queue = "metrics-example"}, [&](const client::Delivery& d) {
            if (d.trace() && d.trace()->trace_id == trace.trace_id) ++traced;
            if (ok(d.ack()) && ++settled == 20) conn->close({});
          }, [&](Result<client::Consumer> c) { if (ok(c)) consumer = std::move(*c); });
        });
      });
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);
  std::fputs(metrics->prometheus_text().c_str(), stdout);
  const auto snap = metrics->snapshot();
  const bool counted = snap.total("messaging.client.sent.messages") == 10 &&
                       snap.total("messaging.client.consumed.messages") == 10 &&
                       snap.total("warren.publish.settled", {{"outcome", "confirmed"}}) == 10;
  std::printf("%d of 10 deliveries carried the trace; counted: %s\n", traced, counted ? "yes" : "no");
  return settled == 20 && traced == 10 && counted ? 0 : 1;
}

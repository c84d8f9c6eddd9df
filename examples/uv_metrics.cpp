// Metrics, trace context and spans on libuv: the quick start's ten confirmed publishes and
// their deliveries, counted in a client::Metrics and printed at the end in Prometheus's text
// format (what a service would serve at /metrics: the CLI's --metrics-listen does). Each
// publish is a span under this program's trace, and each delivery's processing a span under
// its publish's: an observer that wants spans prints them, as a tracer's exporter would.
// Usage: uv_metrics [URL]   (else $WARREN_URL, else amqp://guest:guest@127.0.0.1:5672/%2f)
#include <cstdio>
#include <cstdlib>
#include <set>
#include <warren/client/connection.hpp>
#include <warren/uv/uv_driver.hpp>

using namespace warren;

// Where an application hands warren's spans to its tracer; here, one line each.
struct PrintSpans : client::Observer {
  std::set<std::string> sent;  // the send spans' traceparents
  int processed_under_a_send = 0;
  void on_record(const client::Record&) override {}
  bool wants_spans() const noexcept override { return true; }
  void on_span(const client::SpanRecord& s) override {
    std::printf("span %-22.*s %-8s %s parent %s\n", int(s.name.size()), s.name.data(), client::to_string(s.kind),
                s.context.traceparent().c_str(), s.parent ? s.parent->traceparent().c_str() : "none");
    if (s.operation_type == "send") sent.insert(s.context.traceparent());
    if (s.operation_type == "process" && s.parent && sent.count(s.parent->traceparent())) ++processed_under_a_send;
  }
};

int main(int argc, char** argv) {
  const char* text = argc > 1 ? argv[1] : std::getenv("WARREN_URL");
  auto url = client::parse_url(text ? text : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;
  uv::UvDriver driver(uv_default_loop());
  auto metrics = std::make_shared<client::Metrics>();  // shared by every connection given it
  auto spans = std::make_shared<PrintSpans>();
  const auto trace = client::TraceContext::new_root();  // the span this program's work is in
  client::Consumer consumer;
  int settled = 0, traced = 0;
  auto ok = [](const auto& result) {
    if (!result) std::fprintf(stderr, "%s\n", result.error().to_string().c_str()), uv_stop(uv_default_loop());
    return result.ok();
  };
  std::shared_ptr<client::Connection> conn =
      client::Connection::connect(driver, *url, {.observer = spans, .metrics = metrics}, [&](Result<void> r) {
        if (!ok(r)) return;
        conn->open_channel([&](Result<client::Channel> ch) {
          if (!ok(ch)) return;
          ch->confirm_select([&](Result<void> r) { ok(r); });
          ch->queue_declare({.name = "metrics-example", .exclusive = true}, [&](Result<client::QueueDeclared> q) { ok(q); });
          for (int i = 0; i < 10; ++i)
            ch->publish({.routing_key = "metrics-example", .trace = trace}, "message " + std::to_string(i),
                        [&](Result<engine::PublishOutcome> r) { if (ok(r) && ++settled == 20) conn->close({}); });
          ch->consume({.queue = "metrics-example"}, [&](const client::Delivery& d) {
            if (d.trace() && d.trace()->trace_id == trace.trace_id) ++traced;  // the publish's span
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
  std::printf("%d of 10 deliveries carried the trace, %d processed under their publish's span; counted: %s\n", traced,
              spans->processed_under_a_send, counted ? "yes" : "no");
  return settled == 20 && traced == 10 && spans->processed_under_a_send == 10 && counted ? 0 : 1;
}

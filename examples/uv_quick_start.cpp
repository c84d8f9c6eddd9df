// The quick start on libuv: connect, declare a queue, confirm mode, publish 10 messages with
// a confirm each, consume them with a callback per message, ack each one, close.
// Usage: uv_quick_start [URL]   (else $WARREN_URL, else amqp://guest:guest@127.0.0.1:5672/%2f)
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
  client::Consumer consumer;  // the subscription lasts while this handle does
  int settled = 0;            // 10 confirms and 10 acks
  auto ok = [](const auto& result) {  // a failure is printed and stops the loop
    if (!result) std::fprintf(stderr, "%s\n", result.error().to_string().c_str()), uv_stop(uv_default_loop());
    return result.ok();
  };
  // Callbacks run on the loop, never inside the call that started them: `conn` is set by then.
  std::shared_ptr<client::Connection> conn = client::Connection::connect(driver, *url, {}, [&](Result<void> r) {
    if (!ok(r)) return;
    conn->open_channel([&](Result<client::Channel> ch) {
      if (!ok(ch)) return;
      // A channel answers in order: nothing below has to wait for the reply to what is above it.
      ch->confirm_select([&](Result<void> r) { ok(r); });
      ch->queue_declare({.name = "quick-start", .exclusive = true}, [&](Result<client::QueueDeclared> q) { ok(q); });
      for (int i = 0; i < 10; ++i)  // each publish's confirm (or failure) comes to its own callback
        ch->publish({.routing_key = "quick-start"}, "message " + std::to_string(i),
                    [&](Result<engine::PublishOutcome> r) { if (ok(r) && ++settled == 20) conn->close({}); });
      ch->consume({.queue = "quick-start"}, [&](const client::Delivery& d) {
        std::printf("received %.*s\n", static_cast<int>(d.body_text().size()), d.body_text().data());
        if (ok(d.ack()) && ++settled == 20) conn->close({});
      }, [&](Result<client::Consumer> c) { if (ok(c)) consumer = std::move(*c); });
    });
  });
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);  // returns once the connection is closed, or on a failure
  return settled == 20 ? 0 : 1;
}

// A consumer that outlives its connection. A Session dials, and after a loss dials again with
// backoff; its recovering channel runs the setup below on every new channel: declare the
// queue, subscribe. Publishes through the recovering channel wait while it is down (within
// their deadline). A delivery from a channel that is gone cannot be acked: ack() says so and
// the broker delivers the message again. Here: publish 100 messages, consume and ack them,
// delete the queue, close.
// Usage: uv_session_consumer [URL]   (else $WARREN_URL, else amqp://guest:guest@127.0.0.1:5672/%2f)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <warren/client/session.hpp>
#include <warren/uv/uv_driver.hpp>

using namespace warren;

int main(int argc, char** argv) {
  const char* text = argc > 1 ? argv[1] : std::getenv("WARREN_URL");
  auto url = client::parse_url(text ? text : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;

  constexpr int total = 100;
  // A queue of this run's own; x-expires removes it should the run die before deleting it.
  const std::string queue = "warren-session-example-" + std::to_string(getpid());
  uv::UvDriver driver(uv_default_loop());
  auto session = client::Session::start(driver, *url, {});
  client::Consumer consumer;  // the current channel's subscription
  int confirmed = 0, received = 0;
  bool failed = false, closing = false;
  auto close = [&] {
    closing = true;
    session->close([](Result<void>) {});
  };
  auto fail = [&](const Error& e) {
    if (!failed) std::fprintf(stderr, "uv_session_consumer: %s\n", e.to_string().c_str());
    failed = true;
    close();
  };
  session->on_status = [&](const client::Session::Status& s) {
    if (s.state == client::Session::State::reconnecting && s.last_cause)
      std::printf("connection lost (%s); retry %u in %lld ms\n", s.last_cause->to_string().c_str(), s.attempt,
                  static_cast<long long>(s.delay.count()));
    // A permanent failure (refused login, missing vhost) ends the session without our close.
    if (s.state == client::Session::State::closed && !closing)
      fail(s.last_cause ? *s.last_cause : make_error(errc::connection_closed, "the session closed"));
  };

  std::shared_ptr<client::RecoveringChannel> rc;
  auto maybe_done = [&] {
    if (confirmed < total || received < total) return;
    rc->channel().queue_delete({.queue = queue}, [&](Result<std::uint32_t>) { close(); });
  };
  // Runs on each new channel (after confirm.select); done with success marks it ready.
  rc = session->channel([&](client::RecoveringChannel& channel, client::Callback<void> done) {
    client::Channel ch = channel.channel();
    ch.queue_declare({.name = queue, .arguments = {{"x-expires", std::int32_t{60000}}}},
                     [&, ch, done](Result<client::QueueDeclared> q) {
                       if (!q) return done(q.error());
                       ch.consume(
                           {.queue = queue, .prefetch = 20},
                           [&](const client::Delivery& d) {
                             // Refused (and redelivered by the broker) if its channel is gone.
                             if (d.ack() && ++received == total) maybe_done();
                           },
                           [&, done](Result<client::Consumer> c) {
                             if (!c) return done(c.error());
                             consumer = std::move(*c);  // replaces (and so cancels) an earlier one
                             done(Result<void>());
                           });
                     });
  });

  // Sent once the channel is ready; each waits at most 10 s (for the channel, the write and
  // the broker's confirm).
  for (int i = 0; i < total; ++i) {
    const std::string body = "event " + std::to_string(i);
    rc->publish({.routing_key = queue, .timeout = std::chrono::seconds(10)}, body,
                [&](Result<engine::PublishOutcome> outcome) {
                  if (!outcome) return fail(outcome.error());
                  ++confirmed;
                  maybe_done();
                });
  }

  auto watchdog = driver.timer([&] { fail(make_error(errc::timeout, "not done within 30 s")); });
  watchdog->arm(driver.now() + std::chrono::seconds(30));
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);  // returns once the session is closed
  std::printf("%d confirmed, %d received and acked\n", confirmed, received);
  return !failed && confirmed == total && received == total ? 0 : 1;
}

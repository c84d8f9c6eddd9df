// A short libuv program: publish 10 messages with confirms, consume them with acks, close.
// Usage: uv_publish_consume [URL]   (default amqp://guest:guest@127.0.0.1:5672/%2f)
#include <uv.h>

#include <cstdio>
#include <string>

#include <warren/client/connection.hpp>
#include <warren/uv/uv_driver.hpp>

using namespace warren;

int main(int argc, char** argv) {
  auto url = client::parse_url(argc > 1 ? argv[1] : "amqp://guest:guest@127.0.0.1:5672/%2f");
  if (!url.ok()) return std::fprintf(stderr, "%s\n", url.error().to_string().c_str()), 2;

  uv::UvDriver driver(uv_default_loop());
  std::shared_ptr<client::Connection> conn;
  int confirmed = 0, received = 0, status = 1;
  std::string queue;

  conn = client::Connection::connect(driver, *url, {}, [&](const Error* e) {
    if (e) return (void)std::fprintf(stderr, "connect: %s\n", e->to_string().c_str());
    conn->open_channel([&](const Error*, engine::ChannelId ch) {
      conn->confirm_select(ch, [](const Error*, const wire::Method*) {});
      conn->queue_declare(ch, wire::QueueDeclare{"", false, false, true, true}, [&, ch](const Error*, const wire::Method* m) {
        queue = std::string(std::get<wire::QueueDeclareOk>(*m).queue);
        for (int i = 0; i < 10; ++i) {
          std::string body = "message " + std::to_string(i);
          conn->publish(ch, wire::BasicPublish{"", queue}, {}, std::as_bytes(std::span{body.data(), body.size()}),
                        [&](engine::PublishOutcome o, const Error&) { confirmed += o == engine::PublishOutcome::confirmed; });
        }
        conn->consume(ch, wire::BasicConsume{queue}, std::nullopt,
                      [&](const engine::Message& m) {
                        std::printf("received %.*s\n", static_cast<int>(m.body.size()), reinterpret_cast<const char*>(m.body.data()));
                        (void)conn->ack(m.channel, m.delivery_tag);
                        if (++received == 10) {
                          std::printf("%d confirmed, %d received\n", confirmed, received);
                          status = confirmed == 10 ? 0 : 1;
                          conn->close([](const Error*) {});
                        }
                      },
                      [](const Error*, const wire::Method*) {});
      });
    });
  });
  uv_run(uv_default_loop(), UV_RUN_DEFAULT);  // ends when the connection is closed
  return status;
}

// Rule: a connected engine fed arbitrary broker bytes, interleaved with arbitrary commands and
// time steps, never reads out of bounds, never hangs, and never misbehaves after its latch:
// once Closed is reported, error() holds that cause, every command returns exactly it, and
// no other event follows. Every view in every event is read (ASan checks it is still valid).
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "fuzz_common.hpp"
#include "warren/engine/connection.hpp"
#include "warren/engine/describe.hpp"

namespace {

using namespace warren;
using namespace warren::wire;
using engine::Instant;

std::vector<std::byte> handshake_bytes() {
  OutputQueue q;
  (void)write_method_frame(q, 0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"}, 0);
  (void)write_method_frame(q, 0, ConnectionTune{8, 4096, 5}, 0);
  (void)write_method_frame(q, 0, ConnectionOpenOk{}, 0);
  return q.to_vector();
}

struct Checker {
  engine::Connection& c;
  std::optional<Error> closed;
  std::size_t sink = 0;

  void touch(std::string_view s) {
    for (char ch : s) sink += static_cast<unsigned char>(ch);
  }
  void touch(std::span<const std::byte> b) {
    for (std::byte x : b) sink += std::to_integer<unsigned>(x);
  }
  void drain() {
    for (int guard = 0; guard < 100000; ++guard) {
      auto e = c.poll_event();
      if (!e) return;
      if (closed) {  // nothing after Closed
        std::fprintf(stderr, "event after closed(%s): %s\n", closed->to_string().c_str(), engine::to_string(*e).c_str());
        std::abort();
      }
      std::visit(
          [&](const auto& ev) {
            using E = std::decay_t<decltype(ev)>;
            if constexpr (std::is_same_v<E, engine::Delivery> || std::is_same_v<E, engine::GetOk> ||
                          std::is_same_v<E, engine::Returned>) {
              touch(ev.message.consumer_tag);
              touch(ev.message.exchange);
              touch(ev.message.routing_key);
              touch(ev.message.body);
              if (ev.message.properties) touch(to_string(*ev.message.properties));
            } else if constexpr (std::is_same_v<E, engine::Closed>) {
              closed = ev.cause;
            }
          },
          *e);
      touch(engine::to_string(*e));
    }
    std::abort();  // an endless stream of events from finite input is a hang
  }
  void check_latch(const Error* returned) {
    if (!closed) return;
    if (!c.error() || !(*c.error() == *closed)) std::abort();
    if (returned && !(*returned == *closed)) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Instant now{};
  engine::ConnectionOptions options;
  options.output_limit_bytes = 8192;
  engine::Connection c(options, now);
  Checker check{c};
  static const auto handshake = handshake_bytes();
  c.handle_bytes(handshake, now);
  check.drain();
  (void)c.open_channel(now);

  std::size_t at = 0;
  auto byte = [&]() -> std::uint8_t { return at < size ? data[at++] : 0; };
  std::string body = "body";
  auto body_bytes = std::as_bytes(std::span{body.data(), body.size()});
  int steps = 0;
  while (at < size && ++steps < 2000) {
    const std::uint8_t op = byte();
    const engine::ChannelId ch = static_cast<engine::ChannelId>(1 + byte() % 3);
    const Error* err = nullptr;
    std::optional<Error> held;
    auto note = [&](const auto& r) {
      if (!r.ok()) {
        held = r.error();
        err = &*held;
      }
    };
    switch (op % 12) {
      case 0:
      case 1:
      case 2: {  // broker bytes
        std::size_t n = std::min<std::size_t>(byte() + 1, size - at);
        c.handle_bytes(std::span(reinterpret_cast<const std::byte*>(data) + at, n), now);
        at += n;
        break;
      }
      case 3: now += std::chrono::milliseconds(byte() * 100); c.handle_timeout(now); break;
      case 4: note(c.open_channel(now)); break;
      case 5: note(c.queue_declare(ch, QueueDeclare{"q"}, now)); break;
      case 6: note(c.publish(ch, BasicPublish{"", "q", (op & 16) != 0}, {}, body_bytes, now)); break;
      case 7: note(c.basic_consume(ch, BasicConsume{"q", (op & 16) ? "t" : ""}, std::nullopt, now)); break;
      case 8: note(c.ack(ch, wire::BasicAck{.delivery_tag = byte(), .multiple = (op & 16) != 0})); break;
      case 9: note(c.confirm_select(ch, now)); break;
      case 10: note((op & 16) ? c.close_channel(ch, now) : c.basic_cancel(ch, "t", now)); break;
      case 11:
        if (op & 16) note(c.close(now));
        else if (op & 64) note(c.update_secret("token", "refresh", now));
        else c.consume_output(c.pending_output_bytes() / 2 + 1);
        break;
    }
    check.drain();
    check.check_latch(err);
    if (op & 32) c.consume_output(c.pending_output_bytes());
  }
  c.handle_eof(now);
  check.drain();
  if (!check.closed) std::abort();  // a lost stream always ends the connection
  check.check_latch(nullptr);
  return static_cast<int>(check.sink & 0);
}

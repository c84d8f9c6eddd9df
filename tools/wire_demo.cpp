// warren-wire-demo: the codec against a real RabbitMQ. Handshakes, declares a queue, publishes
// N confirmed messages, consumes and acknowledges them, and prints what happened and the rates.
// Usage: warren-wire-demo --port PORT [--count N] [--size BYTES]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "wire/blocking_session.hpp"

using namespace warren;
using namespace warren::wire;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void fail(const char* what, const Error& e) {
  std::fprintf(stderr, "warren-wire-demo: %s: %s\n", what, e.to_string().c_str());
  std::exit(1);
}

template <class T>
T check(const char* what, Result<T> r) {
  if (!r.ok()) fail(what, r.error());
  if constexpr (!std::is_void_v<T>) return std::move(r).value();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  tools::SessionOptions options;
  std::uint64_t count = 100000;
  std::size_t size = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--port")) options.port = static_cast<std::uint16_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--count")) count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--size")) size = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: warren-wire-demo --port PORT [--count N] [--size BYTES]\n");
      return 2;
    }
  }

  auto session = check("connect", tools::BlockingSession::connect(options));
  const auto& hs = session.handshake();
  const FieldValue* product = hs.server_properties.find("product");
  const FieldValue* version = hs.server_properties.find("version");
  std::printf("connected to %s %s on 127.0.0.1:%u (mechanisms: %s)\n",
              product ? std::get<std::string>(product->value).c_str() : "?",
              version ? std::get<std::string>(version->value).c_str() : "?", options.port,
              hs.mechanisms.c_str());
  std::printf("tuned: channel_max %u, frame_max %u\n", hs.agreed.channel_max, hs.agreed.frame_max);

  check("channel.open", session.send(1, ChannelOpen{}));
  check("channel.open-ok", session.receive_method(1));
  check("confirm.select", session.send(1, ConfirmSelect{}));
  check("confirm.select-ok", session.receive_method(1));
  check("queue.declare", session.send(1, QueueDeclare{.exclusive = true, .auto_delete = true}));  // the broker names it
  auto declared = check("queue.declare-ok", session.receive_method(1));
  std::string queue(std::get<QueueDeclareOk>(declared).queue);
  std::printf("declared %s\n", queue.c_str());

  // Publish with at most `window` unconfirmed; confirms arrive as basic.ack (multiple).
  std::string body(size, 'w');
  auto body_bytes = std::as_bytes(std::span{body.data(), body.size()});
  const std::uint64_t window = 1000;
  std::uint64_t sent = 0, confirmed = 0, nacked = 0;
  std::uint64_t settled = 0;  // highest publish number settled; RabbitMQ settles in order
  auto t0 = Clock::now();
  while (confirmed + nacked < count) {
    while (sent < count && sent - confirmed - nacked < window) {
      check("publish", session.queue_publish(1, BasicPublish{.routing_key = queue}, BasicProperties{}, body_bytes));
      ++sent;
    }
    check("flush", session.flush());
    auto m = check("confirm", session.receive_method(1));
    if (auto* ack = std::get_if<BasicAck>(&m)) {
      confirmed += ack->multiple ? ack->delivery_tag - settled : 1;
      settled = ack->multiple ? ack->delivery_tag : settled + 1;
    } else if (auto* nack = std::get_if<BasicNack>(&m)) {
      nacked += nack->multiple ? nack->delivery_tag - settled : 1;
      settled = nack->multiple ? nack->delivery_tag : settled + 1;
    }
  }
  double publish_s = seconds_since(t0);
  std::printf("published %llu x %zu B, %llu confirmed, %llu nacked in %.3f s (%.0f msg/s)\n",
              static_cast<unsigned long long>(sent), size, static_cast<unsigned long long>(confirmed),
              static_cast<unsigned long long>(nacked), publish_s, static_cast<double>(sent) / publish_s);

  check("basic.qos", session.send(1, BasicQos{.prefetch_count = 500}));
  check("basic.qos-ok", session.receive_method(1));
  check("basic.consume", session.send(1, BasicConsume{.queue = queue}));
  check("basic.consume-ok", session.receive_method(1));
  std::uint64_t received = 0, body_bytes_seen = 0, last_tag = 0;
  auto t1 = Clock::now();
  while (received < sent) {
    auto frame = check("receive", session.receive());
    if (frame.type == FrameType::method) {
      auto m = check("decode", decode_method(frame.payload));
      if (auto* d = std::get_if<BasicDeliver>(&m)) last_tag = d->delivery_tag;
    } else if (frame.type == FrameType::header) {
      auto h = check("content header", decode_content_header(frame.payload));
      if (h.body_size == 0) ++received;
    } else if (frame.type == FrameType::body) {
      body_bytes_seen += frame.payload.size();
      ++received;  // one body frame per message at this size
      if (received % 100 == 0 || received == sent)
        check("basic.ack", session.send(1, BasicAck{.delivery_tag = last_tag, .multiple = true}));
    }
  }
  double consume_s = seconds_since(t1);
  std::printf("consumed %llu messages (%llu body bytes), acked every 100, in %.3f s (%.0f msg/s)\n",
              static_cast<unsigned long long>(received), static_cast<unsigned long long>(body_bytes_seen),
              consume_s, static_cast<double>(received) / consume_s);
  std::printf("codec: decoded %llu frames from %llu bytes without an error\n",
              static_cast<unsigned long long>(session.frames_received()),
              static_cast<unsigned long long>(session.bytes_received()));
  check("close", session.close());
  std::printf("closed cleanly\n");
  return 0;
}

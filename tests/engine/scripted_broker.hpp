// A scripted broker for engine tests: it plays RabbitMQ's side byte for byte, reads what the
// engine wrote as text ("ch1 queue.declare(...)"), logs events as text, and owns a virtual
// clock. every_split() re-runs a script with the broker's byte stream cut at every offset:
// the engine must behave the same wherever a read ends.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/hex.hpp"
#include "warren/engine/connection.hpp"
#include "warren/engine/describe.hpp"
#include "warren/wire/wire.hpp"

namespace warren::test {

using namespace std::chrono_literals;

inline engine::ConnectionOptions default_options() {
  engine::ConnectionOptions o;
  o.password = "s3cret";
  return o;
}

class ScriptedBroker {
 public:
  explicit ScriptedBroker(std::optional<std::size_t> split_at = std::nullopt,
                          engine::ConnectionOptions options = default_options())
      : conn(std::move(options), engine::Instant{} + 1000s), now(engine::Instant{} + 1000s), split_at_(split_at) {}

  engine::Connection conn;
  engine::Instant now;
  bool hold_output = false;  // leave the engine's output unwritten until flush()

  // ---- the broker speaks
  void send(std::uint16_t channel, const wire::Method& m) {
    wire::OutputQueue q;
    auto r = wire::write_method_frame(q, channel, m, 0);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    feed(q.to_vector());
  }
  void send_content(std::uint16_t channel, const wire::Method& m, std::string_view body,
                    const wire::BasicProperties& props = {}, std::uint32_t frame_max = 131072) {
    wire::OutputQueue q;
    auto bytes = std::as_bytes(std::span{body.data(), body.size()});
    auto r = std::visit([&](const auto& x) { return wire::write_content(q, channel, x, props, bytes, frame_max); }, m);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    feed(q.to_vector());
  }
  void send_heartbeat() {
    wire::OutputQueue q;
    wire::write_heartbeat(q);
    feed(q.to_vector());
  }
  void send_raw(const std::vector<std::byte>& bytes) { feed(bytes); }
  void eof() {
    conn.handle_eof(now);
    drain();
  }

  // ---- what the engine wrote
  void flush() {
    while (conn.pending_output().count != 0) {
      auto v = conn.pending_output();
      std::vector<std::byte> bytes;
      for (auto part : v) bytes.insert(bytes.end(), part.begin(), part.end());
      conn.consume_output(bytes.size());
      written_ += bytes.size();
      client_decoder_.feed(bytes);
      for (;;) {
        auto f = client_decoder_.next();
        if (!f.ok()) {
          sent_.push_back("undecodable: " + f.error().to_string());
          break;
        }
        if (!f->has_value()) break;
        sent_.push_back(describe(**f));
      }
    }
    drain();  // writing may settle publishes
  }
  std::string next_sent() {
    if (!hold_output) flush();
    if (sent_.empty()) return "<nothing sent>";
    auto s = sent_.front();
    sent_.pop_front();
    return s;
  }
  void expect_sent(std::string_view text) { EXPECT_EQ(next_sent(), text); }
  void expect_nothing_sent() {
    if (!hold_output) flush();
    EXPECT_TRUE(sent_.empty()) << "sent: " << sent_.front();
  }
  std::size_t written_bytes() const { return written_; }

  // ---- what the engine reported
  std::string next_event() {
    drain();
    if (events_.empty()) return "<no event>";
    auto s = events_.front();
    events_.pop_front();
    return s;
  }
  void expect_event(std::string_view text) { EXPECT_EQ(next_event(), text); }
  void expect_no_event() {
    drain();
    EXPECT_TRUE(events_.empty()) << "event: " << events_.front();
  }

  // ---- time
  void advance(std::chrono::milliseconds d) {
    now += d;
    conn.handle_timeout(now);
    drain();
  }

  // ---- common openings
  static wire::FieldTable server_properties() {
    wire::FieldTable t;
    t.set("product", std::string("RabbitMQ")).set("version", std::string("3.10.8"));
    return t;
  }
  void connect(std::uint16_t heartbeat_s = 60, std::uint16_t channel_max = 2047, std::uint32_t frame_max = 131072) {
    expect_sent("protocol-header");
    auto props = server_properties();
    send(0, wire::ConnectionStart{0, 9, props, "AMQPLAIN PLAIN", "en_US"});
    auto start_ok = next_sent();
    EXPECT_EQ(start_ok.rfind("ch0 connection.start-ok(", 0), 0u) << start_ok;
    send(0, wire::ConnectionTune{channel_max, frame_max, heartbeat_s});
    next_sent();  // tune-ok
    expect_sent("ch0 connection.open(virtual_host=\"/\")");
    send(0, wire::ConnectionOpenOk{});
    auto connected = next_event();
    EXPECT_EQ(connected.rfind("connected(", 0), 0u) << connected;
  }
  engine::ChannelId open_channel() {
    auto ch = conn.open_channel(now);
    EXPECT_TRUE(ch.ok());
    expect_sent("ch" + std::to_string(*ch) + " channel.open()");
    send(*ch, wire::ChannelOpenOk{});
    expect_event("channel-opened(ch" + std::to_string(*ch) + ")");
    return *ch;
  }

  // A subscription on `channel` to queue "q" with the engine's default qos, answered by the
  // broker; what the engine sent for it is read.
  void subscribe(engine::ChannelId channel, std::string_view tag, bool no_ack = false) {
    auto r = conn.basic_consume(channel, wire::BasicConsume{"q", tag, false, no_ack}, std::nullopt, now);
    ASSERT_TRUE(r.ok());
    next_sent();  // basic.qos
    next_sent();  // basic.consume
    send(channel, wire::BasicQosOk{});
    send(channel, wire::BasicConsumeOk{tag});
    expect_event("done(ch" + std::to_string(channel) + " #" + std::to_string(*r) +
                 " basic.consume-ok(consumer_tag=" + wire::quote(tag) + "))");
  }

  std::size_t fed() const { return fed_; }

  static std::string describe(const wire::FrameView& f) {
    const std::string ch = "ch" + std::to_string(f.channel) + " ";
    switch (f.type) {
      case wire::FrameType::protocol_header: return "protocol-header";
      case wire::FrameType::heartbeat: return "heartbeat";
      case wire::FrameType::method: {
        auto m = wire::decode_method(f.payload);
        return m.ok() ? ch + wire::to_string(*m) : "undecodable method: " + m.error().to_string();
      }
      case wire::FrameType::header: {
        auto h = wire::decode_content_header(f.payload);
        return h.ok() ? ch + "header(size=" + std::to_string(h->body_size) + ", " + wire::to_string(h->properties) + ")"
                      : "undecodable header";
      }
      case wire::FrameType::body:
        return ch + "body(" + wire::quote({reinterpret_cast<const char*>(f.payload.data()), f.payload.size()}) + ")";
    }
    return "?";
  }

 private:
  void feed(const std::vector<std::byte>& bytes) {
    std::size_t from = 0;
    if (split_at_ && *split_at_ > fed_ && *split_at_ < fed_ + bytes.size()) {
      from = *split_at_ - fed_;
      conn.handle_bytes(std::span(bytes).first(from), now);
      drain();
    }
    conn.handle_bytes(std::span(bytes).subspan(from), now);
    drain();
    fed_ += bytes.size();
  }
  void drain() {
    while (auto e = conn.poll_event()) {
      if (const auto* p = std::get_if<engine::PublishDone>(&*e)) publish_done.push_back(*p);
      events_.push_back(engine::to_string(*e));
    }
  }

 public:
  std::vector<engine::PublishDone> publish_done;  // every publish outcome, as reported

 private:

  std::optional<std::size_t> split_at_;
  std::size_t fed_ = 0;
  std::size_t written_ = 0;
  std::deque<std::string> events_;
  std::deque<std::string> sent_;
  wire::FrameDecoder client_decoder_{wire::FrameDecoder::Peer::client, 0};
};

// Runs `script` once whole, then once for every byte offset of the broker's stream, cut there.
inline void every_split(const std::function<void(ScriptedBroker&)>& script,
                        engine::ConnectionOptions options = default_options()) {
  std::size_t total = 0;
  {
    ScriptedBroker whole(std::nullopt, options);
    script(whole);
    total = whole.fed();
  }
  EXPECT_GT(total, 1u) << "the script sent no broker bytes to cut";
  if (::testing::Test::HasFailure()) return;
  for (std::size_t cut = 1; cut < total; ++cut) {
    SCOPED_TRACE("broker bytes cut at offset " + std::to_string(cut) + " of " + std::to_string(total));
    ScriptedBroker split(cut, options);
    script(split);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace warren::test

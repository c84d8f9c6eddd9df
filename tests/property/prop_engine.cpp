// Model-based properties of the engine: random sequences of commands and broker replies
// (answers, out-of-order and multiple confirms, nacks, channel and connection closes,
// timeouts) checked against what must hold: no answer settles the wrong request, every
// publish settles exactly once (confirmed only if the broker acked it), and after the latch
// nothing but the latched error comes out.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>

#include "warren/engine/connection.hpp"
#include "warren/wire/wire.hpp"

namespace warren::test {
namespace {

using namespace wire;
using namespace std::chrono_literals;
using engine::ChannelId;

// The broker's side: reads what the engine wrote and remembers what it must answer.
struct BrokerModel {
  FrameDecoder decoder{FrameDecoder::Peer::client, 0};
  std::map<ChannelId, std::vector<std::string>> declares;  // queue names asked, in order
  std::map<ChannelId, bool> confirm_mode;
  std::map<ChannelId, std::uint64_t> published;  // publishes seen since confirm.select
  std::map<ChannelId, std::uint64_t> unsettled_upto_seen;

  void read(engine::Connection& c) {
    while (c.pending_output_bytes()) {
      std::vector<std::byte> bytes;
      for (auto part : c.pending_output()) bytes.insert(bytes.end(), part.begin(), part.end());
      c.consume_output(bytes.size());
      decoder.feed(bytes);
      for (;;) {
        auto f = decoder.next();
        RC_ASSERT(f.ok());
        if (!f->has_value()) break;
        const auto& frame = **f;
        if (frame.type != FrameType::method) continue;
        auto m = decode_method(frame.payload);
        RC_ASSERT(m.ok());
        if (auto* d = std::get_if<QueueDeclare>(&*m)) declares[frame.channel].emplace_back(d->queue);
        if (std::holds_alternative<ConfirmSelect>(*m)) confirm_mode[frame.channel] = true;
        if (std::holds_alternative<BasicPublish>(*m) && confirm_mode[frame.channel]) ++published[frame.channel];
        if (std::holds_alternative<ChannelClose>(*m)) declares[frame.channel].clear();
      }
    }
  }
};

// A choice in [lo, hi) not scaled by rapidcheck's size (inRange is), so that "rarely" means
// rarely in every test case, small or large.
template <class T = int>
T pick(T lo, T hi) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(lo, hi));
}

std::vector<std::byte> frame_bytes(ChannelId ch, const Method& m) {
  OutputQueue q;
  (void)write_method_frame(q, ch, m, 0);
  return q.to_vector();
}

struct Run {
  engine::Instant now = engine::Instant{} + 1000s;
  engine::Connection conn{engine::ConnectionOptions{}, now};
  BrokerModel broker;
  std::map<engine::RequestId, std::string> asked;  // declare request -> queue name
  std::set<engine::RequestId> open_requests;
  std::map<ChannelId, std::set<engine::PublishId>> pending_publishes;
  std::map<engine::PublishId, std::uint64_t> seq_of;  // confirm-mode publishes: their number
  std::map<ChannelId, std::set<std::uint64_t>> acked_seqs;  // what the broker acked
  std::map<ChannelId, std::map<std::uint64_t, engine::PublishId>> publish_of_seq;
  std::map<ChannelId, std::uint64_t> next_seq;
  std::optional<Error> closed;
  int counter = 0;

  void feed(const std::vector<std::byte>& b) {
    conn.handle_bytes(b, now);
    drain();
  }
  void drain() {
    while (auto e = conn.poll_event()) {
      RC_ASSERT(!closed);  // nothing after Closed
      std::visit([&](const auto& ev) { on(ev); }, *e);
    }
    broker.read(conn);
  }
  template <class E>
  void on(const E&) {}
  void on(const engine::Closed& e) { closed = e.cause; }
  void on(const engine::RequestDone& e) {
    RC_ASSERT(open_requests.erase(e.request) == 1u);
    if (auto* ok = std::get_if<QueueDeclareOk>(&e.reply)) {
      RC_ASSERT(asked.count(e.request) == 1u);
      RC_ASSERT(std::string(ok->queue) == asked[e.request]);  // never another request's answer
    }
  }
  void on(const engine::RequestFailed& e) { RC_ASSERT(open_requests.erase(e.request) == 1u); }
  void on(const engine::PublishDone& e) {
    auto& pending = pending_publishes[e.channel];
    int settled = 0;
    for (auto it = pending.lower_bound(e.first); it != pending.end() && *it <= e.last;) {
      const engine::PublishId id = *it;
      if (e.outcome == engine::PublishOutcome::confirmed) {
        RC_ASSERT(seq_of.count(id) == 1u);
        RC_ASSERT(acked_seqs[e.channel].count(seq_of[id]) == 1u);  // only what the broker acked
      }
      it = pending.erase(it);
      ++settled;
    }
    RC_ASSERT(settled > 0);  // no event settles nothing, nothing settles twice
  }

  void connect() {
    broker.read(conn);
    feed(frame_bytes(0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"}));
    feed(frame_bytes(0, ConnectionTune{16, 131072, 0}));
    feed(frame_bytes(0, ConnectionOpenOk{}));
    for (ChannelId ch = 1; ch <= 3; ++ch) {
      RC_ASSERT(conn.open_channel(now).ok());
      broker.read(conn);
      feed(frame_bytes(ch, ChannelOpenOk{}));
      if (ch != 3) {  // channels 1 and 2 confirm; 3 does not
        auto r = conn.confirm_select(ch, now);
        RC_ASSERT(r.ok());
        open_requests.insert(*r);
        next_seq[ch] = 1;
        broker.read(conn);
        feed(frame_bytes(ch, ConfirmSelectOk{}));
      }
    }
  }

  void check_command(const Error* err) {
    if (closed && err) RC_ASSERT(*err == *closed);
  }

  void step() {
    const ChannelId ch = pick<ChannelId>(1, 4);
    // rapidcheck scales inRange with its size; the choice of step should not be.
    switch (pick(0, 11)) {
      case 0: {  // declare
        std::string name = "q" + std::to_string(++counter);
        auto r = conn.queue_declare(ch, QueueDeclare{name}, now);
        if (r.ok()) {
          asked[*r] = name;
          open_requests.insert(*r);
        } else {
          check_command(&r.error());
        }
        break;
      }
      case 1:
      case 2: {  // publish
        std::string body = "m";
        auto r = conn.publish(ch, BasicPublish{"", "q"}, {}, std::as_bytes(std::span{body.data(), 1}), now);
        if (r.ok()) {
          pending_publishes[ch].insert(*r);
          if (next_seq.count(ch)) {
            seq_of[*r] = next_seq[ch];
            publish_of_seq[ch][next_seq[ch]++] = *r;
          }
        } else {
          check_command(&r.error());
        }
        break;
      }
      case 3: {  // the broker answers the oldest declare on the channel
        auto& q = broker.declares[ch];
        if (!q.empty()) {
          auto name = q.front();
          q.erase(q.begin());
          feed(frame_bytes(ch, QueueDeclareOk{name, 0, 0}));
        }
        break;
      }
      case 4:
      case 5:
      case 10: {  // the broker confirms: any publish it saw, single or multiple, ack or nack
        const std::uint64_t seen = broker.published[ch];
        if (seen == 0) break;
        const std::uint64_t tag = pick<std::uint64_t>(1, seen + 1);
        const bool multiple = *rc::gen::arbitrary<bool>();
        const bool ack = pick(0, 4) != 0;
        if (ack) {
          for (std::uint64_t s = multiple ? 1 : tag; s <= tag; ++s) acked_seqs[ch].insert(s);
        }
        feed(frame_bytes(ch, ack ? Method{BasicAck{tag, multiple}} : Method{BasicNack{tag, multiple, true}}));
        break;
      }
      case 6:  // time passes; requests and confirms may time out
        // Mostly short steps; now and then one long enough to time requests and confirms out.
        now += std::chrono::milliseconds(pick(0, 10) == 0 ? 12000 : pick(0, 1500));
        conn.handle_timeout(now);
        drain();
        break;
      case 7:  // rarely, the broker closes a channel
        if (pick(0, 8) == 0) feed(frame_bytes(ch, ChannelClose{406, "PRECONDITION_FAILED", 0, 0}));
        break;
      case 8:  // rarely, the connection ends
        if (pick(0, 60) == 0) {
          conn.handle_eof(now);
          drain();
        }
        break;
      default:
        drain();
    }
  }
};

RC_GTEST_PROP(EngineModel, NoMispairingEveryPublishSettlesOnceLatchHolds, ()) {
  Run run;
  run.connect();
  const int steps = pick(1, 150);
  for (int i = 0; i < steps; ++i) run.step();
  RC_CLASSIFY(run.closed.has_value(), "connection ended mid-run");
  RC_CLASSIFY(run.acked_seqs[1].size() + run.acked_seqs[2].size() > 3, "several confirms");
  RC_CLASSIFY(run.asked.size() > 3, "several declares");
  // The end of the stream settles everything still open, with one cause.
  run.conn.handle_eof(run.now);
  run.drain();
  RC_ASSERT(run.closed.has_value());
  RC_ASSERT(run.open_requests.empty());
  for (const auto& [ch, pending] : run.pending_publishes) RC_ASSERT(pending.empty());
  auto after = run.conn.queue_declare(1, QueueDeclare{"late"}, run.now);
  RC_ASSERT(!after.ok());
  RC_ASSERT(after.error() == *run.closed);
}

}  // namespace
}  // namespace warren::test

// The engine end to end, against a broker played from memory (no sockets): publish 64 B with
// and without confirms, and consume 64 B deliveries with a multiple-ack every 100. Reports
// ns per message (Google Benchmark's time per iteration) and heap allocations per message.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "warren/engine/connection.hpp"
#include "warren/wire/wire.hpp"

namespace {

using namespace warren;
using namespace warren::wire;
using engine::Instant;

constexpr std::size_t write_chunk = 64 * 1024;

std::vector<std::byte> frames(const std::vector<std::pair<std::uint16_t, Method>>& methods) {
  OutputQueue q;
  for (const auto& [ch, m] : methods) (void)write_method_frame(q, ch, m, 0);
  return q.to_vector();
}

void feed(engine::Connection& c, std::span<const std::byte> bytes, Instant now) {
  c.handle_bytes(bytes, now);
  while (auto e = c.poll_event()) benchmark::DoNotOptimize(e);
}

// A connection past its handshake with channel 1 open (and in confirm mode if asked).
engine::Connection connected(bool confirms, Instant now) {
  engine::Connection c(engine::ConnectionOptions{}, now);
  c.consume_output(c.pending_output_bytes());
  feed(c, frames({{0, ConnectionStart{0, 9, {}, "PLAIN", "en_US"}}, {0, ConnectionTune{2047, 131072, 0}},
                  {0, ConnectionOpenOk{}}}),
       now);
  (void)c.open_channel(now);
  feed(c, frames({{1, ChannelOpenOk{}}}), now);
  if (confirms) {
    (void)c.confirm_select(1, now);
    feed(c, frames({{1, ConfirmSelectOk{}}}), now);
  }
  c.consume_output(c.pending_output_bytes());
  return c;
}

void drain_output(engine::Connection& c) {
  while (auto n = c.pending_output_bytes()) c.consume_output(n);
  while (auto e = c.poll_event()) benchmark::DoNotOptimize(e);
}

void report(benchmark::State& state, std::size_t allocs_before) {
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs_per_msg"] =
      static_cast<double>(bench::allocations - allocs_before) / static_cast<double>(state.iterations());
}

void BM_PublishWithoutConfirms(benchmark::State& state) {
  Instant now{};
  auto c = connected(false, now);
  std::string body(64, 'p');
  auto bytes = std::as_bytes(std::span{body.data(), body.size()});
  const BasicPublish publish{"", "queue1"};
  const BasicProperties props{};
  for (int i = 0; i < 20000; ++i) (void)c.publish(1, publish, props, bytes, now);  // warm the rings and blocks
  drain_output(c);
  const std::size_t allocs_before = bench::allocations;
  for (auto _ : state) {
    auto p = c.publish(1, publish, props, bytes, now);
    benchmark::DoNotOptimize(p);
    if (c.pending_output_bytes() >= write_chunk) drain_output(c);  // the driver's write, once per turn
  }
  drain_output(c);
  report(state, allocs_before);
}
BENCHMARK(BM_PublishWithoutConfirms);

void BM_PublishWithConfirms(benchmark::State& state) {
  Instant now{};
  auto c = connected(true, now);
  std::string body(64, 'p');
  auto bytes = std::as_bytes(std::span{body.data(), body.size()});
  const BasicPublish publish{"", "queue1"};
  const BasicProperties props{};
  std::uint64_t seq = 0;
  std::vector<std::byte> ack(64);
  auto confirm_upto = [&](std::uint64_t tag) {  // the broker's multiple ack, as it sends them
    Writer w(ack.data());
    w.u8(1);
    w.u16(1);
    w.u32(13);
    w.u16(60);
    w.u16(80);
    w.u64(tag);
    w.u8(1);
    w.u8(0xCE);
    feed(c, std::span(ack).first(21), now);
  };
  for (int i = 0; i < 20000; ++i) {
    (void)c.publish(1, publish, props, bytes, now);
    if (++seq % 100 == 0) confirm_upto(seq);
  }
  drain_output(c);
  const std::size_t allocs_before = bench::allocations;
  for (auto _ : state) {
    auto p = c.publish(1, publish, props, bytes, now);
    benchmark::DoNotOptimize(p);
    if (++seq % 100 == 0) {
      confirm_upto(seq);
      drain_output(c);
    }
  }
  confirm_upto(seq);
  drain_output(c);
  report(state, allocs_before);
}
BENCHMARK(BM_PublishWithConfirms);

void BM_ConsumeWithAckEvery100(benchmark::State& state) {
  Instant now{};
  auto c = connected(false, now);
  (void)c.basic_consume(1, BasicConsume{"queue1", "consumer-1"}, std::uint16_t{500}, now);
  feed(c, frames({{1, BasicQosOk{}}, {1, BasicConsumeOk{"consumer-1"}}}), now);
  drain_output(c);
  // 100,000 deliveries, fed in 64 KiB reads as a driver would.
  constexpr std::uint64_t n = 100000;
  OutputQueue q;
  std::string body(64, 'm');
  auto bytes = std::as_bytes(std::span{body.data(), body.size()});
  for (std::uint64_t tag = 1; tag <= n; ++tag)
    (void)write_content(q, 1, BasicDeliver{"consumer-1", tag, false, "", "queue1"}, {}, bytes, 131072);
  const auto stream = q.to_vector();
  std::size_t at = 0;
  std::uint64_t delivered = 0;
  const std::size_t allocs_before = bench::allocations;
  for (auto _ : state) {
    // One iteration = one delivery handed to the application; reads happen when input runs out.
    for (;;) {
      auto e = c.poll_event();
      if (e) {
        if (auto* d = std::get_if<engine::Delivery>(&*e)) {
          if (++delivered % 100 == 0) (void)c.ack(1, wire::BasicAck{.delivery_tag = d->message.delivery_tag, .multiple = true});
          break;
        }
        continue;
      }
      if (c.pending_output_bytes()) c.consume_output(c.pending_output_bytes());
      if (at == stream.size()) at = 0;
      const std::size_t len = std::min(write_chunk, stream.size() - at);
      c.handle_bytes(std::span(stream).subspan(at, len), now);
      at += len;
    }
  }
  report(state, allocs_before);
}
BENCHMARK(BM_ConsumeWithAckEvery100);

}  // namespace

BENCHMARK_MAIN();

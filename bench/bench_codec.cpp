// Codec benchmarks: decoding a stream of deliveries the way a driver feeds it (64 KiB reads),
// and encoding publishes into the output queue the way the engine will. Reports messages/s,
// bytes/s and heap allocations per message (the target on both paths is 0).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "warren/wire/wire.hpp"

namespace {

using namespace warren::wire;

constexpr std::size_t delivery_count = 1'000'000;
constexpr std::size_t read_bytes = 64 * 1024;

// basic.deliver + a content header without properties + a 64-byte body: 134 bytes.
std::vector<std::byte> encoded_deliveries() {
  OutputQueue q;
  std::string body(64, 'm');
  auto body_bytes = std::as_bytes(std::span{body.data(), body.size()});
  for (std::size_t i = 0; i < delivery_count; ++i) {
    auto r = write_content(q, 1, BasicDeliver{"consumer-1", i + 1, false, "", "queue1"}, BasicProperties{},
                           body_bytes, 131072);
    if (!r.ok()) throw std::runtime_error(r.error().to_string());
  }
  return q.to_vector();
}

void BM_DecodeDeliveries(benchmark::State& state) {
  static const std::vector<std::byte> stream = encoded_deliveries();
  std::size_t delivered = 0;
  std::uint64_t checksum = 0;
  std::size_t allocs_before = 0;
  std::size_t messages = 0;
  for (auto _ : state) {
    FrameDecoder decoder(FrameDecoder::Peer::broker, 131072);
    Method method;
    ContentHeader header;
    std::uint64_t expected_body = 0;
    allocs_before = warren::bench::allocations;
    for (std::size_t at = 0; at < stream.size(); at += read_bytes) {
      decoder.feed(std::span(stream).subspan(at, std::min(read_bytes, stream.size() - at)));
      for (;;) {
        auto r = decoder.next();
        if (!r.ok()) {
          state.SkipWithError(r.error().to_string().c_str());
          return;
        }
        if (!r->has_value()) break;
        const FrameView& f = **r;
        switch (f.type) {
          case FrameType::method: {
            if (auto r = decode_method(f.payload, method); !r.ok()) {
              state.SkipWithError(r.error().to_string().c_str());
              return;
            }
            if (const auto* d = std::get_if<BasicDeliver>(&method)) checksum += d->delivery_tag;
            break;
          }
          case FrameType::header: {
            if (auto r = decode_content_header(f.payload, header); !r.ok()) {
              state.SkipWithError(r.error().to_string().c_str());
              return;
            }
            expected_body = header.body_size;
            break;
          }
          case FrameType::body:
            checksum += static_cast<std::uint64_t>(f.payload[0]);
            if (f.payload.size() == expected_body) ++delivered;
            break;
          default:
            break;
        }
      }
    }
    messages += delivery_count;
  }
  benchmark::DoNotOptimize(checksum);
  if (delivered != messages) state.SkipWithError("not every delivery was decoded");
  state.SetItemsProcessed(static_cast<std::int64_t>(messages));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
  state.counters["bytes_per_msg"] = static_cast<double>(stream.size()) / delivery_count;
  state.counters["allocs_per_msg"] =
      static_cast<double>(warren::bench::allocations - allocs_before) / delivery_count;
}
BENCHMARK(BM_DecodeDeliveries)->Unit(benchmark::kMillisecond);

void BM_EncodePublishes(benchmark::State& state) {
  OutputQueue q;
  std::string body(64, 'p');
  auto body_bytes = std::as_bytes(std::span{body.data(), body.size()});
  const BasicPublish publish{"", "queue1", false, false};
  const BasicProperties props{};
  // Warm the queue's blocks, as a running connection would have.
  for (int i = 0; i < 10000; ++i) (void)write_content(q, 1, publish, props, body_bytes, 131072);
  q.consume(q.size_bytes());
  std::size_t bytes = 0;
  std::size_t allocs_before = warren::bench::allocations;
  for (auto _ : state) {
    auto r = write_content(q, 1, publish, props, body_bytes, 131072);
    benchmark::DoNotOptimize(r);
    // A driver drains the queue once per loop turn; here, every 64 KiB.
    if (q.size_bytes() >= read_bytes) {
      bytes += q.size_bytes();
      q.consume(q.size_bytes());
    }
  }
  bytes += q.size_bytes();
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["allocs_per_msg"] =
      static_cast<double>(warren::bench::allocations - allocs_before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_EncodePublishes);

void BM_EncodePublishesWithProperties(benchmark::State& state) {
  OutputQueue q;
  std::string body(64, 'p');
  auto body_bytes = std::as_bytes(std::span{body.data(), body.size()});
  const BasicPublish publish{"amq.direct", "orders.created", true, false};
  BasicProperties props;
  props.content_type = "application/json";
  props.delivery_mode = 2;
  props.correlation_id = "8f14e45f-ceea-467f-a8f3-6d2b1e1f6c9a";
  props.timestamp = 1700000000;
  for (int i = 0; i < 10000; ++i) (void)write_content(q, 1, publish, props, body_bytes, 131072);
  q.consume(q.size_bytes());
  std::size_t allocs_before = warren::bench::allocations;
  for (auto _ : state) {
    auto r = write_content(q, 1, publish, props, body_bytes, 131072);
    benchmark::DoNotOptimize(r);
    if (q.size_bytes() >= read_bytes) q.consume(q.size_bytes());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs_per_msg"] =
      static_cast<double>(warren::bench::allocations - allocs_before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_EncodePublishesWithProperties);

}  // namespace

BENCHMARK_MAIN();

// What client/ needs from an event loop, and nothing more: open a byte stream to an endpoint,
// write and read it, arm a timer, run a function on the loop. The libuv and Asio transports
// implement it; tests implement it with a fake and a virtual clock. Everything here is called
// on the loop's thread, except Driver::post, which any thread may call.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "warren/client/url.hpp"
#include "warren/engine/types.hpp"
#include "warren/error.hpp"

namespace warren::client {

// What an amqps stream must check, as settings: the TLS itself (OpenSSL) lives in
// transports/tls, under the drivers; client/ knows only what to ask for. There is no setting
// that turns verification off.
struct TlsSettings {
  std::string server_name{};      // the name (or IP) the certificate must carry; sent as SNI
  std::string ca_pem{};           // trusted CAs, PEM; empty: the system's default store
  std::string client_cert_pem{};  // optional, for EXTERNAL authentication
  std::string client_key_pem{};
};

// Read batching, as Kafka's fetch.min.bytes / fetch.max.wait.ms: while bytes keep coming, a
// read waits until `min_bytes` are there (the kernel's SO_RCVLOWAT, so the process is not even
// woken for less) or `max_wait` has passed since the last read, whichever is first. Fewer,
// larger reads cost less CPU per message and add at most `max_wait` of latency.
// - When it starts: after a read that proves the broker is streaming deliveries: at least
//   `burst_bytes` that completed two deliveries or more (the client says how many:
//   Stream::note_deliveries). A read of one message — a reply, a get, a large message arriving
//   in pieces, a prefetch-1 consumer's next — never does, so such a stream is read as without
//   batching, whatever its messages' size. A read of less than half a burst, or one that finds
//   nothing, ends it and the next bytes are read at once. With burst_bytes 0 (throughput mode)
//   any read starts it and only a read that finds nothing ends it.
// - It also runs while the broker owes the connection many replies: from `owed_confirms`
//   publishes awaiting their outcome (summed over the connection's channels: a publisher's
//   deep window) until fewer than half that many do. Those confirms are due anyway and each is
//   already about window / rate late; reading them once per max_wait, not once per broker
//   write, is most of a confirming publisher's CPU (W2 in docs/benchmarks.md). A shallow
//   window (a paced publisher, one waiting for each confirm) never reaches it. 0: never.
// - min_bytes 0 is off: every readable byte is read at once.
// libuv's timers count whole milliseconds: there, max_wait is rounded up to one. A min_bytes
// above the drivers' read buffer (64 KiB) counts as 64 KiB: one read could not take more.
struct ReadBatching {
  std::size_t min_bytes = 0;
  std::chrono::microseconds max_wait{1000};
  std::size_t burst_bytes = 0;
  std::size_t owed_confirms = 256;
};

// ClientOptions' default: batching starts after a read of 4 KiB that completed two deliveries
// or more (~25 of 64 B) and goes on while reads bring 2 KiB of them, so a consumer of a sparse
// or paced stream (one message per read, of any size; 10,000 msg/s of 64 B is 1.6 KiB a
// millisecond) reads each at once, as without batching, and one that drains a backlog wakes
// about once a millisecond instead of once per broker write. A publisher with 256 or more publishes awaiting confirms reads them about once
// a millisecond too.
inline constexpr ReadBatching adaptive_read_batching{
    .min_bytes = 32 * 1024, .max_wait = std::chrono::milliseconds(1), .burst_bytes = 4096, .owed_confirms = 256};

// What a stream reports, on the loop's thread.
class StreamEvents {
 public:
  virtual ~StreamEvents() = default;
  virtual void on_connected() = 0;  // TCP connected and, for amqps, TLS verified
  virtual void on_bytes(std::span<const std::byte> bytes) = 0;  // plaintext; valid during the call
  virtual void on_written(std::size_t bytes) = 0;  // the last write() completed
  virtual void on_stream_error(Error cause) = 0;   // dial failed, reset, EOF: no more calls after it
};

// One connection's byte stream (TCP, or TLS over TCP).
class Stream {
 public:
  virtual ~Stream() = default;
  // One gathered write; at most one in flight. The spans stay valid until on_written.
  virtual void write(std::span<const std::span<const std::byte>> parts) = 0;
  virtual void set_reading(bool reading) = 0;
  // Off until called; a stream that cannot batch (a fake) reads at once, as before.
  virtual void set_read_batching(ReadBatching) {}
  // The client's word that the broker owes many replies (ReadBatching::owed_confirms): while
  // true, every read that brings bytes batches as a burst does; false, the next bytes are read
  // at once. Nothing without read batching.
  virtual void set_replies_owed(bool) {}
  // The client's word on the bytes on_bytes just handed it: how many deliveries they completed
  // (called only when some did). A read is a burst only when it completed two or more
  // (ReadBatching). Nothing without read batching.
  virtual void note_deliveries(std::size_t) {}
  virtual void close() = 0;  // no events after this
};

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void arm(engine::Instant at) = 0;  // replaces an earlier arm
  virtual void cancel() = 0;
};

class Driver {
 public:
  virtual ~Driver() = default;
  [[nodiscard]] virtual engine::Instant now() = 0;
  // Resolves and connects within `timeout` (the whole dial), then TLS when `tls` is given.
  [[nodiscard]] virtual std::unique_ptr<Stream> dial(const Endpoint& endpoint, engine::Duration timeout,
                                                     std::optional<TlsSettings> tls, StreamEvents& events) = 0;
  // A timer that does not keep the loop alive: a program whose work is done exits.
  [[nodiscard]] virtual std::unique_ptr<Timer> timer(std::function<void()> on_fire) = 0;
  // A timer that keeps the loop alive while armed: a Session waiting to dial again has no
  // socket open, and its program must not exit for want of one. A loop whose timers all
  // count (Asio's) needs nothing more than timer().
  [[nodiscard]] virtual std::unique_ptr<Timer> keepalive_timer(std::function<void()> on_fire) {
    return timer(std::move(on_fire));
  }
  // Runs `fn` on the loop's thread; safe to call from any thread.
  virtual void post(std::function<void()> fn) = 0;
};

}  // namespace warren::client

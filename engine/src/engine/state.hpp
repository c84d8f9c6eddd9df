// The engine's internal state: per-channel data, the connection's phases as a variant, and
// the bookkeeping of requests and publishes. Private to engine/src.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "ring.hpp"
#include "warren/engine/events.hpp"
#include "warren/engine/types.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/properties.hpp"

namespace warren::engine::detail {

// A request waiting for its answer. Registered before its frame is queued.
// The small members together after the id: 64 bytes, not 80 with them spread among the
// 8-byte ones (every channel's first request allocates a ring of them).
struct PendingRequest {
  enum class Kind : std::uint8_t { plain, open, consume, cancel, get };
  RequestId id = 0;              // 0: the engine's own (a subscription's qos); no event
  wire::MethodId request;        // what was asked, for error texts
  wire::MethodId answer;         // the method that settles it
  wire::MethodId alternative;    // basic.get: get-empty settles it too
  Kind kind = Kind::plain;
  bool no_ack = false;           // consume
  bool stream = false;           // consume: names x-stream-offset (see Consumer::stream)
  Instant deadline{};
  std::string consumer_tag;      // consume: the tag asked for; cancel: the tag
};
static_assert(sizeof(PendingRequest) <= sizeof(RequestId) + 16 + sizeof(Instant) + sizeof(std::string));

// A connection.update-secret waiting for its update-secret-ok (channel 0, in order).
struct SecretUpdate {
  RequestId id = 0;
  Instant deadline{};
};

// What a basic.return can be matched by. A return names no sequence number, and acks for
// earlier publishes may follow it, so "the next ack" is not its ack (RabbitMQ sends the return
// while routing, the confirms when it flushes). `route`: exchange, routing key and body size
// (0: not a mandatory publish); `content`: message id, correlation id and the first and last
// return_key_body_ends bytes of the body, which tell apart publishes alike in `route`.
struct ReturnKey {
  std::uint64_t route = 0;
  std::uint64_t content = 0;
};
inline constexpr std::size_t return_key_body_ends = 32;
[[nodiscard]] ReturnKey return_key_of(std::string_view exchange, std::string_view routing_key,
                                      const wire::BasicProperties& properties, std::span<const std::byte> body) noexcept;

// A publish in confirm mode, waiting for basic.ack/nack by its sequence number.
struct Unconfirmed {
  PublishId id = 0;
  std::uint64_t seq = 0;
  Instant deadline{};
  ReturnKey return_key{};  // mandatory publishes: return_key_of(...); route 0 otherwise
  bool settled = false;  // settled out of order; popped once it reaches the front
  Duration timeout{};    // what the deadline was made of, for the error's text
};

// A basic.return matched to its publish, waiting for the ack that settles it.
struct PendingReturn {
  std::uint64_t seq = 0;
  std::uint16_t reply_code = 0;
  std::string detail;  // returned_detail(): the broker's text and where the publish went
};

// Publishes outside confirm mode, waiting for their frames to be written: a run of one
// channel's publishes with consecutive ids and one timeout, made within run_span of the first
// (a burst is one entry, not one per publish). The run is written when its last byte is, and
// times out as one at its last publish's deadline: its first is told at most run_span late.
struct Unwritten {
  static constexpr Duration run_span = std::chrono::milliseconds(1);
  PublishId id = 0;    // the first
  PublishId last = 0;
  std::uint64_t count = 1;
  ChannelId channel = 0;
  std::uint64_t end_offset = 0;  // position in the output stream after the last's last byte
  Instant first_at{};            // when the first was made
  Instant deadline{};            // the last's
  bool settled = false;  // timed out before it was written; popped once written
  Duration timeout{};
};

// A publish made while the connection is blocked: encoded, waiting for connection.unblocked.
struct Waiting {
  PublishId id = 0;
  ChannelId channel = 0;
  std::vector<std::byte> frames;
  Instant deadline{};
  ReturnKey return_key{};
  Duration timeout{};
};

// Deadlines in a queue are in order while every entry got the same timeout; per-channel and
// per-publish timeouts break that. `due` is a lower bound on the queue's earliest deadline:
// lowered by every push, made exact by a scan when it passes (a scan that may find nothing
// due: an early wake-up, never a late one). The hot path pays one comparison.
struct DueBound {
  std::optional<Instant> at;
  void lower(Instant deadline) {
    if (!at || deadline < *at) at = deadline;
  }
};

// What a channel in confirm mode keeps: made by its confirm.select, so a channel that never
// selects (a consumer's) holds a pointer for it, not 72 bytes (issue 40: a consumer on each
// of 2,000 channels).
struct Confirms {
  std::uint64_t next_seq = 1;
  Ring<Unconfirmed> unconfirmed;
  DueBound due;  // of `unconfirmed`
  // basic.returns matched to their publishes, waiting for the acks that settle them.
  std::vector<PendingReturn> pending_returns;
};

struct Consumer {
  std::string tag;  // the event's consumer_tag views this: it does not move while the consumer lives
  bool no_ack = false;
  bool cancelling = false;  // basic.cancel sent, cancel-ok not yet in: deliveries go back
  // A stream queue's subscription (its consume names x-stream-offset). Its deliveries are
  // never rejected: RabbitMQ 3.10-3.12 closes the whole connection (540) for a reject or
  // nack of a stream delivery. One that races a cancel is left to the channel instead.
  bool stream = false;
};

// A content-carrying method being put together from its method, header and body frames.
// Text is copied out of the frames (they may not outlive the next read); a body that came in
// one frame is handed out as a view of that frame.
struct Assembly {
  enum class Kind : std::uint8_t { none, deliver, get_ok, returned, discard };
  Kind kind = Kind::none;
  bool have_header = false;
  std::string exchange, routing_key, reply_text;
  std::string consumer_tag;  // only when no consumer of ours has the tag
  const struct Consumer* consumer = nullptr;  // deliveries: resolved from the tag at basic.deliver
  std::uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::uint32_t message_count = 0;
  std::uint16_t reply_code = 0;
  RequestId request = 0;
  std::vector<std::byte> header_bytes;
  wire::ContentHeader header;
  std::vector<std::byte> body;
};

struct Channel {
  // (No member initializers here: a nested struct's are not usable until Channel is complete.)
  struct Opening {
    Instant deadline;
  };
  struct Open {};
  struct Closing {
    Instant deadline;
    RequestId request;  // the application's close_channel, if it asked; 0 otherwise
    bool crossed;       // the broker closed it too; free it at the deadline, quietly
  };

  // The flags first, beside the id: spread among the 8-byte members each cost 7 bytes of
  // padding (a connection may hold 2,000 channels).
  ChannelId id = 0;
  bool timed = false;  // listed in Impl::timed_: it may hold a deadline
  bool app_qos = false;
  std::variant<Opening, Open, Closing> state{Opening{}};
  std::optional<Duration> timeout;  // this channel's request and publish timeout, if set
  // Two slots at first: a consume's qos and the consume itself. Freed once empty, so it is
  // allocated again by each burst of requests, and channels opened all at once leave these
  // behind as holes among what they keep (four slots of 80 bytes made 336-byte holes; two
  // of 64 make 144).
  Ring<PendingRequest, 2> pending;
  std::unique_ptr<Confirms> confirms;  // in confirm mode only (from its confirm.select)
  std::uint64_t max_delivery_tag = 0;
  std::vector<std::unique_ptr<Consumer>> consumers;  // stable addresses: deliveries point at them
  // The message being assembled: made at the channel's first content frame and kept (560
  // bytes a channel that never receives one, a publisher's or an idle consumer's, would hold).
  std::unique_ptr<Assembly> assembling;

  [[nodiscard]] Assembly::Kind assembly_kind() const noexcept { return assembling ? assembling->kind : Assembly::Kind::none; }
  Assembly& assembly() {
    if (!assembling) assembling = std::make_unique<Assembly>();
    return *assembling;
  }

  Consumer* find_consumer(std::string_view tag) {
    for (auto& c : consumers)
      if (c->tag == tag) return c.get();
    return nullptr;
  }
};

// The connection's phases. Handshake states wait for one broker method each.
struct AwaitStart {};
struct AwaitTune {};
struct AwaitOpenOk {};
struct Running {};
struct ClosingConnection {
  Instant deadline{};
};
struct Finished {};
using Phase = std::variant<AwaitStart, AwaitTune, AwaitOpenOk, Running, ClosingConnection, Finished>;

}  // namespace warren::engine::detail

// What the engine reports, one poll_event() at a time. Views in an event (text, properties,
// bodies) point into the engine's buffers and the bytes it was handed, and stay valid until
// the next poll_event() or handle_*() call: dispatch an event before polling the next one.
// Commands made while dispatching (ack, publish, close_channel, ...) do not invalidate them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "warren/engine/types.hpp"
#include "warren/error.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/properties.hpp"

namespace warren::engine {

// The handshake finished (connection.open-ok): these are the limits in force.
struct Connected {
  const wire::FieldTable* server_properties = nullptr;
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max_bytes = 0;
  std::uint16_t heartbeat_s = 0;
};

// connection.blocked: the broker stopped reading publishes (a memory or disk alarm).
struct Blocked {
  std::string_view reason{};
};
struct Unblocked {};

// The last event of a connection. `cause` is the latched error every later command gets;
// a close this side asked for and the broker confirmed has reply_code 200.
struct Closed {
  Error cause{};
  bool heartbeat_missed = false;  // the broker went silent for two heartbeat intervals
};

// The output fell back under its limit after being congested.
struct Writable {};

struct ChannelOpened {
  ChannelId channel = 0;
};

// The channel is unusable from now on (a broker close, a timed-out request, our own close
// confirmed). Its pending requests and publishes were reported failed before this event.
struct ChannelClosed {
  ChannelId channel = 0;
  Error cause{};
};

// A request's answer arrived and matched it. `reply` views point into the frame.
struct RequestDone {
  ChannelId channel = 0;
  RequestId request = 0;
  wire::Method reply{};
};

struct RequestFailed {
  ChannelId channel = 0;
  RequestId request = 0;
  Error cause{};
};

enum class PublishOutcome : std::uint8_t {
  written,    // not in confirm mode: its frames were handed to the transport
  confirmed,  // basic.ack
  nacked,     // basic.nack: the broker could not take it
  returned,   // basic.return (mandatory, unroutable), then basic.ack
  timed_out,  // its deadline passed first; its fate at the broker is unknown
  failed,     // the channel or connection closed first; its fate is unknown
};

// Settles the channel's publishes with ids first..last that are still pending (one multiple
// ack, or one write, settles many at once; publishes reported earlier are not in it again).
struct PublishDone {
  ChannelId channel = 0;
  PublishId first = 0;
  PublishId last = 0;
  PublishOutcome outcome = PublishOutcome::written;
  Error cause{};  // for returned: reply code and text; for nacked, timed_out and failed: why
  // When the range's first publish was made (the `now` it was given), for confirmed,
  // nacked, returned and written; the default Instant where the engine does not say.
  Instant published_at{};
  // How many publishes it settles: ids are numbered per connection, so a channel's range may
  // skip ids that other channels' publishes took.
  std::uint64_t count = 1;
};

// A message the broker sent: basic.deliver, basic.get-ok or basic.return.
struct Message {
  ChannelId channel = 0;
  std::string_view consumer_tag{};  // deliveries only
  std::uint64_t delivery_tag = 0;  // deliveries and get-ok; acknowledge with this
  bool redelivered = false;
  std::string_view exchange{};
  std::string_view routing_key{};
  const wire::BasicProperties* properties = nullptr;
  std::span<const std::byte> body{};
};

struct Delivery {
  Message message{};
};

// basic.get answered with a message (an empty queue answers with RequestDone{get-empty}).
struct GetOk {
  RequestId request = 0;
  std::uint32_t message_count = 0;  // messages left in the queue
  Message message{};
};

// basic.return of an unroutable mandatory publish; the publish itself is settled by the
// PublishDone that follows (outcome returned) in confirm mode.
struct Returned {
  std::uint16_t reply_code = 0;
  std::string_view reply_text{};
  Message message{};
};

// A consumer ended: cancel-ok to our cancel, or the broker cancelled it (queue deleted).
struct ConsumerCancelled {
  ChannelId channel = 0;
  std::string_view consumer_tag{};
  bool by_broker = false;
};

// channel.flow from the broker.
struct ChannelFlow {
  ChannelId channel = 0;
  bool active = true;
};

using Event = std::variant<Connected, Blocked, Unblocked, Closed, Writable, ChannelOpened, ChannelClosed,
                           RequestDone, RequestFailed, PublishDone, Delivery, GetOk, Returned,
                           ConsumerCancelled, ChannelFlow>;

}  // namespace warren::engine

// A message the broker sent, two ways: a Delivery is a view a callback reads without a copy
// (valid during the callback); a Message is owned (every property, every header, the body)
// and can be kept, moved to another thread and settled later with ack(), nack() or reject()
// on the message itself.
//
// Settling knows which channel the message came from: if that channel is gone (closed, its
// connection lost, or a Session reconnected since), nothing is sent, the call says so
// (errc::channel_closed), and the broker redelivers the message. A delivery tag never reaches
// a newer channel that happens to reuse the number.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "warren/client/trace_context.hpp"
#include "warren/engine/events.hpp"
#include "warren/result.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/properties.hpp"

namespace warren::client {

namespace detail {
struct ChannelCore;
class MessagePool;
class ConsumerCore;

// What a Message owns, in one node: the names, the properties' bytes and the body share one
// buffer, and the node itself goes back to its consumer's pool when the Message is dropped, so
// a Message moves as one pointer and a stream consumer allocates nothing per message.
struct MessageData {
  // What every message touches first, together; the properties (14 optional fields) last,
  // written only when the message has any.
  std::shared_ptr<ChannelCore> channel{};
  std::string_view exchange, routing_key, consumer_tag;
  std::span<const std::byte> body{};
  std::uint64_t delivery_tag = 0;
  std::uint32_t message_count = 0;
  bool redelivered = false;
  bool settled = false;
  bool copy = false;            // made by Delivery::copy(): readable, never settles
  bool has_properties = false;  // else `properties` is stale and unread
  std::vector<std::byte> storage{};
  std::shared_ptr<MessagePool> pool{};  // where the node goes back; none: it is deleted
  wire::BasicProperties properties{};  // views into storage
};
}  // namespace detail

struct NackOptions {
  bool requeue = true;
  bool multiple = false;  // also every earlier unsettled delivery of the channel
};
struct RejectOptions {
  bool requeue = true;
};
struct AckOptions {
  bool multiple = false;
};

class Message;
class Connection;

// The zero-copy view handed to a per-message callback.
class Delivery {
 public:
  [[nodiscard]] std::string_view exchange() const noexcept { return m_->exchange; }
  [[nodiscard]] std::string_view routing_key() const noexcept { return m_->routing_key; }
  [[nodiscard]] std::string_view consumer_tag() const noexcept { return m_->consumer_tag; }
  [[nodiscard]] std::uint64_t delivery_tag() const noexcept { return m_->delivery_tag; }
  [[nodiscard]] bool redelivered() const noexcept { return m_->redelivered; }
  [[nodiscard]] const wire::BasicProperties& properties() const noexcept;
  [[nodiscard]] std::span<const std::byte> body() const noexcept { return m_->body; }
  [[nodiscard]] std::string_view body_text() const noexcept {
    return {reinterpret_cast<const char*>(m_->body.data()), m_->body.size()};
  }
  // The engine's view of the same message (what the codec-level tools print).
  [[nodiscard]] const engine::Message& raw() const noexcept { return *m_; }
  // The W3C trace context its headers carried (traceparent, and tracestate viewed in them),
  // read without decoding the other headers; nothing when it carried none or a malformed one.
  [[nodiscard]] std::optional<TraceContext> trace() const noexcept;
  // The span warren records for this callback (a child of trace(), else a new trace's root),
  // while the callback runs: the parent for the application's own spans and publishes inside
  // it. Nothing when no observer wants spans (observer.hpp).
  [[nodiscard]] std::optional<TraceContext> span() const noexcept;

  // Who settles a delivery: whoever holds its settle, once. The view holds it until it is
  // settled here or take() hands it to a Message. A layer that settles for its callback (an
  // inbox, a group member, the backplane, an RpcServer) settles after the callback returns
  // only what the view still holds, so a callback may reject a message itself or take() it.
  //
  // Once per view: a second settle of the same view fails with invalid_argument and sends
  // nothing, where the broker would close the channel (406, unknown delivery tag).
  [[nodiscard]] Result<void> ack(AckOptions options = {}) const;
  [[nodiscard]] Result<void> nack(NackOptions options = {}) const;
  [[nodiscard]] Result<void> reject(RejectOptions options = {}) const;
  // This view still holds the settle: nothing settled it and nothing took it.
  [[nodiscard]] bool settles() const noexcept { return !settled_; }

  // An owned Message that takes over the settle, to settle later and from any thread: the
  // view's own settles fail from then on (settles() is false), and a copy of an already
  // settled view is settled.
  [[nodiscard]] Message take() const;
  // An owned Message to keep, that leaves the settle where it is: with the view, and so with
  // the layer that settles after the callback. Its own settles fail with invalid_argument.
  [[nodiscard]] Message copy() const;

 private:
  friend class detail::ConsumerCore;
  friend class Connection;
  // A view for the length of one callback: the channel is borrowed from its owner (the
  // consumer, the dispatch), so a delivery costs no reference count; take() copies it.
  Delivery(const engine::Message& m, const std::shared_ptr<detail::ChannelCore>& channel) noexcept
      : m_(&m), channel_(&channel) {}
  const engine::Message* m_;
  const std::shared_ptr<detail::ChannelCore>* channel_;
  mutable bool settled_ = false;
};

class Message {
 public:
  Message() = default;  // empty: settling it fails with invalid_argument
  Message(Message&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Message& operator=(Message&& o) noexcept {
    if (this != &o) {
      release();
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Message(const Message&) = delete;  // one owner settles it once
  Message& operator=(const Message&) = delete;
  ~Message() { release(); }

  [[nodiscard]] std::string_view exchange() const noexcept { return d_ ? d_->exchange : std::string_view{}; }
  [[nodiscard]] std::string_view routing_key() const noexcept { return d_ ? d_->routing_key : std::string_view{}; }
  [[nodiscard]] std::string_view consumer_tag() const noexcept { return d_ ? d_->consumer_tag : std::string_view{}; }
  [[nodiscard]] std::uint64_t delivery_tag() const noexcept { return d_ ? d_->delivery_tag : 0; }
  [[nodiscard]] bool redelivered() const noexcept { return d_ && d_->redelivered; }
  // basic.get: the messages left in the queue after this one (0 for deliveries).
  [[nodiscard]] std::uint32_t message_count() const noexcept { return d_ ? d_->message_count : 0; }
  [[nodiscard]] const wire::BasicProperties& properties() const noexcept;
  [[nodiscard]] std::span<const std::byte> body() const noexcept { return d_ ? d_->body : std::span<const std::byte>{}; }
  [[nodiscard]] std::string_view body_text() const noexcept {
    auto b = body();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  // The headers decoded into an owning table (empty when there are none).
  [[nodiscard]] Result<wire::FieldTable> headers() const;
  // As Delivery::trace; the tracestate views this message.
  [[nodiscard]] std::optional<TraceContext> trace() const noexcept;
  // The view the rest of the client takes (engine::Message), pointing into this message.
  [[nodiscard]] engine::Message view() const noexcept;
  [[nodiscard]] bool settled() const noexcept { return d_ && d_->settled; }
  // It holds its delivery's settle: not settled yet, not a copy, not empty.
  [[nodiscard]] bool settles() const noexcept { return d_ && d_->channel && !d_->settled && !d_->copy; }

  // On the connection's loop thread the result is exact. From another thread the settle is
  // handed to the loop: it fails at once if the channel is already known to be gone, and
  // otherwise is sent (if the channel died meanwhile, the broker redelivers the message).
  [[nodiscard]] Result<void> ack(AckOptions options = {});
  [[nodiscard]] Result<void> nack(NackOptions options = {});
  [[nodiscard]] Result<void> reject(RejectOptions options = {});

 private:
  friend class Delivery;
  friend class Channel;
  friend class detail::ConsumerCore;
  // Fills this message from a view, reusing its node (and the node's buffer) when it has one,
  // else taking one from the pool.
  void assign(const engine::Message& m, std::shared_ptr<detail::ChannelCore> channel,
              const std::shared_ptr<detail::MessagePool>& pool, std::uint32_t message_count = 0);

  enum class Settle : std::uint8_t { ack, nack, reject };
  Result<void> settle(Settle how, bool multiple, bool requeue);
  void release() noexcept {
    if (d_) give_back(d_);
    d_ = nullptr;
  }
  static void give_back(detail::MessageData* d) noexcept;  // to its pool, or deleted

  detail::MessageData* d_ = nullptr;
};

}  // namespace warren::client

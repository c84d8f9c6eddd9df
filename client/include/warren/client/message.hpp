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
#include <vector>

#include "warren/engine/events.hpp"
#include "warren/result.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/properties.hpp"

namespace warren::client {

namespace detail {
struct ChannelCore;
class BufferPool;
class ConsumerCore;
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

  [[nodiscard]] Result<void> ack(AckOptions options = {}) const;
  [[nodiscard]] Result<void> nack(NackOptions options = {}) const;
  [[nodiscard]] Result<void> reject(RejectOptions options = {}) const;

  // An owned copy, settleable later and from any thread.
  [[nodiscard]] Message take() const;

 private:
  friend class detail::ConsumerCore;
  friend class Connection;
  // A view for the length of one callback: the channel is borrowed from its owner (the
  // consumer, the dispatch), so a delivery costs no reference count; take() copies it.
  Delivery(const engine::Message& m, const std::shared_ptr<detail::ChannelCore>& channel) noexcept
      : m_(&m), channel_(&channel) {}
  const engine::Message* m_;
  const std::shared_ptr<detail::ChannelCore>* channel_;
};

class Message {
 public:
  Message() = default;  // empty: settling it fails with invalid_argument
  Message(Message&&) noexcept;
  Message& operator=(Message&&) noexcept;
  Message(const Message&) = delete;  // one owner settles it once
  Message& operator=(const Message&) = delete;
  ~Message();

  [[nodiscard]] std::string_view exchange() const noexcept { return exchange_; }
  [[nodiscard]] std::string_view routing_key() const noexcept { return routing_key_; }
  [[nodiscard]] std::string_view consumer_tag() const noexcept { return consumer_tag_; }
  [[nodiscard]] std::uint64_t delivery_tag() const noexcept { return delivery_tag_; }
  [[nodiscard]] bool redelivered() const noexcept { return redelivered_; }
  // basic.get: the messages left in the queue after this one (0 for deliveries).
  [[nodiscard]] std::uint32_t message_count() const noexcept { return message_count_; }
  [[nodiscard]] const wire::BasicProperties& properties() const noexcept { return properties_; }
  [[nodiscard]] std::span<const std::byte> body() const noexcept { return body_; }
  [[nodiscard]] std::string_view body_text() const noexcept {
    return {reinterpret_cast<const char*>(body_.data()), body_.size()};
  }
  // The headers decoded into an owning table (empty when there are none).
  [[nodiscard]] Result<wire::FieldTable> headers() const;
  // The view the rest of the client takes (engine::Message), pointing into this message.
  [[nodiscard]] engine::Message view() const noexcept;
  [[nodiscard]] bool settled() const noexcept { return settled_; }

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
  // Fills this message from a view, reusing its own buffer when it has one.
  void assign(const engine::Message& m, std::shared_ptr<detail::ChannelCore> channel,
              std::shared_ptr<detail::BufferPool> pool, std::uint32_t message_count = 0);

  enum class Settle : std::uint8_t { ack, nack, reject };
  Result<void> settle(Settle how, bool multiple, bool requeue);
  void release() noexcept;  // hands the buffer back to its pool

  std::vector<std::byte> storage_;  // names, encoded properties and body, in one buffer
  std::shared_ptr<detail::BufferPool> pool_;
  std::shared_ptr<detail::ChannelCore> channel_;
  std::string_view exchange_, routing_key_, consumer_tag_;
  wire::BasicProperties properties_;
  std::span<const std::byte> body_;
  std::uint64_t delivery_tag_ = 0;
  std::uint32_t message_count_ = 0;
  bool redelivered_ = false;
  bool settled_ = false;
};

}  // namespace warren::client

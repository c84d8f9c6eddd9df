#include "warren/client/message.hpp"

#include <cstring>

#include "channel_core.hpp"

namespace warren::client {

namespace {
const wire::BasicProperties no_properties{};
}

const wire::BasicProperties& Delivery::properties() const noexcept {
  return m_->properties ? *m_->properties : no_properties;
}

namespace {

// A settle of a delivery during its callback: on its channel while that channel is open,
// else nothing is sent and the channel's staleness is the answer.
template <class Send>
Result<void> settle_view(const std::shared_ptr<detail::ChannelCore>& core, std::uint64_t tag, Send send) {
  auto c = core ? core->live() : nullptr;
  if (!c) return core ? core->stale(tag) : make_error(errc::invalid_argument, "an empty delivery");
  return send(*c, core->id);
}

}  // namespace

Result<void> Delivery::ack(AckOptions options) const {
  return settle_view(*channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.ack(id, m_->delivery_tag, options.multiple);
  });
}

Result<void> Delivery::nack(NackOptions options) const {
  return settle_view(*channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.nack(id, m_->delivery_tag, options.multiple, options.requeue);
  });
}

Result<void> Delivery::reject(RejectOptions options) const {
  return settle_view(*channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.reject(id, m_->delivery_tag, options.requeue);
  });
}

Message Delivery::take() const {
  Message m;
  m.assign(*m_, *channel_, nullptr);
  return m;
}

// ---- Message

Message::Message(Message&& o) noexcept
    : storage_(std::move(o.storage_)),
      pool_(std::move(o.pool_)),
      channel_(std::move(o.channel_)),
      exchange_(o.exchange_),
      routing_key_(o.routing_key_),
      consumer_tag_(o.consumer_tag_),
      properties_(o.properties_),
      body_(o.body_),
      delivery_tag_(o.delivery_tag_),
      message_count_(o.message_count_),
      redelivered_(o.redelivered_),
      settled_(o.settled_) {
  // The views point into storage_'s heap block, which moved with it.
  o.exchange_ = o.routing_key_ = o.consumer_tag_ = {};
  o.properties_ = {};
  o.body_ = {};
  o.delivery_tag_ = 0;
}

Message& Message::operator=(Message&& o) noexcept {
  if (this != &o) {
    release();
    this->~Message();
    new (this) Message(std::move(o));
  }
  return *this;
}

Message::~Message() { release(); }

void Message::release() noexcept {
  if (pool_ && storage_.capacity() != 0) pool_->give(std::move(storage_));
  pool_.reset();
  storage_ = {};
}

void Message::assign(const engine::Message& m, std::shared_ptr<detail::ChannelCore> channel,
                     std::shared_ptr<detail::BufferPool> pool, std::uint32_t message_count) {
  static const wire::BasicProperties empty{};
  const auto& props = m.properties ? *m.properties : empty;
  auto header_size = wire::content_header_size(props);
  // A header the engine decoded always re-encodes; should it not, keep the message without it.
  const std::size_t header_bytes = header_size.ok() ? *header_size : 0;
  const std::size_t total = m.exchange.size() + m.routing_key.size() + m.consumer_tag.size() + header_bytes + m.body.size();
  if (storage_.capacity() < total && pool) {
    auto reuse = pool->take();
    if (reuse.capacity() > storage_.capacity()) storage_ = std::move(reuse);
  }
  storage_.resize(total);
  std::byte* out = storage_.data();
  auto put = [&](std::string_view s) {
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    std::string_view view{reinterpret_cast<const char*>(out), s.size()};
    out += s.size();
    return view;
  };
  exchange_ = put(m.exchange);
  routing_key_ = put(m.routing_key);
  consumer_tag_ = put(m.consumer_tag);
  properties_ = {};
  if (header_bytes != 0) {
    wire::Writer w(out);
    wire::encode_content_header(w, m.body.size(), props);
    wire::ContentHeader decoded;
    if (wire::decode_content_header(std::span<const std::byte>(out, header_bytes), decoded).ok())
      properties_ = decoded.properties;
    out += header_bytes;
  }
  if (!m.body.empty()) std::memcpy(out, m.body.data(), m.body.size());
  body_ = std::span<const std::byte>(out, m.body.size());
  delivery_tag_ = m.delivery_tag;
  redelivered_ = m.redelivered;
  message_count_ = message_count;
  settled_ = false;
  channel_ = std::move(channel);
  if (pool) pool_ = std::move(pool);
}

Result<wire::FieldTable> Message::headers() const {
  if (!properties_.headers) return wire::FieldTable{};
  return properties_.headers->to_table();
}

engine::Message Message::view() const noexcept {
  engine::Message m;
  m.channel = channel_ ? channel_->id : 0;
  m.consumer_tag = consumer_tag_;
  m.delivery_tag = delivery_tag_;
  m.redelivered = redelivered_;
  m.exchange = exchange_;
  m.routing_key = routing_key_;
  m.properties = &properties_;
  m.body = body_;
  return m;
}

Result<void> Message::ack(AckOptions options) { return settle(Settle::ack, options.multiple, false); }
Result<void> Message::nack(NackOptions options) { return settle(Settle::nack, options.multiple, options.requeue); }
Result<void> Message::reject(RejectOptions options) { return settle(Settle::reject, false, options.requeue); }

Result<void> Message::settle(Settle how, bool multiple, bool requeue) {
  if (!channel_) return make_error(errc::invalid_argument, "an empty message (moved from, or never delivered)");
  if (settled_) return make_error(errc::invalid_argument, "delivery " + std::to_string(delivery_tag_) + " was already settled");
  if (!channel_->open.load(std::memory_order_acquire)) return channel_->stale(delivery_tag_);
  auto send = [how, multiple, requeue, tag = delivery_tag_](Connection& c, engine::ChannelId id) -> Result<void> {
    switch (how) {
      case Settle::ack: return c.ack(id, tag, multiple);
      case Settle::nack: return c.nack(id, tag, multiple, requeue);
      case Settle::reject: return c.reject(id, tag, requeue);
    }
    return {};
  };
  if (channel_->on_loop()) {
    auto c = channel_->live();
    if (!c) return channel_->stale(delivery_tag_);
    auto r = send(*c, channel_->id);
    if (r.ok()) settled_ = true;
    return r;
  }
  // Another thread: the loop sends it. The channel may close meanwhile; then nothing is sent
  // and the broker redelivers, as for any delivery of a dead channel.
  settled_ = true;
  channel_->driver->post([core = channel_, send] {
    if (auto c = core->live()) (void)send(*c, core->id);
  });
  return {};
}

}  // namespace warren::client

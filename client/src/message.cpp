#include "warren/client/message.hpp"

#include <cstring>

#include "channel_core.hpp"
#include "traced_properties.hpp"

namespace warren::client {

namespace {
const wire::BasicProperties no_properties{};
}  // namespace

// A message's trace context from its headers: long strings, found without decoding the rest.
std::optional<TraceContext> detail::trace_of(const wire::BasicProperties& p) noexcept {
  if (!p.headers) return std::nullopt;
  if (const wire::FieldTable* owned = p.headers->owned()) return TraceContext::from(*owned);
  const auto parent = wire::find_long_string(p.headers->encoded(), "traceparent");
  if (!parent) return std::nullopt;
  const auto state = wire::find_long_string(p.headers->encoded(), "tracestate");
  return TraceContext::parse(*parent, state.value_or(std::string_view{}));
}

std::optional<TraceContext> Delivery::trace() const noexcept { return detail::trace_of(properties()); }
std::optional<TraceContext> Message::trace() const noexcept { return detail::trace_of(properties()); }

std::optional<TraceContext> Delivery::span() const noexcept {
  auto c = *channel_ ? (*channel_)->live() : nullptr;
  return c ? c->processing_span(m_->channel, m_->delivery_tag) : std::nullopt;
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

template <class Send>
Result<void> settle_once(bool& settled, const std::shared_ptr<detail::ChannelCore>& core, std::uint64_t tag, Send send) {
  if (settled) return make_error(errc::invalid_argument, "delivery " + std::to_string(tag) + " was already settled");
  auto r = settle_view(core, tag, send);
  if (r.ok()) settled = true;
  return r;
}

}  // namespace

Result<void> Delivery::ack(AckOptions options) const {
  return settle_once(settled_, *channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.ack(id, m_->delivery_tag, options.multiple);
  });
}

Result<void> Delivery::nack(NackOptions options) const {
  return settle_once(settled_, *channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.nack(id, m_->delivery_tag, options.multiple, options.requeue);
  });
}

Result<void> Delivery::reject(RejectOptions options) const {
  return settle_once(settled_, *channel_, m_->delivery_tag, [&](Connection& c, engine::ChannelId id) {
    return c.reject(id, m_->delivery_tag, options.requeue);
  });
}

Message Delivery::take() const {
  Message m;
  m.assign(*m_, *channel_, nullptr);
  if (m.d_) m.d_->settled = settled_;
  settled_ = true;
  return m;
}

Message Delivery::copy() const {
  Message m;
  m.assign(*m_, *channel_, nullptr);
  if (m.d_) m.d_->copy = true;
  return m;
}

// ---- Message

namespace {

// Sizes, then copies, a message's properties into its buffer: every text property and the
// headers' encoded bytes are copied as they are (no re-encoding), and the views repointed.
struct PropertyBytes {
  std::size_t total = 0;
  bool any = false;  // the message has a property at all
  bool ok = true;    // false: its headers table cannot be sized (and is not counted)
  void shortstr(int, const char*, const std::optional<std::string_view>& v) {
    any |= v.has_value();
    if (v) total += v->size();
  }
  void table(int, const char*, const std::optional<wire::TableRef>& v) {
    if (!v) return;
    any = true;
    auto n = v->encoded_size();
    if (n.ok()) total += *n;
    else ok = false;
  }
  template <class T> void octet(int, const char*, const std::optional<T>& v) { any |= v.has_value(); }
  template <class T> void timestamp(int, const char*, const std::optional<T>& v) { any |= v.has_value(); }
};

struct PropertyCopy {
  std::byte* out;
  void shortstr(int, const char*, std::optional<std::string_view>& v) {
    if (!v) return;
    if (!v->empty()) std::memcpy(out, v->data(), v->size());
    v = std::string_view(reinterpret_cast<const char*>(out), v->size());
    out += v->size();
  }
  void table(int, const char*, std::optional<wire::TableRef>& v) {
    if (!v) return;
    const std::size_t n = *v->encoded_size();  // PropertyBytes checked it
    wire::Writer w(out);
    v->encode_content(w);
    v = wire::TableRef::validated(std::span<const std::byte>(out, n));
    out += n;
  }
  template <class T> void octet(int, const char*, const std::optional<T>&) {}
  template <class T> void timestamp(int, const char*, const std::optional<T>&) {}
};

}  // namespace

const wire::BasicProperties& Message::properties() const noexcept {
  return d_ && d_->has_properties ? d_->properties : no_properties;
}

void Message::give_back(detail::MessageData* d) noexcept {
  auto pool = std::move(d->pool);
  d->channel.reset();  // a pooled node keeps no channel (nor its connection) alive
  if (pool) pool->give(d);
  else delete d;
}

void Message::assign(const engine::Message& m, std::shared_ptr<detail::ChannelCore> channel,
                     const std::shared_ptr<detail::MessagePool>& pool, std::uint32_t message_count) {
  if (!d_) {
    d_ = pool ? pool->take() : nullptr;
    if (!d_) d_ = new detail::MessageData;
    d_->pool = pool;
  }
  auto& d = *d_;
  PropertyBytes sizes;
  if (m.properties) wire::BasicProperties::fields(*m.properties, sizes);
  d.has_properties = sizes.any;
  if (d.has_properties) {
    d.properties = *m.properties;
    // A headers table that cannot be sized was never valid: keep the message without it
    // (its bytes were not counted).
    if (!sizes.ok) d.properties.headers.reset();
  }
  const std::size_t total = m.exchange.size() + m.routing_key.size() + m.consumer_tag.size() + sizes.total + m.body.size();
  d.storage.resize(total);
  std::byte* out = d.storage.data();
  auto put = [&](std::string_view s) {
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    std::string_view view{reinterpret_cast<const char*>(out), s.size()};
    out += s.size();
    return view;
  };
  d.exchange = put(m.exchange);
  d.routing_key = put(m.routing_key);
  d.consumer_tag = put(m.consumer_tag);
  if (d.has_properties) {
    PropertyCopy copy{out};
    wire::BasicProperties::fields(d.properties, copy);
    out = copy.out;
  }
  if (!m.body.empty()) std::memcpy(out, m.body.data(), m.body.size());
  d.body = std::span<const std::byte>(out, m.body.size());
  d.delivery_tag = m.delivery_tag;
  d.redelivered = m.redelivered;
  d.message_count = message_count;
  d.settled = false;
  d.copy = false;
  d.channel = std::move(channel);
}

Result<wire::FieldTable> Message::headers() const {
  if (!d_ || !d_->properties.headers) return wire::FieldTable{};
  return d_->properties.headers->to_table();
}

engine::Message Message::view() const noexcept {
  engine::Message m;
  if (!d_) return m;
  m.channel = d_->channel ? d_->channel->id : 0;
  m.consumer_tag = d_->consumer_tag;
  m.delivery_tag = d_->delivery_tag;
  m.redelivered = d_->redelivered;
  m.exchange = d_->exchange;
  m.routing_key = d_->routing_key;
  m.properties = &properties();
  m.body = d_->body;
  return m;
}

Result<void> Message::ack(AckOptions options) { return settle(Settle::ack, options.multiple, false); }
Result<void> Message::nack(NackOptions options) { return settle(Settle::nack, options.multiple, options.requeue); }
Result<void> Message::reject(RejectOptions options) { return settle(Settle::reject, false, options.requeue); }

Result<void> Message::settle(Settle how, bool multiple, bool requeue) {
  if (!d_ || !d_->channel) return make_error(errc::invalid_argument, "an empty message (moved from, or never delivered)");
  auto& d = *d_;
  if (d.copy)
    return make_error(errc::invalid_argument,
                      "delivery " + std::to_string(d.delivery_tag) + " is a copy: whoever holds its settle settles it");
  if (d.settled) return make_error(errc::invalid_argument, "delivery " + std::to_string(d.delivery_tag) + " was already settled");
  if (!d.channel->open.load(std::memory_order_acquire)) return d.channel->stale(d.delivery_tag);
  auto send = [how, multiple, requeue, tag = d.delivery_tag](Connection& c, engine::ChannelId id) -> Result<void> {
    switch (how) {
      case Settle::ack: return c.ack(id, tag, multiple);
      case Settle::nack: return c.nack(id, tag, multiple, requeue);
      case Settle::reject: return c.reject(id, tag, requeue);
    }
    return {};
  };
  if (d.channel->on_loop()) {
    auto c = d.channel->live();
    if (!c) return d.channel->stale(d.delivery_tag);
    auto r = send(*c, d.channel->id);
    if (r.ok()) d.settled = true;
    return r;
  }
  // Another thread: the loop sends it. The channel may close meanwhile; then nothing is sent
  // and the broker redelivers, as for any delivery of a dead channel.
  d.settled = true;
  d.channel->driver->post([core = d.channel, send] {
    if (auto c = core->live()) (void)send(*c, core->id);
  });
  return {};
}

}  // namespace warren::client

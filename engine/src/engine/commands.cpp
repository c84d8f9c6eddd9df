// The verbs. Each registers what will settle it (a pending request, a tracked publish) before
// it queues its frame, so an answer that arrives before the write settles always finds it.
#include <algorithm>

#include "impl.hpp"

namespace warren::engine {

using namespace detail;

Error Connection::Impl::unusable_channel(ChannelId id) {
  if (auto r = check_open(); !r.ok()) return std::move(r).error();
  Channel* ch = channel(id);
  if (!ch) {
    auto closed = closed_by_broker_.find(id);
    if (closed == closed_by_broker_.end())
      return make_error(errc::channel_closed, "channel " + std::to_string(id) + " is not open");
    Error e = closed->second;
    e.code = make_error_code(errc::channel_closed);
    e.detail = "channel " + std::to_string(id) + " was closed by the broker: " + closed->second.to_string();
    return e;
  }
  assert(std::holds_alternative<Channel::Closing>(ch->state) && "usable_channel found it usable");
  return make_error(errc::channel_closed, "channel " + std::to_string(id) + " is closing");
}

template <class M, class Answer>
Result<RequestId> Connection::Impl::request(ChannelId channel, const M& m, bool no_wait, PendingRequest::Kind kind,
                                            std::string consumer_tag, bool no_ack) {
  auto ch = usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  const RequestId id = no_wait ? 0 : ++next_request_;
  if (!no_wait) {
    (*ch)->pending.push_back(PendingRequest{.id = id, .request = M::id, .answer = Answer::id, .kind = kind,
                                            .no_ack = no_ack, .deadline = expiry(timeout_of(**ch)),
                                            .consumer_tag = std::move(consumer_tag)});
    note_timed(**ch);
  }
  if (auto w = wire::write_method(output_, channel, m, frame_max_); !w.ok()) {
    if (!no_wait) (*ch)->pending.pop_back();
    return std::move(w).error();
  }
  note_sent();
  return id;
}

detail::ReturnKey detail::return_key_of(std::string_view exchange, std::string_view routing_key,
                                        const wire::BasicProperties& properties, std::span<const std::byte> body) noexcept {
  constexpr std::uint64_t fnv_basis = 14695981039346656037ull;  // FNV-1a
  auto mix = [](std::uint64_t& h, unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  auto text = [&](std::uint64_t& h, std::string_view s) {
    for (char c : s) mix(h, static_cast<unsigned char>(c));
    mix(h, 0);
  };
  std::uint64_t route = fnv_basis;
  text(route, exchange);
  text(route, routing_key);
  for (int i = 0; i < 8; ++i) mix(route, static_cast<unsigned char>(body.size() >> (8 * i)));
  std::uint64_t content = fnv_basis;
  for (const auto* s : {&properties.message_id, &properties.correlation_id}) {
    mix(content, *s ? 1 : 0);
    if (*s) text(content, **s);
  }
  // The body's ends, not all of it: the cost stays flat in the message's size.
  const std::size_t ends = std::min<std::size_t>(body.size(), return_key_body_ends);
  for (std::size_t i = 0; i < ends; ++i) mix(content, static_cast<unsigned char>(body[i]));
  for (std::size_t i = body.size() - ends; i < body.size(); ++i) mix(content, static_cast<unsigned char>(body[i]));
  return {.route = route | 1, .content = content};  // route never 0, which means "not mandatory"
}

// Inline in its two callers here (publish, release_waiting): per message, a call cost as
// much as extending a run.
WARREN_ALWAYS_INLINE void Connection::Impl::track_publish(Channel& ch, PublishId id, Instant deadline,
                                                          Duration timeout, ReturnKey return_key) {
  if (Confirms* c = ch.confirms.get()) {
    c->unconfirmed.push_back(Unconfirmed{id, c->next_seq++, deadline, return_key, false, timeout});
    note_timed(ch);
    ++unsettled_publishes_;
    c->due.lower(deadline);
  } else {
    const std::uint64_t end = written_total_ + output_.size_bytes();
    const Instant made_at = deadline - timeout;  // a publish that waited out a block: when it was made
    if (!unwritten_.empty()) {
      Unwritten& run = unwritten_.back();
      if (run.channel == ch.id && run.last + 1 == id && run.timeout == timeout && !run.settled &&
          made_at - run.first_at < Unwritten::run_span) {
        run.last = id;
        ++run.count;
        run.end_offset = end;
        run.deadline = deadline;  // unwritten_due_ holds an earlier one: the check comes early
        return;
      }
    }
    unwritten_.push_back(Unwritten{.id = id, .last = id, .count = 1, .channel = ch.id, .end_offset = end,
                                   .first_at = made_at, .deadline = deadline, .settled = false, .timeout = timeout});
    unwritten_due_.lower(deadline);
  }
}

// The broker stopped reading: the publish waits here, encoded, and takes its sequence number
// only when it is queued. Out of line: the common publish has no room for it.
Result<PublishId> Connection::Impl::publish_waiting(ChannelId channel, const wire::BasicPublish& m,
                                                    const wire::BasicProperties& properties,
                                                    std::span<const std::byte> body, Instant deadline,
                                                    Duration timeout, ReturnKey return_key) {
  // Twice the output limit is a hard bound, past the first waiting publish: one message
  // larger than the limit can still wait.
  if (!waiting_.empty() && output_.size_bytes() + waiting_bytes_ > 2 * options_.output_limit_bytes)
    return make_error(errc::resource_locked, "the connection is blocked and " + std::to_string(waiting_bytes_) +
                                                 " bytes of publishes already wait");
  wire::OutputQueue scratch;
  if (auto w = wire::write_content(scratch, channel, m, properties, body, frame_max_); !w.ok())
    return std::move(w).error();
  const PublishId id = ++next_publish_;
  auto frames = scratch.to_vector();
  waiting_bytes_ += frames.size();
  waiting_.push_back(Waiting{id, channel, std::move(frames), deadline, return_key, timeout});
  waiting_due_.lower(deadline);
  if (congested()) was_congested_ = true;
  return id;
}

// connection.unblocked: the publishes that waited go out in the order they were made, and
// only now take their confirm sequence numbers.
void Connection::Impl::release_waiting() {
  while (!waiting_.empty() && !blocked_) {
    Waiting w = waiting_.pop_front();
    waiting_bytes_ -= w.frames.size();
    Channel* ch = channel(w.channel);
    if (!ch || std::holds_alternative<Channel::Closing>(ch->state)) continue;  // failed when it closed
    output_.append(w.frames);
    note_sent();
    track_publish(*ch, w.id, w.deadline, w.timeout, w.return_key);
  }
  if (waiting_.empty()) waiting_due_.at.reset();
}

// ---- public verbs

Result<ChannelId> Connection::open_channel(Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  if (auto r = s.check_open(); !r.ok()) return std::move(r).error();
  // The lowest free number. The table grows only as far as the numbers in use: a connection
  // of one channel holds one slot, not channel_max's 2,047.
  const std::size_t limit = std::size_t{s.channel_max_ == 0 ? std::uint16_t{65535} : s.channel_max_} + 1;
  ChannelId id = 0;
  for (std::size_t n = 1; n < s.channels_.size(); ++n)
    if (!s.channels_[n]) {
      id = static_cast<ChannelId>(n);
      break;
    }
  if (id == 0 && std::max<std::size_t>(s.channels_.size(), 1) < limit) {
    id = static_cast<ChannelId>(std::max<std::size_t>(s.channels_.size(), 1));
    s.channels_.resize(std::size_t{id} + 1);
  }
  if (id == 0)
    return make_error(errc::resource_locked, "all " + std::to_string(limit - 1) + " channels are in use (channel_max)");
  auto ch = std::make_unique<Channel>();
  ch->id = id;
  ch->state = Channel::Opening{s.expiry(s.options_.request_timeout)};
  ch->pending.push_back(PendingRequest{.id = 0, .request = wire::ChannelOpen::id, .answer = wire::ChannelOpenOk::id,
                                       .kind = PendingRequest::Kind::open,
                                       .deadline = s.expiry(s.options_.request_timeout)});
  s.note_timed(*ch);
  s.channels_[id] = std::move(ch);
  s.closed_by_broker_.erase(id);
  s.active_.push_back(id);
  s.send_method(id, wire::ChannelOpen{});
  return id;
}

Result<RequestId> Connection::close_channel(ChannelId channel, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  const RequestId id = ++s.next_request_;
  Error cause = make_error(errc::channel_closed, "closed by the application");
  cause.reply_code = wire::reply::success;
  s.begin_channel_close(**ch, cause, id);
  return id;
}

namespace {
template <class M> concept AnsweredByOne = requires { typename M::Ok; };
template <class M> bool no_wait_of(const M& m) {
  if constexpr (requires { m.no_wait; }) return m.no_wait;
  else return false;
}
}  // namespace

Result<RequestId> Connection::request(ChannelId channel, const wire::Method& method, Instant now) {
  impl_->now_ = now;
  return std::visit([&](const auto& m) -> Result<RequestId> {
    using M = std::decay_t<decltype(m)>;
    if constexpr (AnsweredByOne<M>) {
      auto r = impl_->request<M, typename M::Ok>(channel, m, no_wait_of(m));
      // The application's own qos: from then on, subscriptions on this channel that name no
      // prefetch send none.
      if constexpr (std::is_same_v<M, wire::BasicQos>)
        if (r.ok()) impl_->channel(channel)->app_qos = true;
      return r;
    } else {
      return make_error(errc::invalid_argument,
                        std::string(M::name) + " is not a request this path sends (it names no single answer)");
    }
  }, method);
}

Result<RequestId> Connection::channel_flow(ChannelId channel, const wire::ChannelFlow& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::exchange_declare(ChannelId channel, const wire::ExchangeDeclare& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::exchange_delete(ChannelId channel, const wire::ExchangeDelete& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::exchange_bind(ChannelId channel, const wire::ExchangeBind& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::exchange_unbind(ChannelId channel, const wire::ExchangeUnbind& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::queue_declare(ChannelId channel, const wire::QueueDeclare& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::queue_bind(ChannelId channel, const wire::QueueBind& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::queue_unbind(ChannelId channel, const wire::QueueUnbind& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::queue_purge(ChannelId channel, const wire::QueuePurge& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::queue_delete(ChannelId channel, const wire::QueueDelete& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::basic_qos(ChannelId channel, const wire::BasicQos& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::basic_consume(ChannelId channel, const wire::BasicConsume& m,
                                            std::optional<std::uint16_t> prefetch, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  if (m.no_wait && m.consumer_tag.empty())
    return make_error(errc::invalid_argument, "a no-wait basic.consume needs a consumer tag of its own");
  if (!m.consumer_tag.empty() && (*ch)->find_consumer(m.consumer_tag))
    return make_error(errc::invalid_argument, "consumer tag " + std::string(m.consumer_tag) + " is already in use");
  // Check the consume encodes before its qos is queued: the two go out together or not at all.
  if (auto size = wire::detail::payload_size(m); !size.ok()) return std::move(size).error();
  // RabbitMQ applies the prefetch in force when the consume arrives, so the qos goes first,
  // immediately before it. Without any prefetch, a subscription would receive the whole queue.
  std::optional<std::uint16_t> qos = prefetch;
  if (!qos && !(*ch)->app_qos) qos = s.options_.default_prefetch;
  if (qos) {
    auto q = s.request<wire::BasicQos, wire::BasicQosOk>(channel, wire::BasicQos{0, *qos, false}, false);
    if (!q.ok()) return std::move(q).error();
    // The engine's own qos: its answer emits nothing.
    (*ch)->pending.back().id = 0;
    --s.next_request_;
  }
  auto r = s.request<wire::BasicConsume, wire::BasicConsumeOk>(channel, m, m.no_wait, PendingRequest::Kind::consume,
                                                               std::string(m.consumer_tag), m.no_ack);
  bool stream = false;
  if (!m.arguments.empty())
    if (auto table = m.arguments.to_table(); table.ok()) stream = table->find("x-stream-offset") != nullptr;
  if (r.ok() && m.no_wait)
    (*ch)->consumers.push_back(std::make_unique<Consumer>(Consumer{std::string(m.consumer_tag), m.no_ack, false, stream}));
  else if (r.ok())
    (*ch)->pending.back().stream = stream;
  return r;
}

Result<RequestId> Connection::basic_cancel(ChannelId channel, std::string_view consumer_tag, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  Consumer* c = (*ch)->find_consumer(consumer_tag);
  if (!c) return make_error(errc::not_found, "no consumer " + std::string(consumer_tag) + " on channel " + std::to_string(channel));
  if (c->cancelling) return make_error(errc::invalid_argument, "consumer " + std::string(consumer_tag) + " is already cancelling");
  // Until cancel-ok the tag stays routed, so a delivery that raced the cancel is seen and
  // handed back rather than left unacknowledged.
  c->cancelling = true;
  auto r = s.request<wire::BasicCancel, wire::BasicCancelOk>(channel, wire::BasicCancel{consumer_tag, false}, false,
                                                             PendingRequest::Kind::cancel, std::string(consumer_tag));
  if (!r.ok()) c->cancelling = false;
  return r;
}

Result<RequestId> Connection::basic_get(ChannelId channel, const wire::BasicGet& m, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  auto r = s.request<wire::BasicGet, wire::BasicGetOk>(channel, m, false, PendingRequest::Kind::get);
  if (r.ok()) s.channel(channel)->pending.back().alternative = wire::BasicGetEmpty::id;
  return r;
}

Result<RequestId> Connection::basic_recover(ChannelId channel, const wire::BasicRecover& m, Instant now) {
  return request(channel, m, now);
}

Result<RequestId> Connection::confirm_select(ChannelId channel, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  const bool again = (*ch)->confirms != nullptr;
  auto r = s.request<wire::ConfirmSelect, wire::ConfirmSelectOk>(channel, wire::ConfirmSelect{false}, false);
  // Numbering starts with the select itself: a publish queued before select-ok is number 1.
  // RabbitMQ answers a second select with select-ok and keeps counting, and so does this.
  if (r.ok() && !again) (*ch)->confirms = std::make_unique<Confirms>();
  return r;
}

Result<PublishId> Connection::publish(ChannelId channel, const wire::BasicPublish& m,
                                      const wire::BasicProperties& properties, std::span<const std::byte> body,
                                      Instant now) {
  return publish(channel, m, properties, body, now, PublishOptions{});
}

Result<void> Connection::set_channel_timeout(ChannelId channel, Duration timeout) {
  auto ch = impl_->usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  if (timeout <= Duration::zero()) return make_error(errc::invalid_argument, "a channel timeout must be positive");
  (*ch)->timeout = timeout;
  return {};
}

Result<Duration> Connection::channel_timeout(ChannelId channel) {
  auto ch = impl_->usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  return impl_->timeout_of(**ch);
}

Result<PublishId> Connection::publish(ChannelId channel, const wire::BasicPublish& m,
                                      const wire::BasicProperties& properties, std::span<const std::byte> body,
                                      Instant now, const PublishOptions& options) {
  auto& s = *impl_;
  s.now_ = now;
  detail::Channel* const ch = s.usable_channel_or_null(channel);
  if (!ch) [[unlikely]]
    return s.unusable_channel(channel);
  if (body.size() > s.options_.max_body_bytes) {
    Error e = make_error(errc::message_too_large, "a message body of " + std::to_string(body.size()) +
                                                      " bytes is over max_body_bytes " +
                                                      std::to_string(s.options_.max_body_bytes) +
                                                      " (not sent; the channel stays open)");
    e.sent = Sent::no;
    return e;
  }
  if (options.timeout && *options.timeout <= Duration::zero())
    return make_error(errc::invalid_argument, "a publish timeout must be positive");
  const Duration timeout = options.timeout.value_or(s.timeout_of(*ch));
  const Instant deadline = s.expiry(timeout);
  const ReturnKey return_key =
      (m.mandatory && ch->confirms) ? return_key_of(m.exchange, m.routing_key, properties, body) : ReturnKey{};
  if (s.blocked_ || !s.waiting_.empty()) [[unlikely]]
    return s.publish_waiting(channel, m, properties, body, deadline, timeout, return_key);
  if (auto w = wire::write_content(s.output_, channel, m, properties, body, s.frame_max_); !w.ok())
    return std::move(w).error();
  s.note_sent();
  const PublishId id = ++s.next_publish_;
  s.track_publish(*ch, id, deadline, timeout, return_key);
  if (s.congested()) s.was_congested_ = true;
  return id;
}

namespace {

Result<void> check_tag(const Channel& ch, std::uint64_t tag, bool multiple) {
  if (tag == 0 && multiple) return {};  // everything delivered so far
  if (tag == 0 || tag > ch.max_delivery_tag)
    return make_error(errc::invalid_argument, "delivery tag " + std::to_string(tag) + " was never delivered on channel " +
                                                     std::to_string(ch.id));
  return {};
}

}  // namespace

Result<void> Connection::ack(ChannelId channel, const wire::BasicAck& m) {
  auto& s = *impl_;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  if (auto t = check_tag(**ch, m.delivery_tag, m.multiple); !t.ok()) return t;
  s.send_method(channel, m);
  return {};
}

Result<void> Connection::nack(ChannelId channel, const wire::BasicNack& m) {
  auto& s = *impl_;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  if (auto t = check_tag(**ch, m.delivery_tag, m.multiple); !t.ok()) return t;
  s.send_method(channel, m);
  return {};
}

Result<void> Connection::reject(ChannelId channel, const wire::BasicReject& m) {
  auto& s = *impl_;
  auto ch = s.usable_channel(channel);
  if (!ch.ok()) return std::move(ch).error();
  if (auto t = check_tag(**ch, m.delivery_tag, false); !t.ok()) return t;
  s.send_method(channel, m);
  return {};
}

Result<RequestId> Connection::update_secret(std::string_view new_secret, std::string_view reason, Instant now) {
  auto& s = *impl_;
  s.now_ = now;
  if (auto r = s.check_open(); !r.ok()) return std::move(r).error();
  if (reason.size() > 255) return make_error(errc::string_too_long, "an update-secret reason is at most 255 bytes");
  const wire::Method m{wire::ConnectionUpdateSecret{new_secret, reason}};
  auto size = wire::method_payload_size(m);
  if (!size.ok()) return std::move(size).error();
  // A method is one frame: a secret that does not fit is refused here, not sent cut.
  if (s.frame_max_ != 0 && *size + wire::frame_overhead_bytes > s.frame_max_)
    return make_error(errc::frame_too_large, "a new secret of " + std::to_string(new_secret.size()) +
                                                 " bytes does not fit in a frame (frame_max " +
                                                 std::to_string(s.frame_max_) + ")");
  const RequestId id = ++s.next_request_;
  s.secret_updates_.push_back(detail::SecretUpdate{id, s.expiry(s.options_.request_timeout)});
  s.send_method(0, m);
  return id;
}

Result<void> Connection::close(Instant now, std::uint16_t reply_code, std::string_view reply_text) {
  auto& s = *impl_;
  s.now_ = now;
  if (s.error_) return *s.error_;
  if (std::holds_alternative<ClosingConnection>(s.phase_)) return {};
  Error cause = make_error(errc::connection_closed, "closed by the application");
  cause.reply_code = wire::reply::success;
  if (!std::holds_alternative<Running>(s.phase_)) {
    // Mid-handshake there is nothing to close politely: drop it.
    s.discard_output_ = true;
    s.fail(std::move(cause), 0);
    return {};
  }
  s.send_method(0, wire::ConnectionClose{reply_code, reply_text.substr(0, 255), 0, 0});
  // After our close the broker's frames are discarded, so nothing pending can be answered.
  for (ChannelId id : s.active_) s.fail_channel_work(*s.channels_[id], cause);
  while (!s.secret_updates_.empty()) s.emit(RequestFailed{0, s.secret_updates_.pop_front().id, cause});
  s.phase_ = ClosingConnection{s.expiry(s.options_.close_timeout)};
  return {};
}
}  // namespace warren::engine

// Connection lifecycle: construction, bytes in, events out, output accounting, deadlines and
// the fatal latch. Frame handling is in input.cpp, the verbs in commands.cpp.
#include <algorithm>
#include <cassert>

#include "impl.hpp"
#include "warren/engine/negotiate.hpp"

namespace warren::engine {

using namespace detail;

namespace {
std::string ms_text(Duration d) { return std::to_string(d.count()) + " ms"; }
// A heartbeat's deadline, rounded up to a granule that every connection of the process shares
// (a multiple of it on the steady clock): the largest power of two of milliseconds within
// 1/16 of the interval, 1,024 ms at most. Ten thousand connections' heartbeats then fall due
// together, one turn of the loop per granule instead of one per connection, each at most
// 1/16 of its interval late; and traffic that moves the deadline within its granule does not
// move the timer (the client re-arms it only when the deadline changes).
Instant on_heartbeat_granule(Instant deadline, std::chrono::seconds interval) {
  using std::chrono::milliseconds;
  const auto within = std::chrono::duration_cast<milliseconds>(interval) / 16;
  milliseconds granule{1};
  while (granule * 2 <= within && granule < milliseconds{1024}) granule *= 2;
  const auto since = deadline.time_since_epoch();
  const auto into = since % granule;
  return into == decltype(into)::zero() ? deadline : deadline + (granule - into);
}

// A publish's failure, with whether its bytes can have reached the broker.
Error sent_as(Sent sent, Error e) {
  e.sent = sent;
  return e;
}
}  // namespace

Connection::Impl::Impl(ConnectionOptions options, Instant now)
    : options_(std::move(options)),
      now_(now),
      handshake_deadline_(now + options_.handshake_timeout),
      last_sent_(now),
      last_received_(now) {
  wire::write_protocol_header(output_);
}

void Connection::Impl::handle_bytes(std::span<const std::byte> bytes, Instant now) {
  now_ = now;
  retired_consumers_.clear();
  if (input_dead_ || bytes.empty()) return;
  last_received_ = now;
  if (input_pending_) {
    // A driver bug: frames of the earlier bytes are still unread and may be viewed by events.
    fail(make_error(errc::protocol_error, "handle_bytes called before poll_event() used up the previous bytes"), 0);
    return;
  }
  decoder_.feed(bytes);
  input_pending_ = true;
}

void Connection::Impl::handle_eof(Instant now, std::string_view why) {
  now_ = now;
  retired_consumers_.clear();
  if (latched()) return;
  if (std::holds_alternative<ClosingConnection>(phase_)) {
    // We asked to close; a broker that drops the socket instead of answering has closed it too.
    Error e = make_error(errc::connection_closed, "closed by the application");
    e.reply_code = wire::reply::success;
    discard_output_ = true;
    fail(std::move(e), 0);
    return;
  }
  discard_output_ = true;
  const bool handshaking = std::holds_alternative<AwaitStart>(phase_) ||
                           std::holds_alternative<AwaitTune>(phase_) ||
                           std::holds_alternative<AwaitOpenOk>(phase_);
  std::string detail = handshaking ? "the broker closed the connection during the handshake"
                                    : "the broker closed the connection";
  if (!why.empty()) detail = (handshaking ? "during the handshake: " : "") + std::string(why);
  fail(make_error(errc::connection_lost, std::move(detail)), 0);
}

std::optional<Event> Connection::Impl::poll_event() {
  if (!retired_consumers_.empty()) retired_consumers_.clear();
  for (;;) {
    if (next_event_) {
      std::optional<Event> out = std::move(next_event_);
      next_event_.reset();
      return out;
    }
    if (!events_.empty()) return events_.pop_front();
    if (!input_pending_ || input_dead_) return std::nullopt;
    auto next = decoder_.next();
    if (!next.ok()) {
      fail(next.error(), wire::reply::frame_error);
      continue;
    }
    if (!next->has_value()) {
      input_pending_ = false;
      continue;
    }
    on_frame(**next);
  }
}

void Connection::Impl::consume_output(std::size_t n) {
  n = std::min(n, output_.size_bytes());
  output_.consume(n);
  written_total_ += n;
  // One event per run of the same channel's publishes, not one per publish.
  while (!unwritten_.empty() && unwritten_.front().end_offset <= written_total_) {
    auto u = unwritten_.pop_front();
    if (u.settled) continue;  // it timed out first, and was told so
    PublishId last = u.last;
    std::uint64_t count = u.count;
    while (!unwritten_.empty() && unwritten_.front().end_offset <= written_total_ &&
           unwritten_.front().channel == u.channel && !unwritten_.front().settled) {
      auto next = unwritten_.pop_front();
      last = next.last;
      count += next.count;
    }
    emit(PublishDone{u.channel, u.id, last, PublishOutcome::written, {}, u.first_at, count});
  }
  if (unwritten_.empty()) unwritten_due_.at.reset();
  if (was_congested_ && !congested()) {
    was_congested_ = false;
    emit(Writable{});
  }
}

bool Connection::Impl::finished() const noexcept {
  return std::holds_alternative<Finished>(phase_) && (discard_output_ || output_.empty());
}

// ---- deadlines

std::optional<Instant> Connection::Impl::poll_timeout() const {
  std::optional<Instant> soonest;
  auto consider = [&](Instant t) {
    if (!soonest || t < *soonest) soonest = t;
  };
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, AwaitStart> || std::is_same_v<P, AwaitTune> ||
                      std::is_same_v<P, AwaitOpenOk>)
          consider(handshake_deadline_);
        else if constexpr (std::is_same_v<P, ClosingConnection>)
          consider(p.deadline);
      },
      phase_);
  if (std::holds_alternative<Finished>(phase_)) return std::nullopt;
  if (heartbeat_s_ > 0 && (std::holds_alternative<Running>(phase_) || std::holds_alternative<ClosingConnection>(phase_))) {
    const std::chrono::seconds interval{heartbeat_s_};
    consider(on_heartbeat_granule(last_sent_ + interval, interval));
    consider(on_heartbeat_granule(last_received_ + 2 * interval, interval));
  }
  for (std::size_t i = 0; i < timed_.size();) {
    Channel* ch = channels_.size() > timed_[i] ? channels_[timed_[i]].get() : nullptr;
    bool holds = false;
    if (ch && ch->timed) {
      const auto deadline = [&](Instant t) {
        consider(t);
        holds = true;
      };
      if (const auto* o = std::get_if<Channel::Opening>(&ch->state)) deadline(o->deadline);
      if (const auto* c = std::get_if<Channel::Closing>(&ch->state)) deadline(c->deadline);
      if (!ch->pending.empty()) deadline(ch->pending.front().deadline);
      if (const Confirms* c = ch->confirms.get(); c && !c->unconfirmed.empty() && c->due.at) deadline(*c->due.at);
    }
    if (holds) {
      ++i;
      continue;
    }
    // None left (or the number was freed): off the list until it gains one again.
    if (ch) ch->timed = false;
    timed_[i] = timed_.back();
    timed_.pop_back();
  }
  if (!unwritten_.empty() && unwritten_due_.at) consider(*unwritten_due_.at);
  if (!waiting_.empty() && waiting_due_.at) consider(*waiting_due_.at);
  if (!secret_updates_.empty()) consider(secret_updates_.front().deadline);
  return soonest;
}

void Connection::Impl::handle_timeout(Instant now) {
  now_ = now;
  retired_consumers_.clear();
  if (latched()) return;
  // A timer turn (a heartbeat's, on an idle connection) with nothing queued: the write
  // buffers go back. A busy connection's turns come from its reads and writes instead, and
  // it keeps reusing its blocks.
  output_.release_when_empty();
  if (std::holds_alternative<AwaitStart>(phase_) || std::holds_alternative<AwaitTune>(phase_) ||
      std::holds_alternative<AwaitOpenOk>(phase_)) {
    if (now >= handshake_deadline_) {
      discard_output_ = true;
      fail(make_error(errc::timeout, "the handshake did not finish within " + ms_text(options_.handshake_timeout)), 0);
      return;
    }
  }
  if (auto* c = std::get_if<ClosingConnection>(&phase_); c && now >= c->deadline) {
    discard_output_ = true;
    // A broker that has the connection blocked reads nothing once a publish came: say so.
    std::string why = "connection.close-ok did not arrive within " + ms_text(options_.close_timeout);
    if (blocked_) why += " (the broker had the connection blocked: " + blocked_reason_ + ")";
    fail(make_error(errc::timeout, std::move(why)), 0);
    return;
  }
  if (heartbeat_s_ > 0) {
    const std::chrono::seconds interval{heartbeat_s_};
    if (now - last_received_ >= 2 * interval) {
      discard_output_ = true;
      heartbeat_missed_ = true;
      fail(make_error(errc::timeout, "no traffic from the broker for " + std::to_string(2 * heartbeat_s_) +
                                         " s (heartbeat " + std::to_string(heartbeat_s_) + " s)"),
           0);
      return;
    }
    if (now - last_sent_ >= interval) {
      wire::write_heartbeat(output_);
      note_sent();
    }
  }

  if (!secret_updates_.empty() && std::holds_alternative<Running>(phase_) && now >= secret_updates_.front().deadline) {
    // Channel 0's answers pair by order too, and it cannot be closed alone: a late
    // update-secret-ok would be taken for the next one's.
    fail(make_error(errc::timeout, "connection.update-secret had no answer within " + ms_text(options_.request_timeout)),
         wire::reply::success);
    return;
  }

  // Channels: copy the numbers, since a timeout may free a channel.
  std::vector<ChannelId> ids = active_;
  for (ChannelId id : ids) {
    Channel* ch = channel(id);
    if (!ch) continue;
    if (auto* o = std::get_if<Channel::Opening>(&ch->state); o && now >= o->deadline) {
      // The number stays reserved until the broker answers the channel.close that follows:
      // a broker that opened it late would refuse a second open on it (504, a connection error).
      Error cause = make_error(errc::timeout, "channel.open on channel " + std::to_string(id) +
                                                  " had no answer within " + ms_text(options_.request_timeout));
      cause.channel_close = true;  // this timeout put the channel out of use
      begin_channel_close(*ch, cause, 0);
      emit(ChannelClosed{id, std::move(cause)});
      continue;
    }
    if (auto* c = std::get_if<Channel::Closing>(&ch->state); c && now >= c->deadline) {
      if (c->crossed) {
        // The broker closed it too and we answered: it is closed, and the application's
        // close_channel, if it asked, is done.
        const RequestId request = c->request;
        free_channel(id);
        if (request != 0) {
          emit(RequestDone{id, request, wire::ChannelCloseOk{}});
          Error e = make_error(errc::channel_closed, "closed by the application");
          e.reply_code = wire::reply::success;
          emit(ChannelClosed{id, std::move(e)});
        }
        continue;
      }
      discard_output_ = true;
      fail(make_error(errc::timeout, "channel.close-ok for channel " + std::to_string(id) + " did not arrive within " +
                                         ms_text(options_.close_timeout)),
           0);
      return;
    }
    if (std::holds_alternative<Channel::Open>(ch->state) && !ch->pending.empty() &&
        now >= ch->pending.front().deadline) {
      // Answers pair by order: with one missing, a late one would settle the next request.
      // So the channel closes, with the timeout as the reason.
      const auto& front = ch->pending.front();
      Error cause = make_error(errc::timeout, std::string(wire::method_name(front.request)) + " on channel " +
                                                  std::to_string(id) + " had no answer within " +
                                                  ms_text(timeout_of(*ch)));
      cause.channel_close = true;  // this timeout put the channel out of use
      begin_channel_close(*ch, cause, 0);
      emit(ChannelClosed{id, std::move(cause)});
      continue;
    }
    if (Confirms* c = ch->confirms.get(); c && c->due.at && now >= *c->due.at) {
      // A scan: with per-publish timeouts the earliest deadline need not be at the front.
      std::optional<Instant> next;
      for (std::size_t i = 0; i < c->unconfirmed.size(); ++i) {
        Unconfirmed& u = c->unconfirmed[i];
        if (u.settled) continue;
        if (now < u.deadline) {
          if (!next || u.deadline < *next) next = u.deadline;
          continue;
        }
        settle(u);
        emit(PublishDone{id, u.id, u.id, PublishOutcome::timed_out,
                         sent_as(Sent::maybe, make_error(errc::timeout, "no confirm within " + ms_text(u.timeout) +
                                                                           "; the broker may or may not have the message"))});
      }
      while (!c->unconfirmed.empty() && c->unconfirmed.front().settled) c->unconfirmed.pop_front();
      c->due.at = next;
    }
  }
  expire_publishes(now);
}

// The connection-wide queues of publishes (unwritten, waiting on a blocked connection), when
// the earliest deadline may have passed: each one past its deadline is told, wherever it sits.
void Connection::Impl::expire_publishes(Instant now) {
  if (unwritten_due_.at && now >= *unwritten_due_.at) {
    std::optional<Instant> next;
    for (std::size_t i = 0; i < unwritten_.size(); ++i) {
      Unwritten& u = unwritten_[i];
      if (u.settled) continue;
      if (now < u.deadline) {
        if (!next || u.deadline < *next) next = u.deadline;
        continue;
      }
      u.settled = true;  // its bytes are queued: it stays until they are written
      // Its bytes stay queued and are written later: the broker may yet have it.
      emit(PublishDone{u.channel, u.id, u.last, PublishOutcome::timed_out,
                       sent_as(Sent::maybe, make_error(errc::timeout, "not written within " + ms_text(u.timeout))),
                       {}, u.count});
    }
    unwritten_due_.at = next;
  }
  if (waiting_due_.at && now >= *waiting_due_.at) {
    std::optional<Instant> next;
    for (std::size_t n = waiting_.size(); n > 0; --n) {
      Waiting w = waiting_.pop_front();
      if (now < w.deadline) {
        if (!next || w.deadline < *next) next = w.deadline;
        waiting_.push_back(std::move(w));
        continue;
      }
      waiting_bytes_ -= w.frames.size();
      emit(PublishDone{w.channel, w.id, w.id, PublishOutcome::timed_out,
                       sent_as(Sent::no, make_error(errc::timeout, "the connection stayed blocked for " + ms_text(w.timeout) +
                                                                        "; the message was not sent"))});
    }
    waiting_due_.at = next;
  }
}

// ---- the latch

void Connection::Impl::fail(Error cause, std::uint16_t close_code) {
  if (latched()) return;
  cause.connection_ended = true;  // every waiter told with it knows the whole connection is gone
  const bool past_start = !std::holds_alternative<AwaitStart>(phase_);
  if (close_code != 0 && past_start && !discard_output_) {
    (void)wire::write_method(output_, 0, wire::ConnectionClose{close_code, cause.detail.substr(0, 255), cause.class_id, cause.method_id},
                             frame_max_);
  }
  error_ = cause;
  input_dead_ = true;
  input_pending_ = false;
  phase_ = Finished{};
  for (ChannelId id : active_) {
    Channel& ch = *channels_[id];
    fail_channel_work(ch, cause);
    // Waiters that are not in `pending`: a channel still opening (its open has no request
    // id) and the application's channel.close awaiting close-ok.
    if (std::holds_alternative<Channel::Opening>(ch.state)) emit(ChannelClosed{id, cause});
    if (const auto* c = std::get_if<Channel::Closing>(&ch.state); c && c->request != 0)
      emit(RequestFailed{id, c->request, cause});
  }
  while (!waiting_.empty()) {
    auto w = waiting_.pop_front();
    emit(PublishDone{w.channel, w.id, w.id, PublishOutcome::failed, sent_as(Sent::no, cause)});
  }
  waiting_bytes_ = 0;
  while (!secret_updates_.empty()) emit(RequestFailed{0, secret_updates_.pop_front().id, cause});
  // Part of its bytes may have gone out (the kernel had them): the broker may have it.
  while (!unwritten_.empty()) {
    auto u = unwritten_.pop_front();
    if (!u.settled)
      emit(PublishDone{u.channel, u.id, u.last, PublishOutcome::failed, sent_as(Sent::maybe, cause), {}, u.count});
  }
  if (discard_output_) output_.consume(output_.size_bytes());
  emit(Closed{std::move(cause), heartbeat_missed_});
}

// Every request and publish of the channel settles with `cause`.
void Connection::Impl::fail_channel_work(Channel& ch, const Error& cause) {
  while (!ch.pending.empty()) {
    auto p = ch.pending.pop_front();
    if (p.id != 0) emit(RequestFailed{ch.id, p.id, cause});
  }
  // A basic.get whose get-ok came but whose content did not: it left `pending` already.
  if (ch.assembly_kind() == Assembly::Kind::get_ok) {
    emit(RequestFailed{ch.id, ch.assembly().request, cause});
    ch.assembly().kind = Assembly::Kind::discard;
  }
  while (ch.confirms && !ch.confirms->unconfirmed.empty()) {
    auto u = ch.confirms->unconfirmed.pop_front();
    if (u.settled) continue;
    forget_unsettled();
    emit(PublishDone{ch.id, u.id, u.id, PublishOutcome::failed, sent_as(Sent::maybe, cause)});
  }
  // Blocked publishes of this channel will never be sent.
  for (std::size_t n = waiting_.size(); n > 0; --n) {
    auto w = waiting_.pop_front();
    if (w.channel == ch.id) {
      waiting_bytes_ -= w.frames.size();
      emit(PublishDone{w.channel, w.id, w.id, PublishOutcome::failed, sent_as(Sent::no, cause)});
    } else {
      waiting_.push_back(std::move(w));
    }
  }
  retire_all_consumers(ch);
}

void Connection::Impl::begin_channel_close(Channel& ch, const Error& cause, RequestId request) {
  fail_channel_work(ch, cause);
  if (ch.assembly_kind() != Assembly::Kind::none) ch.assembly().kind = Assembly::Kind::discard;
  std::string text = cause.reply_code == 0 && cause.code ? cause.detail : std::string{};
  send_method(ch.id, wire::ChannelClose{wire::reply::success, text.substr(0, 255), 0, 0});
  ch.state = Channel::Closing{expiry(options_.close_timeout), request, false};
  note_timed(ch);
}

void Connection::Impl::retire_consumer(Channel& ch, std::string_view tag) {
  for (auto it = ch.consumers.begin(); it != ch.consumers.end(); ++it)
    if ((*it)->tag == tag) {
      retired_consumers_.push_back(std::move(*it));
      ch.consumers.erase(it);
      return;
    }
}

void Connection::Impl::retire_all_consumers(Channel& ch) {
  for (auto& c : ch.consumers) retired_consumers_.push_back(std::move(c));
  ch.consumers.clear();
}

void Connection::Impl::free_channel(ChannelId id) {
  if (id >= channels_.size() || !channels_[id]) return;
  // A closing channel takes no publishes, and closing failed its work: none is left to count.
  assert((!channels_[id]->confirms || channels_[id]->confirms->unconfirmed.empty()) &&
         "a channel freed before fail_channel_work");
  channels_[id].reset();
  active_.erase(std::remove(active_.begin(), active_.end(), id), active_.end());
}

void Connection::Impl::send_method(ChannelId channel, const wire::Method& m) {
  auto r = wire::write_method_frame(output_, channel, m, frame_max_);
  assert(r.ok() && "the engine's own methods always fit");
  (void)r;
  note_sent();
}

Result<void> Connection::Impl::check_open() const {
  if (error_) return *error_;
  if (std::holds_alternative<ClosingConnection>(phase_))
    return make_error(errc::connection_closed, "the connection is closing");
  if (!std::holds_alternative<Running>(phase_))
    return make_error(errc::protocol_error, "the connection is not open yet (wait for the Connected event)");
  return {};
}

// ---- the public face

Connection::Connection(ConnectionOptions options, Instant now)
    : impl_(std::make_unique<Impl>(std::move(options), now)) {}
Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

void Connection::handle_bytes(std::span<const std::byte> bytes, Instant now) { impl_->handle_bytes(bytes, now); }
void Connection::handle_eof(Instant now) { impl_->handle_eof(now); }
void Connection::handle_eof(Instant now, std::string_view why) { impl_->handle_eof(now, why); }
void Connection::handle_timeout(Instant now) { impl_->handle_timeout(now); }
std::optional<Event> Connection::poll_event() { return impl_->poll_event(); }
wire::OutputView Connection::pending_output() const { return impl_->output_.view(); }
std::size_t Connection::pending_output_bytes() const noexcept { return impl_->output_.size_bytes(); }
void Connection::consume_output(std::size_t n) { impl_->consume_output(n); }
std::optional<Instant> Connection::poll_timeout() const { return impl_->poll_timeout(); }
bool Connection::is_open() const noexcept { return std::holds_alternative<Running>(impl_->phase_); }
bool Connection::finished() const noexcept { return impl_->finished(); }
bool Connection::is_blocked() const noexcept { return impl_->blocked_; }
// Congestion is not a reason to stop reading: what comes in may be what clears it
// (connection.unblocked, confirms) or what must never be missed (heartbeats, a close).
// Memory stays bounded without it: deliveries by the prefetch, output by congested().
bool Connection::wants_input() const noexcept { return !impl_->input_dead_ && !impl_->input_pending_; }
bool Connection::congested() const noexcept { return impl_->congested(); }
const Error* Connection::error() const noexcept { return impl_->error_ ? &*impl_->error_ : nullptr; }
std::uint32_t Connection::frame_max_bytes() const noexcept { return impl_->frame_max_; }
std::size_t Connection::unconfirmed_publishes() const noexcept { return impl_->unsettled_publishes_; }

}  // namespace warren::engine

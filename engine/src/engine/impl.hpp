// Connection::Impl: the state and the private steps of the engine. Split over
// connection.cpp (lifecycle, outputs, deadlines), input.cpp (frames from the broker) and
// commands.cpp (the verbs).
#pragma once

#include <cassert>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "state.hpp"
#include "warren/engine/connection.hpp"
#include "warren/wire/frame_decoder.hpp"
#include "warren/wire/frame_writer.hpp"

namespace warren::engine {

class Connection::Impl {
 public:
  Impl(ConnectionOptions options, Instant now);

  // connection.cpp
  void handle_bytes(std::span<const std::byte> bytes, Instant now);
  void handle_eof(Instant now, std::string_view why = {});
  void handle_timeout(Instant now);
  std::optional<Event> poll_event();
  void consume_output(std::size_t n);
  std::optional<Instant> poll_timeout() const;
  bool finished() const noexcept;
  bool congested() const noexcept { return output_.size_bytes() + waiting_bytes_ > options_.output_limit_bytes; }

  // input.cpp
  void on_frame(const wire::FrameView& frame);
  void on_connection_method(const wire::Method& m);
  void on_channel_method(detail::Channel& ch, wire::Method& m);
  void on_answer(detail::Channel& ch, wire::Method& m);
  void on_content(detail::Channel& ch, const wire::FrameView& frame);
  void complete_message(detail::Channel& ch, std::span<const std::byte> body);
  void on_confirm(detail::Channel& ch, std::uint64_t tag, bool multiple, bool ack);

  // commands.cpp helpers
  // A channel a verb may use: the connection open and the channel open, not closing. Tested
  // inline; why it is not usable is built out of line.
  Result<detail::Channel*> usable_channel(ChannelId id) {
    if (detail::Channel* ch = usable_channel_or_null(id)) [[likely]]
      return ch;
    return unusable_channel(id);
  }
  // The same without a Result: publish's form, where building and reading one cost as much
  // as the test.
  detail::Channel* usable_channel_or_null(ChannelId id) {
    if (!error_ && std::holds_alternative<detail::Running>(phase_)) [[likely]]
      if (detail::Channel* ch = channel(id); ch && !std::holds_alternative<detail::Channel::Closing>(ch->state)) [[likely]]
        return ch;
    return nullptr;
  }
  Error unusable_channel(ChannelId id);
  template <class M, class Answer>
  Result<RequestId> request(ChannelId channel, const M& m, bool no_wait,
                            detail::PendingRequest::Kind kind = detail::PendingRequest::Kind::plain,
                            std::string consumer_tag = {}, bool no_ack = false);
  void track_publish(detail::Channel& ch, PublishId id, Instant deadline, Duration timeout, detail::ReturnKey return_key);
  Result<PublishId> publish_waiting(ChannelId channel, const wire::BasicPublish& m,
                                    const wire::BasicProperties& properties, std::span<const std::byte> body,
                                    Instant deadline, Duration timeout, detail::ReturnKey return_key);
  // A confirm-mode publish's outcome is known (acked, nacked, returned, timed out).
  void settle(detail::Unconfirmed& u) noexcept {
    u.settled = true;
    forget_unsettled();
  }
  void forget_unsettled() noexcept {
    assert(unsettled_publishes_ > 0 && "a publish settled twice, or never tracked");
    --unsettled_publishes_;
  }

  void release_waiting();

  // shared
  void fail(Error cause, std::uint16_t close_code);  // latch; close_code 0: send no close
  void fail_channel_work(detail::Channel& ch, const Error& cause);
  void begin_channel_close(detail::Channel& ch, const Error& cause, RequestId request);
  void free_channel(ChannelId id);
  // A removed consumer's tag may still be viewed by the event being dispatched: it is freed
  // at the next poll_event() or handle_*() call, not at once.
  void retire_consumer(detail::Channel& ch, std::string_view tag);
  void retire_all_consumers(detail::Channel& ch);
  std::vector<std::unique_ptr<detail::Consumer>> retired_consumers_;
  // The common case is one event per frame: it waits in `next_event_` without passing
  // through the ring, which saves moving a large variant twice. Order is kept because the
  // slot is used only while the ring is empty.
  // Closed is the last event: after it, nothing else is reported.
  template <class E>
  void emit(E&& e) {
    if (closed_emitted_) return;
    if constexpr (std::is_same_v<std::decay_t<E>, Closed>) closed_emitted_ = true;
    if (!next_event_ && events_.empty()) next_event_.emplace(std::forward<E>(e));
    else events_.push_back(Event{std::forward<E>(e)});
  }
  void send_method(ChannelId channel, const wire::Method& m);
  void note_sent() { last_sent_ = now_; }
  detail::Channel* channel(ChannelId id) {
    return id < channels_.size() ? channels_[id].get() : nullptr;
  }
  bool latched() const noexcept { return error_.has_value(); }
  Result<void> check_open() const;
  Instant expiry(Duration d) const { return now_ + d; }
  Duration timeout_of(const detail::Channel& ch) const { return ch.timeout.value_or(options_.request_timeout); }
  void expire_publishes(Instant now);  // every publish past its deadline, wherever it sits

  ConnectionOptions options_;
  Instant now_;
  detail::Phase phase_;
  std::optional<Error> error_;

  wire::FrameDecoder decoder_;
  bool input_pending_ = false;  // handle_bytes' bytes not yet used up
  bool input_dead_ = false;     // after the latch nothing more is read
  wire::OutputQueue output_;
  std::uint64_t written_total_ = 0;
  bool was_congested_ = false;
  bool discard_output_ = false;  // the peer is gone: nothing left to write
  bool heartbeat_missed_ = false;  // what failed it: the broker went silent (Closed says so)

  Instant handshake_deadline_;
  Instant last_sent_;
  Instant last_received_;
  std::uint16_t heartbeat_s_ = 0;
  std::uint32_t frame_max_ = wire::min_frame_max_bytes;
  std::uint16_t channel_max_ = 0;
  wire::FieldTable server_properties_;
  bool blocked_ = false;
  std::string blocked_reason_;

  // By channel number, up to the highest in use (open_channel grows it; 0 is never used).
  std::vector<std::unique_ptr<detail::Channel>> channels_;
  // Why the broker closed a channel number, until the number is opened again: a verb on it
  // then names the broker's reply, not only that the channel is not open.
  std::map<ChannelId, Error> closed_by_broker_;
  std::vector<ChannelId> active_;                            // numbers in use
  // The channels that may hold a deadline (opening, closing, a request awaiting its answer,
  // an unconfirmed publish). poll_timeout() walks these, not every channel: the client asks
  // it every turn, and a connection with 2,000 channels of idle consumers walked all 2,000
  // each time (a quarter of the CPU of a run that set them up and fed them). A channel is
  // listed when it gains a deadline (note_timed) and dropped by poll_timeout() once it holds
  // none; a number freed and opened again may be listed twice for a while, which only costs
  // a look.
  mutable std::vector<ChannelId> timed_;
  void note_timed(detail::Channel& ch) {
    if (ch.timed) return;
    ch.timed = true;
    timed_.push_back(ch.id);
  }
  // Confirm-mode publishes whose outcome is not known yet, over every channel: kept as they
  // are tracked and settled (a count, not a walk of the channels: the client asks every turn).
  std::size_t unsettled_publishes_ = 0;
  detail::Ring<detail::SecretUpdate> secret_updates_;  // update-secrets awaiting their ok
  detail::Ring<detail::Unwritten> unwritten_;
  detail::DueBound unwritten_due_;
  detail::Ring<detail::Waiting> waiting_;
  detail::DueBound waiting_due_;
  std::size_t waiting_bytes_ = 0;
  std::optional<Event> next_event_;
  bool closed_emitted_ = false;
  detail::Ring<Event> events_;
  wire::Method scratch_method_;

  RequestId next_request_ = 0;
  PublishId next_publish_ = 0;
};

}  // namespace warren::engine

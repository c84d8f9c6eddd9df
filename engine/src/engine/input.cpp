// Frames from the broker: the handshake, connection and channel methods, answers paired with
// their requests, content reassembled into messages, and confirms.
#include <algorithm>

#include "impl.hpp"
#include "warren/engine/describe.hpp"
#include "warren/engine/negotiate.hpp"

namespace warren::engine {

using namespace detail;

namespace {

Error unexpected(std::string text) {
  Error e = make_error(errc::protocol_error, std::move(text));
  return e;
}

std::string on_channel(ChannelId id) { return " on channel " + std::to_string(id); }

// Methods that answer a request on a channel.
bool is_answer(wire::MethodId id) {
  switch (id.key()) {
    case wire::ChannelOpenOk::id.key():
    case wire::ChannelFlowOk::id.key():
    case wire::ExchangeDeclareOk::id.key():
    case wire::ExchangeDeleteOk::id.key():
    case wire::ExchangeBindOk::id.key():
    case wire::ExchangeUnbindOk::id.key():
    case wire::QueueDeclareOk::id.key():
    case wire::QueueBindOk::id.key():
    case wire::QueuePurgeOk::id.key():
    case wire::QueueDeleteOk::id.key():
    case wire::QueueUnbindOk::id.key():
    case wire::BasicQosOk::id.key():
    case wire::BasicConsumeOk::id.key():
    case wire::BasicCancelOk::id.key():
    case wire::BasicGetOk::id.key():
    case wire::BasicGetEmpty::id.key():
    case wire::BasicRecoverOk::id.key():
    case wire::ConfirmSelectOk::id.key():
      return true;
    default:
      return false;
  }
}

}  // namespace

void Connection::Impl::on_frame(const wire::FrameView& frame) {
  if (frame.type == wire::FrameType::heartbeat) return;
  if (frame.channel == 0) {
    if (frame.type != wire::FrameType::method) {
      fail(unexpected("content frame on channel 0"), wire::reply::command_invalid);
      return;
    }
    if (auto r = wire::decode_method(frame.payload, scratch_method_); !r.ok()) {
      fail(std::move(r).error(), wire::reply::syntax_error);
      return;
    }
    on_connection_method(scratch_method_);
    return;
  }
  if (!std::holds_alternative<Running>(phase_) && !std::holds_alternative<ClosingConnection>(phase_)) {
    fail(unexpected("frame" + on_channel(frame.channel) + " during the handshake"), wire::reply::unexpected_frame);
    return;
  }
  if (std::holds_alternative<ClosingConnection>(phase_)) return;  // after our close only close/close-ok count
  Channel* ch = channel(frame.channel);
  if (!ch && frame.type == wire::FrameType::method && closed_by_broker_.contains(frame.channel) &&
      wire::decode_method(frame.payload, scratch_method_).ok() && std::holds_alternative<wire::ChannelClose>(scratch_method_)) {
    // A second close of a channel the broker closed and we answered: RabbitMQ 3.10 evaluates a
    // consumer timeout on every tick of the channel, closing or not, so one can follow before
    // our close-ok reached it. It is answered already; discarded.
    return;
  }
  if (!ch) {
    fail(unexpected("frame for channel " + std::to_string(frame.channel) + ", which is not open"),
         wire::reply::channel_error);
    return;
  }
  if (frame.type != wire::FrameType::method) {
    on_content(*ch, frame);
    return;
  }
  if (auto r = wire::decode_method(frame.payload, scratch_method_); !r.ok()) {
    fail(std::move(r).error(), wire::reply::syntax_error);
    return;
  }
  if (ch->assembly_kind() != Assembly::Kind::none && ch->assembly_kind() != Assembly::Kind::discard) {
    fail(unexpected(std::string(wire::method_name(scratch_method_)) + on_channel(ch->id) +
                    " arrived in the middle of a message's content"),
         wire::reply::unexpected_frame);
    return;
  }
  on_channel_method(*ch, scratch_method_);
}

void Connection::Impl::on_connection_method(const wire::Method& m) {
  if (const auto* close = std::get_if<wire::ConnectionClose>(&m)) {
    if (!std::holds_alternative<AwaitStart>(phase_)) {
      (void)wire::write_method(output_, 0, wire::ConnectionCloseOk{}, frame_max_);
    }
    fail(close_error(close->reply_code, close->reply_text, close->class_id, close->method_id, false), 0);
    return;
  }
  if (std::holds_alternative<AwaitStart>(phase_)) {
    const auto* start = std::get_if<wire::ConnectionStart>(&m);
    if (!start) {
      fail(unexpected("expected connection.start, got " + std::string(wire::method_name(m))), 0);
      return;
    }
    if (start->version_major != 0 || start->version_minor != 9) {
      fail(make_error(errc::protocol_version_mismatch, "broker speaks AMQP " + std::to_string(start->version_major) +
                                                           "-" + std::to_string(start->version_minor)),
           0);
      return;
    }
    auto props = start->server_properties.to_table();
    if (props.ok()) server_properties_ = std::move(*props);
    if (!offers_mechanism(start->mechanisms, options_.mechanism)) {
      discard_output_ = true;
      fail(make_error(errc::access_refused, "the broker offers " + std::string(start->mechanisms) + ", not " +
                                                std::string(mechanism_name(options_.mechanism))),
           0);
      return;
    }
    const std::string response = sasl_response(options_);
    const wire::FieldTable props_out = client_properties(options_);
    send_method(0, wire::ConnectionStartOk{props_out, mechanism_name(options_.mechanism), response, "en_US"});
    phase_ = AwaitTune{};
    return;
  }
  if (std::holds_alternative<AwaitTune>(phase_)) {
    const auto* tune = std::get_if<wire::ConnectionTune>(&m);
    if (!tune) {
      // PLAIN, AMQPLAIN and EXTERNAL need no challenge; a secure here is not a step we can take.
      fail(unexpected("expected connection.tune, got " + std::string(wire::method_name(m))), wire::reply::command_invalid);
      return;
    }
    const auto frame_max = negotiate_limit(options_.frame_max_bytes, tune->frame_max);
    if (frame_max != 0 && frame_max < wire::min_frame_max_bytes) {
      fail(make_error(errc::protocol_error, "the broker proposed frame_max " + std::to_string(tune->frame_max) +
                                                ", below the minimum 4096"),
           wire::reply::not_allowed);
      return;
    }
    channel_max_ = static_cast<std::uint16_t>(negotiate_limit(options_.channel_max, tune->channel_max));
    heartbeat_s_ = negotiate_heartbeat(options_.heartbeat_s, tune->heartbeat);
    frame_max_ = frame_max;
    send_method(0, wire::ConnectionTuneOk{channel_max_, frame_max_, heartbeat_s_});
    decoder_.set_frame_max(frame_max_);
    send_method(0, wire::ConnectionOpen{options_.vhost});
    phase_ = AwaitOpenOk{};
    return;
  }
  if (std::holds_alternative<AwaitOpenOk>(phase_)) {
    if (!std::holds_alternative<wire::ConnectionOpenOk>(m)) {
      fail(unexpected("expected connection.open-ok, got " + std::string(wire::method_name(m))), wire::reply::command_invalid);
      return;
    }
    phase_ = Running{};
    emit(Connected{&server_properties_, channel_max_, frame_max_, heartbeat_s_});
    return;
  }
  if (std::holds_alternative<ClosingConnection>(phase_)) {
    if (std::holds_alternative<wire::ConnectionCloseOk>(m)) {
      Error e = make_error(errc::connection_closed, "closed by the application");
      e.reply_code = wire::reply::success;
      fail(std::move(e), 0);
    }
    return;  // everything else is discarded after our close
  }
  // Running
  if (const auto* b = std::get_if<wire::ConnectionBlocked>(&m)) {
    blocked_ = true;
    blocked_reason_ = std::string(b->reason);
    emit(Blocked{blocked_reason_});
    return;
  }
  if (std::holds_alternative<wire::ConnectionUnblocked>(m)) {
    blocked_ = false;
    release_waiting();
    emit(Unblocked{});
    return;
  }
  if (std::holds_alternative<wire::ConnectionUpdateSecretOk>(m)) {
    if (secret_updates_.empty()) {
      fail(unexpected("connection.update-secret-ok arrived, but no update-secret was sent"), wire::reply::command_invalid);
      return;
    }
    emit(RequestDone{0, secret_updates_.pop_front().id, wire::ConnectionUpdateSecretOk{}});
    return;
  }
  fail(unexpected(std::string(wire::method_name(m)) + " on channel 0 is not expected on an open connection"),
       wire::reply::command_invalid);
}

void Connection::Impl::on_channel_method(Channel& ch, wire::Method& m) {
  const wire::MethodId id = wire::method_id(m);
  if (auto* closing = std::get_if<Channel::Closing>(&ch.state)) {
    // After our channel.close only close and close-ok count; the rest is discarded,
    // including the content of a message the broker had started.
    if (std::holds_alternative<wire::ChannelCloseOk>(m)) {
      const RequestId request = closing->request;
      const ChannelId num = ch.id;
      free_channel(num);  // `ch` is gone from here on
      if (request != 0) {
        emit(RequestDone{num, request, wire::ChannelCloseOk{}});
        Error e = make_error(errc::channel_closed, "closed by the application");
        e.reply_code = wire::reply::success;
        emit(ChannelClosed{num, std::move(e)});
      }
      return;
    }
    if (std::holds_alternative<wire::ChannelClose>(m)) {
      send_method(ch.id, wire::ChannelCloseOk{});
      closing->crossed = true;
      return;
    }
    if (std::holds_alternative<wire::BasicDeliver>(m) || std::holds_alternative<wire::BasicGetOk>(m) ||
        std::holds_alternative<wire::BasicReturn>(m)) {
      ch.assembly().kind = Assembly::Kind::discard;
      ch.assembly().have_header = false;
    }
    return;
  }

  if (const auto* close = std::get_if<wire::ChannelClose>(&m)) {
    send_method(ch.id, wire::ChannelCloseOk{});
    Error cause = close_error(close->reply_code, close->reply_text, close->class_id, close->method_id, true);
    fail_channel_work(ch, cause);
    const ChannelId num = ch.id;
    free_channel(num);
    closed_by_broker_.insert_or_assign(num, cause);
    emit(ChannelClosed{num, std::move(cause)});
    return;
  }

  if (std::holds_alternative<Channel::Opening>(ch.state)) {
    if (!std::holds_alternative<wire::ChannelOpenOk>(m)) {
      fail(unexpected(std::string(wire::method_name(m)) + on_channel(ch.id) + " before channel.open-ok"),
           wire::reply::unexpected_frame);
      return;
    }
    if (!ch.pending.empty()) ch.pending.pop_front();
    ch.state = Channel::Open{};
    emit(ChannelOpened{ch.id});
    return;
  }

  if (is_answer(id)) {
    on_answer(ch, m);
    return;
  }
  auto& a = ch.assembly();
  if (const auto* d = std::get_if<wire::BasicDeliver>(&m)) {
    a.kind = Assembly::Kind::deliver;
    a.have_header = false;
    a.consumer = ch.find_consumer(d->consumer_tag);
    if (!a.consumer) a.consumer_tag.assign(d->consumer_tag);
    a.delivery_tag = d->delivery_tag;
    a.redelivered = d->redelivered;
    a.exchange.assign(d->exchange);
    a.routing_key.assign(d->routing_key);
    return;
  }
  if (const auto* r = std::get_if<wire::BasicReturn>(&m)) {
    a.kind = Assembly::Kind::returned;
    a.have_header = false;
    a.reply_code = r->reply_code;
    a.reply_text.assign(r->reply_text);
    a.exchange.assign(r->exchange);
    a.routing_key.assign(r->routing_key);
    a.consumer = nullptr;
    a.consumer_tag.clear();
    a.delivery_tag = 0;
    a.redelivered = false;
    return;
  }
  if (const auto* ack = std::get_if<wire::BasicAck>(&m)) {
    on_confirm(ch, ack->delivery_tag, ack->multiple, true);
    return;
  }
  if (const auto* nack = std::get_if<wire::BasicNack>(&m)) {
    on_confirm(ch, nack->delivery_tag, nack->multiple, false);
    return;
  }
  if (const auto* cancel = std::get_if<wire::BasicCancel>(&m)) {
    // The broker ended a consumer (its queue was deleted, a node went down).
    if (!cancel->no_wait) send_method(ch.id, wire::BasicCancelOk{cancel->consumer_tag});
    retire_consumer(ch, cancel->consumer_tag);
    emit(ConsumerCancelled{ch.id, cancel->consumer_tag, true});
    return;
  }
  if (const auto* flow = std::get_if<wire::ChannelFlow>(&m)) {
    send_method(ch.id, wire::ChannelFlowOk{flow->active});
    emit(ChannelFlow{ch.id, flow->active});
    return;
  }
  fail(unexpected(std::string(wire::method_name(m)) + on_channel(ch.id) + " is not a method a broker sends"),
       wire::reply::command_invalid);
}

// Answers pair with requests in order, per channel, and must be the answer to the request at
// the front: anything else is a protocol error, never a silent mispairing.
void Connection::Impl::on_answer(Channel& ch, wire::Method& m) {
  const wire::MethodId id = wire::method_id(m);
  if (ch.pending.empty()) {
    fail(unexpected(std::string(wire::method_name(m)) + on_channel(ch.id) + " answers no request"),
         wire::reply::unexpected_frame);
    return;
  }
  PendingRequest& front = ch.pending.front();
  if (!(front.answer == id) && !(front.alternative == id)) {
    fail(unexpected(std::string(wire::method_name(m)) + on_channel(ch.id) + " does not answer the pending " +
                    std::string(wire::method_name(front.request))),
         wire::reply::unexpected_frame);
    return;
  }
  PendingRequest p = ch.pending.pop_front();
  // Requests are few, and most channels have none outstanding: 2,000 idle channels held
  // 640 KB of empty rings.
  ch.pending.release_when_empty();
  switch (p.kind) {
    case PendingRequest::Kind::consume: {
      const auto& ok = std::get<wire::BasicConsumeOk>(m);
      if (!ch.find_consumer(ok.consumer_tag))
        ch.consumers.push_back(std::make_unique<Consumer>(Consumer{std::string(ok.consumer_tag), p.no_ack, false, p.stream}));
      break;
    }
    case PendingRequest::Kind::cancel: {
      retire_consumer(ch, p.consumer_tag);
      emit(ConsumerCancelled{ch.id, std::get<wire::BasicCancelOk>(m).consumer_tag, false});
      break;
    }
    case PendingRequest::Kind::get:
      if (const auto* ok = std::get_if<wire::BasicGetOk>(&m)) {
        auto& a = ch.assembly();
        a.kind = Assembly::Kind::get_ok;
        a.have_header = false;
        a.request = p.id;
        a.delivery_tag = ok->delivery_tag;
        a.redelivered = ok->redelivered;
        a.exchange.assign(ok->exchange);
        a.routing_key.assign(ok->routing_key);
        a.message_count = ok->message_count;
        a.consumer = nullptr;
        a.consumer_tag.clear();
        return;  // settled by the GetOk event once its content is in
      }
      break;
    default:
      break;
  }
  if (p.id != 0) emit(RequestDone{ch.id, p.id, std::move(m)});
}

void Connection::Impl::on_content(Channel& ch, const wire::FrameView& frame) {
  auto& a = ch.assembly();
  if (std::holds_alternative<Channel::Closing>(ch.state) && a.kind == Assembly::Kind::none) return;
  if (a.kind == Assembly::Kind::none) {
    fail(unexpected(std::string(frame.type == wire::FrameType::header ? "content header" : "body frame") +
                    on_channel(ch.id) + " with no method before it"),
         wire::reply::unexpected_frame);
    return;
  }
  if (frame.type == wire::FrameType::header) {
    if (a.have_header) {
      fail(unexpected("a second content header" + on_channel(ch.id)), wire::reply::unexpected_frame);
      return;
    }
    // The header's bytes are kept: its properties are views, and the frame may not outlive
    // the next read.
    a.header_bytes.assign(frame.payload.begin(), frame.payload.end());
    if (auto r = wire::decode_content_header(a.header_bytes, a.header); !r.ok()) {
      fail(std::move(r).error(), wire::reply::syntax_error);
      return;
    }
    if (a.header.body_size > options_.max_body_bytes) {
      fail(make_error(errc::frame_too_large, "message body of " + std::to_string(a.header.body_size) +
                                                 " bytes exceeds max_body_bytes " + std::to_string(options_.max_body_bytes)),
           wire::reply::frame_error);
      return;
    }
    a.have_header = true;
    a.body.clear();
    if (a.header.body_size == 0) complete_message(ch, {});
    return;
  }
  // body
  if (!a.have_header) {
    fail(unexpected("body frame" + on_channel(ch.id) + " before its content header"), wire::reply::unexpected_frame);
    return;
  }
  const std::uint64_t expected = a.header.body_size;
  if (a.body.empty() && frame.payload.size() == expected) {
    complete_message(ch, frame.payload);  // one frame: handed out as a view, no copy
    return;
  }
  if (a.body.size() + frame.payload.size() > expected) {
    fail(unexpected("body frames" + on_channel(ch.id) + " carry more than the header's " + std::to_string(expected) +
                    " bytes"),
         wire::reply::frame_error);
    return;
  }
  if (a.body.empty()) a.body.reserve(static_cast<std::size_t>(expected));  // bounded by max_body_bytes
  a.body.insert(a.body.end(), frame.payload.begin(), frame.payload.end());
  if (a.body.size() == expected) complete_message(ch, a.body);
}

void Connection::Impl::complete_message(Channel& ch, std::span<const std::byte> body) {
  auto& a = ch.assembly();
  const auto kind = a.kind;
  a.kind = Assembly::Kind::none;
  a.have_header = false;
  if (kind == Assembly::Kind::discard) return;
  const std::string_view tag = a.consumer ? std::string_view(a.consumer->tag) : std::string_view(a.consumer_tag);
  Message msg{ch.id, tag, a.delivery_tag, a.redelivered, a.exchange, a.routing_key, &a.header.properties, body};
  switch (kind) {
    case Assembly::Kind::deliver: {
      ch.max_delivery_tag = std::max(ch.max_delivery_tag, a.delivery_tag);
      const Consumer* c = a.consumer;
      if (!c || (c->cancelling && !c->no_ack)) {
        // It raced our cancel (or names no consumer we have): hand it back to its queue
        // rather than leave it unacknowledged on this channel until it closes. Not a stream
        // delivery: a reject of one closes the connection on RabbitMQ 3.10-3.12.
        if (!c || (!c->no_ack && !c->stream)) send_method(ch.id, wire::BasicReject{a.delivery_tag, true});
        return;
      }
      emit(Delivery{msg});
      return;
    }
    case Assembly::Kind::get_ok:
      ch.max_delivery_tag = std::max(ch.max_delivery_tag, a.delivery_tag);
      emit(GetOk{a.request, a.message_count, msg});
      return;
    case Assembly::Kind::returned:
      if (Confirms* c = ch.confirms.get()) {
        // Its publish: the oldest unsettled mandatory one alike in exchange, routing key and
        // body size, and in message id, correlation id and body ends (return_key_of), that no
        // earlier return has claimed. The broker routes in publish order, so that is the one,
        // unless two publishes alike in all of those are in flight and only the later was
        // unroutable. Should none be alike in content too, the oldest alike in the first three
        // is taken: a return always settles one publish as returned, never none.
        const ReturnKey key = return_key_of(msg.exchange, msg.routing_key, *msg.properties, msg.body);
        auto claim = [&](bool by_content) {
          for (std::size_t i = 0; i < c->unconfirmed.size(); ++i) {
            const Unconfirmed& u = c->unconfirmed[i];
            if (u.settled || u.return_key.route != key.route || (by_content && u.return_key.content != key.content)) continue;
            const bool claimed = std::any_of(c->pending_returns.begin(), c->pending_returns.end(),
                                             [&](const PendingReturn& r) { return r.seq == u.seq; });
            if (claimed) continue;
            c->pending_returns.push_back(
                PendingReturn{u.seq, a.reply_code, returned_detail(a.reply_text, msg.exchange, msg.routing_key)});
            return true;
          }
          return false;
        };
        if (!claim(true)) (void)claim(false);
      }
      emit(Returned{a.reply_code, a.reply_text, msg});
      return;
    default:
      return;
  }
}

// basic.ack / basic.nack for publishes, by sequence number. A basic.return was matched to its
// publish when it came (see Assembly::Kind::returned); that publish settles as returned with
// the ack that covers it.
void Connection::Impl::on_confirm(Channel& ch, std::uint64_t tag, bool multiple, bool ack) {
  if (!ch.confirms) {
    fail(unexpected(std::string(ack ? "basic.ack" : "basic.nack") + on_channel(ch.id) + ", which is not in confirm mode"),
         wire::reply::command_invalid);
    return;
  }
  Confirms& c = *ch.confirms;
  if (tag >= c.next_seq || (tag == 0 && !multiple)) {
    fail(unexpected(std::string(ack ? "basic.ack " : "basic.nack ") + std::to_string(tag) + on_channel(ch.id) +
                    " confirms a publish never made (last is " + std::to_string(c.next_seq - 1) + ")"),
         wire::reply::precondition_failed);
    return;
  }
  const std::uint64_t upto = (multiple && tag == 0) ? c.next_seq - 1 : tag;
  const PublishOutcome outcome = ack ? PublishOutcome::confirmed : PublishOutcome::nacked;
  auto cause = [&] { return ack ? Error{} : make_error(errc::precondition_failed, "the broker nacked the message"); };
  // A returned publish settles with the ack that covers it, and is reported alone.
  if (!c.pending_returns.empty()) {
    auto covered = [&](std::uint64_t seq) { return multiple ? seq <= upto : seq == upto; };
    for (std::size_t i = 0; i < c.unconfirmed.size() && ack; ++i) {
      Unconfirmed& u = c.unconfirmed[i];
      if (u.seq > upto) break;
      if (u.settled || !covered(u.seq)) continue;
      auto r = std::find_if(c.pending_returns.begin(), c.pending_returns.end(),
                            [&](const PendingReturn& p) { return p.seq == u.seq; });
      if (r == c.pending_returns.end()) continue;
      Error e = make_error(errc::not_found, r->detail);
      e.reply_code = r->reply_code;
      emit(PublishDone{ch.id, u.id, u.id, PublishOutcome::returned, std::move(e), u.deadline - u.timeout});
      settle(u);
    }
    // Whatever this ack or nack covers is settled now; its returns are used up.
    std::erase_if(c.pending_returns, [&](const PendingReturn& p) { return covered(p.seq); });
  }
  // The rest as ranges of every unsettled publish with a sequence number up to `upto`. A
  // publish settled already (returned, timed out) ends a range: a range never names it again.
  // A range is open while `count` is not 0 (an optional for `first` made GCC's -O3 warn of a
  // maybe-uninitialized read it cannot have).
  PublishId first = 0, last = 0;
  Instant first_at{};
  std::uint64_t count = 0;
  auto flush = [&] {
    if (count != 0) emit(PublishDone{ch.id, first, last, outcome, cause(), first_at, count});
    count = 0;
  };
  for (std::size_t i = 0; i < c.unconfirmed.size(); ++i) {
    Unconfirmed& u = c.unconfirmed[i];
    if (u.seq > upto) break;
    if (!multiple && u.seq != upto) continue;
    if (u.settled) {
      flush();
      continue;
    }
    settle(u);
    if (count == 0) {
      first = u.id;
      first_at = u.deadline - u.timeout;
    }
    last = u.id;
    ++count;
  }
  flush();
  while (!c.unconfirmed.empty() && c.unconfirmed.front().settled) c.unconfirmed.pop_front();
  if (c.unconfirmed.empty()) c.due.at.reset();
}

}  // namespace warren::engine

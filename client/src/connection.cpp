#include "warren/client/connection.hpp"

#include "held_deliveries.hpp"

#include "warren/engine/describe.hpp"

#include <algorithm>
#include <utility>

#include "channel_core.hpp"
#include "connection_metrics.hpp"
#include "connection_spans.hpp"
#include "publish_wire.hpp"
#include "traced_properties.hpp"
#include "warren/wire/constants.hpp"

namespace warren::client {

using engine::ChannelId;

namespace {

// Built out of line: a verb's common path only tests for the engine.
WARREN_NOINLINE Error not_connected() { return make_error(errc::connection_closed, "not connected"); }

// RabbitMQ's URI spec reads "amqp://host/" as the empty vhost, not as "/": a common first
// mistake that the broker answers only with "530 NOT_ALLOWED - vhost  not found".
void add_vhost_hint(Error& cause, const ConnectionUrl& url, const Endpoint& endpoint) {
  if (cause.reply_code != 530 || !url.vhost.empty()) return;
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  const std::string host = v6 ? "[" + endpoint.host + "]" : endpoint.host;
  cause.detail += " (the URL \"" + std::string(url.tls ? "amqps" : "amqp") + "://" + host + ":" +
                  std::to_string(endpoint.port) + "/\" names the empty vhost; the default vhost \"/\" is written \"/%2f\")";
}

}  // namespace

std::shared_ptr<Connection> Connection::connect(Driver& driver, const ConnectionUrl& url, ClientOptions options,
                                                Done on_ready) {
  std::shared_ptr<Connection> c(new Connection(driver, url, std::move(options), std::move(on_ready)));
  if (c->options_.credentials) c->fetch_credentials_then_dial();
  else c->dial_next();
  return c;
}

Connection::Connection(Driver& driver, ConnectionUrl url, ClientOptions options, Done on_ready)
    : driver_(driver),
      url_(std::move(url)),
      options_(std::move(options)),
      on_ready_(std::move(on_ready)),
      loop_thread_(std::make_shared<detail::LoopThread>()) {
  options_.engine = url_.apply(std::move(options_.engine));
  if (url_.connection_timeout) options_.connect_timeout = *url_.connection_timeout;
  if (!options_.connect_timeout) options_.connect_timeout = options_.engine.request_timeout;
  if (options_.metrics) metrics_ = std::make_unique<detail::ConnectionMetrics>(options_.metrics);
  if (options_.observer && options_.observer->wants_spans())
    spans_ = std::make_unique<detail::ConnectionSpans>(options_.observer, peer_);
}

// Dropping the last reference ends the connection: its socket closes now, and every waiter
// still registered is told from the loop (never from inside this destructor, which may run
// inside a user's callback), so each callback still runs exactly once.
Connection::~Connection() {
  if (stream_) stream_->close();
  close_cores(make_error(errc::connection_closed, "the connection was destroyed"));
  if (closed_reported_) return;
  auto left = std::make_shared<Waiters>(take_waiters());
  if (left->empty()) return;
  driver_.post([left] {
    left->settle(make_error(errc::connection_closed, "the connection was destroyed before it answered"), true);
  });
}

Connection::Waiters Connection::take_waiters() {
  Waiters w;
  if (!ready_reported_) w.on_ready = std::move(on_ready_);
  for (auto& [id, done] : opening_) w.opening.emplace_back(id, std::move(done));
  for (auto& [id, done] : gets_) w.gets.push_back(std::move(done));
  for (auto& [id, done] : answers_) w.answers.push_back(std::move(done));
  for (auto& [key, done] : publishes_)
    if (done) w.publishes.push_back(std::move(done));
  for (auto& sub : consumers_)
    if (sub->on_ended) w.ended.push_back(std::move(sub->on_ended));
  w.close_waiters = std::move(close_waiters_);
  opening_.clear();
  gets_.clear();
  answers_.clear();
  publishes_.clear();
  consumers_.clear();
  held_watches_ = 0;
  close_waiters_.clear();
  return w;
}

bool Connection::Waiters::empty() const noexcept {
  return !on_ready && opening.empty() && gets.empty() && answers.empty() && publishes.empty() && ended.empty() &&
         close_waiters.empty();
}

void Connection::Waiters::settle(const Error& cause, bool close_succeeded) {
  for (auto& [id, done] : opening) done(&cause, id);
  for (auto& done : gets) done(&cause, nullptr, 0);
  for (auto& done : answers) done(&cause, nullptr);
  for (auto& done : publishes) done(engine::PublishOutcome::failed, cause);
  for (auto& fn : ended) fn(&cause);
  if (on_ready) on_ready(cause);
  for (auto& done : close_waiters) done(close_succeeded ? Result<void>() : Result<void>(cause));
}

// Run even when the connection is gone by then: each is a callback's one telling (a verb
// refused as the connection ended, made from a callback of its end, then its owner dropped
// it), and every callback runs once. What needs the connection locks its own weak pointer.
void Connection::later(std::function<void()> fn) { driver_.post(std::move(fn)); }

// ---- dialling, host by host

void Connection::dial_next() {
  if (close_asked_) return;
  if (endpoint_index_ >= url_.endpoints.size()) {
    finish(last_dial_error_ ? *last_dial_error_ : make_error(errc::connection_lost, "no host to dial"));
    return;
  }
  std::optional<TlsSettings> tls;
  if (url_.tls) {
    TlsSettings t;
    t.server_name = url_.server_name_indication.value_or(url_.endpoints[endpoint_index_].host);
    t.ca_pem = options_.ca_pem;
    t.client_cert_pem = options_.client_cert_pem;
    t.client_key_pem = options_.client_key_pem;
    tls = std::move(t);
  }
  const Endpoint& host = url_.endpoints[endpoint_index_];
  peer_ = host.host + ":" + std::to_string(host.port);
  observe("connection.connecting", Level::info);
  stream_ = driver_.dial(host, *options_.connect_timeout, std::move(tls), *this);
  replies_owed_ = false;
  if (options_.read_batching.min_bytes > 0) stream_->set_read_batching(options_.read_batching);
}

void Connection::on_connected() {
  engine_.emplace(options_.engine, driver_.now());
  std::weak_ptr<Connection> self = weak_from_this();
  timer_at_.reset();
  timer_ = driver_.timer([self] {
    if (auto c = self.lock()) {
      c->timer_at_.reset();  // fired: the next pump arms it again
      if (!c->engine_) return;
      c->engine_->handle_timeout(c->driver_.now());
      c->pump();
    }
  });
  pump();
}

void Connection::on_stream_error(Error cause) {
  stream_.reset();
  if (!ready_reported_ && (!engine_ || !engine_->error())) {
    // This host failed before the handshake finished, and not by refusing us: try the next.
    observe("connection.dial_failed", Level::warning, 0, &cause);
    last_dial_error_ = std::move(cause);
    engine_.reset();
    drop_timers();
    ++endpoint_index_;
    dial_next();
    return;
  }
  if (!engine_) return;
  // The driver's words ("read: connection reset by peer"); a plain end of stream has none.
  engine_->handle_eof(driver_.now(), cause.detail);
  pump();
}

void Connection::on_bytes(std::span<const std::byte> bytes) {
  if (!engine_) return;
  peek_ = false;  // the one read a held input was let through for
  if (metrics_) metrics_->received_bytes(bytes.size());
  engine_->handle_bytes(bytes, driver_.now());
  deliveries_in_read_ = 0;
  auto keep = shared_from_this();  // a callback may drop the last reference
  pump();  // drains every event: the bytes are not used after this returns
  // What proves a burst to read batching: deliveries, not bytes (driver.hpp, ReadBatching).
  if (deliveries_in_read_ != 0 && stream_ && options_.read_batching.min_bytes > 0) stream_->note_deliveries(deliveries_in_read_);
}

void Connection::on_written(std::size_t bytes) {
  if (!engine_) return;
  write_in_flight_ = 0;
  if (metrics_) metrics_->sent_bytes(bytes);
  engine_->consume_output(bytes);
  pump();
}

// ---- the loop

void Connection::flush() {
  if (!engine_ || !stream_ || write_in_flight_ != 0) return;
  auto view = engine_->pending_output();
  if (view.bytes == 0) return;
  write_in_flight_ = view.bytes;
  stream_->write(std::span(view.parts.data(), view.count));
}

void Connection::pump() {
  loop_thread_->id.store(std::this_thread::get_id(), std::memory_order_relaxed);
  if (!engine_) return;
  // A callback's command: the outer loop polls, and writes once its events are dispatched, so
  // what every callback of one read queued goes out in one write. (Flushing here sent a
  // confirm callback's first publish alone and the rest a loop turn later: two writes and an
  // extra epoll_wait per window top-up.)
  if (dispatching_) return;
  auto keep = shared_from_this();  // a callback may drop the last reference
  dispatching_ = true;
  while (auto e = engine_->poll_event()) {
    // Once the connection's end is latched, its channels are closed before any callback of
    // that end runs: one told of the loss must not find its channel open and use it.
    if (!cores_.empty())
      if (const Error* ended = engine_->error()) {
        Error cause = *ended;
        cause.connection_ended = true;
        close_cores(cause);
      }
    dispatch(*e);
  }
  dispatching_ = false;
  if (redial_) {
    redial_ = false;
    if (stream_) stream_->close();
    stream_.reset();
    drop_timers();
    engine_.reset();
    ++endpoint_index_;
    dial_next();
    return;
  }
  flush();
  tell_replies_owed();
  if (const bool want = engine_->wants_input() && (input_holds_ == 0 || peek_); stream_ && want != reading_) {
    reading_ = want;
    stream_->set_reading(reading_);
  }
  watch_held_input();
  // Armed only when the engine's next deadline changed: traffic moves a heartbeat's deadline
  // within its granule (engine: on_heartbeat_granule) without moving the timer.
  if (timer_)
    if (const auto t = engine_->poll_timeout(); t != timer_at_) {
      timer_at_ = t;
      if (t) timer_->arm(*t);
      else timer_->cancel();
    }
  // Finished: the stream goes once its last write is out, or at once when it already ended
  // (an EOF or a reset) — and the timers with it, which on Asio must not outlive the
  // application's io_context.
  if (engine_->finished() && (!stream_ || write_in_flight_ == 0)) {
    if (stream_) stream_->close();
    stream_.reset();
    drop_timers();
  }
}

// A deep confirm window: the stream batches the reads of its confirms (ReadBatching::
// owed_confirms). Checked in pump (per read, write, timer and command outside a callback),
// not per confirm; the stream hears only of changes. It ends below half the threshold, so a
// window that swings about it does not turn batching on and off at every turn.
void Connection::tell_replies_owed() {
  const auto& batching = options_.read_batching;
  if (!stream_ || !engine_ || batching.min_bytes == 0 || batching.owed_confirms == 0) return;
  const std::size_t unconfirmed = engine_->unconfirmed_publishes();
  const bool owed = replies_owed_ ? unconfirmed >= (batching.owed_confirms + 1) / 2 : unconfirmed >= batching.owed_confirms;
  if (owed == replies_owed_) return;
  replies_owed_ = owed;
  stream_->set_replies_owed(owed);
}

void Connection::dispatch(const engine::Event& event) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, engine::Connected>) {
          heartbeat_s_ = e.heartbeat_s;
          if (e.server_properties) server_properties_ = *e.server_properties;
          ready_reported_ = true;
          observe("connection.connected", Level::info);
          schedule_refresh_of_secret(engine::Duration::zero());
          if (metrics_) metrics_->connected();
          if (on_ready_) on_ready_(Result<void>());
        } else if constexpr (std::is_same_v<E, engine::Closed>) {
          // A host that took the TCP connection but failed the handshake (timed out, closed
          // it, 320) is one failed host: the next is tried. Refused credentials or vhost are
          // the same everywhere, so they end the dial.
          const bool refused = e.cause.reply_code == 403 || e.cause.reply_code == 530 ||
                               e.cause.code == make_error_code(errc::access_refused);
          if (e.heartbeat_missed) observe("connection.heartbeat_missed", Level::error, 0, &e.cause);
          if (!ready_reported_ && !close_asked_ && !refused && endpoint_index_ + 1 < url_.endpoints.size()) {
            observe("connection.dial_failed", Level::warning, 0, &e.cause);
            last_dial_error_ = e.cause;
            redial_ = true;  // once this turn of the loop is over
          } else if (!ready_reported_) {
            Error cause = e.cause;
            add_vhost_hint(cause, url_, endpoint());
            finish(cause);
          } else {
            finish(e.cause);
          }
        } else if constexpr (std::is_same_v<E, engine::Blocked>) {
          observe("connection.blocked", Level::warning, 0, nullptr, e.reason);
          if (metrics_) metrics_->blocked(driver_.now());
          if (on_blocked) on_blocked(e.reason);
        } else if constexpr (std::is_same_v<E, engine::Unblocked>) {
          observe("connection.unblocked", Level::info);
          if (metrics_) metrics_->unblocked(driver_.now());
          if (on_unblocked) on_unblocked();
        } else if constexpr (std::is_same_v<E, engine::Writable>) {
          if (on_writable) on_writable();
        } else if constexpr (std::is_same_v<E, engine::ChannelOpened>) {
          if (metrics_) metrics_->channel_opened();
          if (auto it = opening_.find(e.channel); it != opening_.end()) {
            auto done = std::move(it->second);
            opening_.erase(it);
            done(nullptr, e.channel);
          }
        } else if constexpr (std::is_same_v<E, engine::ChannelClosed>) {
          // An open channel's close first: its close-ok answer ran before this event, and a
          // channel opened from that answer may already wait on the same number in opening_.
          if (auto* slot = core_slot(e.channel)) {
            (*slot)->close(e.cause);
            slot->reset();
          } else if (auto it = opening_.find(e.channel); it != opening_.end()) {
            auto done = std::move(it->second);
            opening_.erase(it);
            done(&e.cause, e.channel);
            return;
          }
          if (metrics_) metrics_->channel_closed();
          end_subscriptions(e.channel, e.cause);
          // The application's own close (200) is routine; anything else closed it on us.
          observe("channel.closed", e.cause.reply_code == wire::reply::success ? Level::info : Level::warning, e.channel,
                  &e.cause);
          if (on_channel_closed) on_channel_closed(e.channel, e.cause);
        } else if constexpr (std::is_same_v<E, engine::GetOk>) {
          answers_.erase(e.request);
          if (auto it = gets_.find(e.request); it != gets_.end()) {
            auto done = std::move(it->second);
            gets_.erase(it);
            done(nullptr, &e.message, e.message_count);
          }
        } else if constexpr (std::is_same_v<E, engine::RequestDone>) {
          gets_.erase(e.request);
          if (auto it = answers_.find(e.request); it != answers_.end()) {
            auto done = std::move(it->second);
            answers_.erase(it);
            done(nullptr, &e.reply);
          }
        } else if constexpr (std::is_same_v<E, engine::RequestFailed>) {
          gets_.erase(e.request);
          if (auto it = answers_.find(e.request); it != answers_.end()) {
            auto done = std::move(it->second);
            answers_.erase(it);
            done(&e.cause, nullptr);
          }
        } else if constexpr (std::is_same_v<E, engine::PublishDone>) {
          if (metrics_) metrics_->settled(e, driver_.now());
          if (spans_) spans_->settled(e);
          auto first = publishes_.lower_bound({e.channel, e.first});
          auto last = publishes_.upper_bound({e.channel, e.last});
          if (first != last) {
            std::vector<Settled> settled;
            for (auto it = first; it != last; ++it) settled.push_back(std::move(it->second));
            publishes_.erase(first, last);
            for (auto& done : settled)
              if (done) done(e.outcome, e.cause);
          }
          // One record per settled range that did not go as asked (a return has its own, below;
          // a publish failed by its channel's or connection's end follows that end's record).
          if (e.outcome == engine::PublishOutcome::nacked) observe("publish.nacked", Level::warning, e.channel, &e.cause);
          if (e.outcome == engine::PublishOutcome::timed_out) observe("publish.timed_out", Level::warning, e.channel, &e.cause);
          if (on_publish_done) on_publish_done(e);
        } else if constexpr (std::is_same_v<E, engine::Delivery>) {
          ++deliveries_in_read_;
          if (Subscription* found = find_subscription(e.message.channel, e.message.consumer_tag)) {
            Subscription& s = *found;
            Histogram* process = nullptr;
            if (const auto* o = s.observed.get()) [[unlikely]] {
              if (o->consumed) o->consumed->add();
              if (o->held) {
                o->held->delivered(e.message.delivery_tag, driver_.now());
                // Its warning falls after any already armed (the clock only moves on).
                if (!held_armed_) arm_held_timer();
              }
              process = o->process;
            }
            // The callback may end the subscription: `s` is not read after it.
            const bool spanned = spans_ && s.handing == Handing::to_callback;
            if (spanned) spans_->begin_process(e.message, s.queue());
            const auto began = process ? driver_.now() : engine::Instant{};
            s.on_message(e.message);
            if (process) process->record(driver_.now() - began);
            if (spanned) spans_->end_process();
          }
        } else if constexpr (std::is_same_v<E, engine::Returned>) {
          if (!on_returned && !options_.observer) return;
          Error why = make_error(errc::unroutable, engine::returned_detail(e.reply_text, e.message.exchange, e.message.routing_key));
          why.reply_code = e.reply_code;
          observe("publish.returned", Level::warning, e.message.channel, &why, e.message.routing_key);
          if (!on_returned) return;
          std::shared_ptr<detail::ChannelCore> core;
          if (auto* slot = core_slot(e.message.channel)) core = *slot;
          on_returned(Delivery(e.message, core), why);
        } else if constexpr (std::is_same_v<E, engine::ConsumerCancelled>) {
          if (const auto it = subscription_at(e.channel, e.consumer_tag); it != consumers_.end()) {
            auto ended = std::move((*it)->on_ended);
            if ((*it)->held()) --held_watches_;
            consumers_.erase(it);
            if (ended) {
              if (e.by_broker) {
                Error cause = make_error(errc::consumer_cancelled, "the broker cancelled consumer " + std::string(e.consumer_tag));
                observe("consumer.cancelled", Level::warning, e.channel, &cause, e.consumer_tag);
                ended(&cause);
              } else {
                ended(nullptr);
              }
            }
          }
        }
      },
      event);
}

// ---- commands

// The connection's end: every waiter still registered is settled with `cause`, exactly once,
// then the close waiters, then on_closed. Nothing is reported after this.
void Connection::finish(const Error& failure) {
  if (closed_reported_) return;
  Error cause = failure;
  cause.connection_ended = true;  // a failed dial has not been through the engine's latch
  closed_reported_ = true;
  refresh_timer_.reset();
  held_timer_.reset();
  if (metrics_) metrics_->ended();
  if (spans_) spans_->ended(cause);
  auto keep = weak_from_this().lock();  // a callback below may drop the last reference
  const bool was_ready = ready_reported_;
  auto waiters = take_waiters();
  ready_reported_ = true;
  close_cores(cause);
  // A close succeeded when it ended the connection itself (close-ok, or nothing to close yet:
  // still dialling); a close-ok that never came (a broker that stopped reading: blocked), a
  // loss that won the race, is what the close waiters are told.
  const bool clean = cause.reply_code == wire::reply::success || (close_asked_ && !engine_);
  if (was_ready) observe("connection.closed", clean ? Level::info : Level::error, 0, &cause);
  else observe("connection.failed", clean ? Level::info : Level::error, 0, &cause);
  waiters.settle(cause, clean);
  if (was_ready && on_closed) on_closed(cause);
}

template <class Verb>
void Connection::request(Verb verb, Answer done) {
  if (!done) done = [](const Error*, const wire::Method*) {};  // every path below may call it
  Result<engine::RequestId> r = engine_ ? verb(*engine_) : Result<engine::RequestId>(not_connected());
  if (!r.ok()) {
    later([done = std::move(done), e = r.error()] { done(&e, nullptr); });
    return;
  }
  if (*r == 0) {  // no_wait: nothing will answer
    later([done = std::move(done)] { done(nullptr, nullptr); });
  } else {
    answers_.emplace(*r, std::move(done));
  }
  pump();
}

void Connection::open_channel(std::function<void(const Error*, ChannelId)> done) {
  if (!done) done = [](const Error*, ChannelId) {};
  auto r = engine_ ? engine_->open_channel(driver_.now()) : Result<ChannelId>(not_connected());
  if (!r.ok()) {
    later([done = std::move(done), e = r.error()] { done(&e, 0); });
    return;
  }
  opening_.emplace(*r, std::move(done));
  pump();
}

void Connection::close_channel(ChannelId channel, Answer done) {
  request([&](engine::Connection& c) { return c.close_channel(channel, driver_.now()); }, std::move(done));
}
void Connection::request(ChannelId channel, const wire::Method& m, Answer done) {
  request([&](engine::Connection& c) { return c.request(channel, m, driver_.now()); }, std::move(done));
}
void Connection::cancel(ChannelId channel, std::string_view consumer_tag, Answer done) {
  request([&](engine::Connection& c) { return c.basic_cancel(channel, consumer_tag, driver_.now()); }, std::move(done));
}
void Connection::get(ChannelId channel, const wire::BasicGet& m,
                     std::function<void(const Error*, const engine::Message*)> done) {
  get(channel, m, [done = std::move(done)](const Error* e, const engine::Message* msg, std::uint32_t) {
    if (done) done(e, msg);
  });
}

void Connection::get(ChannelId channel, const wire::BasicGet& m, GetDone done) {
  // get-empty comes back as an answer; get-ok as a GetOk event with the message. The get is
  // waiting in both places (answers_ and gets_), so whichever tells it first takes the
  // callback: a connection dropped with the get in flight settles both.
  if (metrics_)
    done = [counts = metrics_.get(), queue = std::string(m.queue), done = std::move(done)](
               const Error* e, const engine::Message* msg, std::uint32_t left) {
      if (msg) counts->got(queue);  // a message comes only while the connection lives
      if (done) done(e, msg, left);
    };
  if (spans_)
    done = [spans = spans_.get(), queue = std::string(m.queue), asked = std::chrono::system_clock::now(),
            done = std::move(done)](const Error* e, const engine::Message* msg, std::uint32_t left) {
      if (msg) spans->received(*msg, queue, asked);
      if (done) done(e, msg, left);
    };
  auto shared = std::make_shared<GetDone>(std::move(done));
  auto once = [shared](const Error* e, const engine::Message* msg, std::uint32_t left) {
    if (auto fn = std::exchange(*shared, nullptr)) fn(e, msg, left);
  };
  request([&](engine::Connection& c) {
            auto r = c.basic_get(channel, m, driver_.now());
            if (r.ok()) gets_.emplace(*r, once);
            return r;
          },
          [once](const Error* e, const wire::Method*) {
            // Reached only for get-empty or a failure: a message settles through gets_.
            once(e, nullptr, 0);
          });
}
void Connection::confirm_select(ChannelId channel, Answer done) {
  request([&](engine::Connection& c) { return c.confirm_select(channel, driver_.now()); }, std::move(done));
}

void Connection::end_subscriptions(ChannelId channel, const Error& cause) {
  std::vector<OnEnded> ended;
  const bool ack_timeout = cause.code == make_error_code(errc::ack_timeout);
  std::erase_if(consumers_, [&](const std::unique_ptr<Subscription>& one) {
    Subscription& s = *one;
    if (channel != 0 && s.channel != channel) return false;
    if (s.held()) --held_watches_;
    // The broker's text names the channel only: say which subscriptions it ended.
    if (ack_timeout) {
      // The delivery it was about, when the subscription tracked them (ConsumeOptions::ack_timeout).
      const auto oldest = s.held() ? s.held()->oldest() : std::nullopt;
      observe("consumer.ack_timeout", Level::error, s.channel, &cause,
              "consumer " + s.tag + " on queue " + std::string(s.queue()) +
                  (oldest ? ", delivery tag " + std::to_string(*oldest) + " held longest" : std::string()));
    }
    if (s.on_ended) ended.push_back(std::move(s.on_ended));
    return true;
  });
  for (auto& fn : ended) fn(&cause);
}

// Runs from an answer's dispatch (the consume-ok), never inside a delivery's callback, which
// runs a subscription's own on_message. (The no-wait form would insert inside the caller's
// consume; nothing calls it with no_wait.) A subscription stays where it was made: only the
// array of pointers moves.
Connection::Subscription& Connection::add_subscription(Subscription s) {
  const auto at = std::upper_bound(consumers_.begin(), consumers_.end(), s.channel,
                                   [](ChannelId channel, const std::unique_ptr<Subscription>& x) { return channel < x->channel; });
  if (s.held()) ++held_watches_;  // counted here, uncounted where a subscription is erased
  return **consumers_.insert(at, std::make_unique<Subscription>(std::move(s)));
}

Connection::Subscriptions::iterator Connection::subscription_at(ChannelId channel, std::string_view tag) {
  auto it = std::lower_bound(consumers_.begin(), consumers_.end(), channel,
                             [](const std::unique_ptr<Subscription>& x, ChannelId c) { return x->channel < c; });
  for (; it != consumers_.end() && (*it)->channel == channel; ++it)
    if ((*it)->tag == tag) return it;
  return consumers_.end();
}

Connection::Subscription* Connection::find_subscription(ChannelId channel, std::string_view tag) {
  const auto it = subscription_at(channel, tag);
  return it == consumers_.end() ? nullptr : it->get();
}

void Connection::consume(ChannelId channel, const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch,
                         OnMessage on_message, Answer done) {
  consume(channel, m, prefetch, std::move(on_message), nullptr, std::move(done));
}

Connection::Subscription Connection::subscription(ChannelId channel, std::string tag, std::string_view queue,
                                                 OnMessage on_message, OnEnded on_ended, Handing handing,
                                                 std::shared_ptr<detail::HeldDeliveries> held) {
  Subscription s{.channel = channel, .handing = handing, .tag = std::move(tag), .on_message = std::move(on_message),
                 .on_ended = std::move(on_ended)};
  if (!options_.observer && !metrics_ && !spans_ && !held) return s;
  s.observed = std::make_unique<Subscription::Observed>(Subscription::Observed{.queue = std::string(queue)});
  if (metrics_) {
    const auto m = metrics_->subscription(queue);
    s.observed->consumed = m.consumed;
    if (handing == Handing::to_callback) s.observed->process = m.process;
  }
  s.observed->held = std::move(held);
  return s;
}

void Connection::consume(ChannelId channel, const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch,
                         OnMessage on_message, OnEnded on_ended, Answer done, Handing handing,
                         std::optional<engine::Duration> ack_timeout) {
  // The consumer is registered when consume-ok names its tag (or now, for a chosen tag).
  auto handler = std::make_shared<OnMessage>(std::move(on_message));
  // Warned at three quarters of the broker's timeout: a quarter is left to settle it.
  std::shared_ptr<detail::HeldDeliveries> held;
  if (ack_timeout && !m.no_ack) held = std::make_shared<detail::HeldDeliveries>(*ack_timeout * 3 / 4);
  if (m.no_wait) {
    // Nothing will answer, and the tag is ours: the subscription is registered now, before
    // a delivery for it can be read.
    request([&](engine::Connection& c) {
              auto r = c.basic_consume(channel, m, prefetch, driver_.now());
              if (r.ok()) {
                add_subscription(subscription(channel, std::string(m.consumer_tag), m.queue, std::move(*handler),
                                              std::move(on_ended), handing, std::move(held)));
              }
              return r;
            },
            std::move(done));
    return;
  }
  request([&](engine::Connection& c) { return c.basic_consume(channel, m, prefetch, driver_.now()); },
          [this, channel, handler, queue = std::string(m.queue), handing, on_ended = std::move(on_ended),
           done = std::move(done), held](const Error* e, const wire::Method* reply) mutable {
            if (!e && reply)
              if (const auto* ok = std::get_if<wire::BasicConsumeOk>(reply)) {
                add_subscription(subscription(channel, std::string(ok->consumer_tag), queue, std::move(*handler),
                                              std::move(on_ended), handing, std::move(held)));
              }
            if (done) done(e, reply);
          });
}

// Always inlined in both publish forms: a call per message cost as much as what it does.
WARREN_ALWAYS_INLINE Result<engine::PublishId> Connection::counted_publish(
    engine::ChannelId channel, const wire::BasicPublish& m, const wire::BasicProperties& properties,
    std::span<const std::byte> body, const engine::PublishOptions& options) {
  // One variable returned on every path, so it is built in the caller's slot (no copy).
  Result<engine::PublishId> r = engine_ ? engine_->publish(channel, m, properties, body, driver_.now(), options)
                                        : Result<engine::PublishId>(not_connected());
  if (spans_ || metrics_) [[unlikely]]
    observe_publish(channel, r, m, properties, body.size());
  return r;
}

// Out of line: without spans and metrics a publish has nothing to observe.
void Connection::observe_publish(ChannelId channel, const Result<engine::PublishId>& r, const wire::BasicPublish& m,
                                 const wire::BasicProperties& properties, std::size_t body_bytes) {
  if (spans_) spans_->sent(channel, r, m, properties, body_bytes);
  if (!metrics_) return;
  if (r.ok()) metrics_->published(m.exchange);
  else metrics_->publish_refused(m.exchange, r.error());
}

void Connection::publish(ChannelId channel, const wire::BasicPublish& m, const wire::BasicProperties& properties,
                         std::span<const std::byte> body, Settled done) {
  publish(channel, m, properties, body, std::move(done), engine::PublishOptions{});
}

Result<void> Connection::set_channel_timeout(ChannelId channel, engine::Duration timeout) {
  if (!engine_) return not_connected();
  return engine_->set_channel_timeout(channel, timeout);
}

Result<engine::Duration> Connection::channel_timeout(ChannelId channel) {
  if (!engine_) return not_connected();
  return engine_->channel_timeout(channel);
}

void Connection::publish(ChannelId channel, const wire::BasicPublish& m, const wire::BasicProperties& properties,
                         std::span<const std::byte> body, Settled done, const engine::PublishOptions& options) {
  auto r = counted_publish(channel, m, properties, body, options);
  if (!r.ok()) {
    Error e = r.error();
    e.sent = Sent::no;  // refused before it was queued
    if (done) later([done = std::move(done), e = std::move(e)] { done(engine::PublishOutcome::failed, e); });
    return;
  }
  if (done) publishes_.emplace(std::pair{channel, *r}, std::move(done));
  if (!dispatching_) pump();
}

// Settling a delivery, or publishing without a callback: no answer is awaited here, so the
// result is known at once.
template <class Verb>
auto Connection::immediate(Verb verb) -> std::invoke_result_t<Verb&, engine::Connection&> {
  if (!engine_) return not_connected();
  auto r = verb(*engine_);
  if (r.ok()) pump();
  return r;
}

Result<engine::PublishId> Connection::publish(ChannelId channel, const wire::BasicPublish& m,
                                              const wire::BasicProperties& properties, std::span<const std::byte> body) {
  return publish(channel, m, properties, body, engine::PublishOptions{});
}

Result<engine::PublishId> Connection::publish(ChannelId channel, const wire::BasicPublish& m,
                                              const wire::BasicProperties& properties, std::span<const std::byte> body,
                                              const engine::PublishOptions& options) {
  // Counted (and its span begun) before pump() can dispatch its PublishDone.
  auto r = counted_publish(channel, m, properties, body, options);
  // Inside a callback the outer pump writes (see pump): a call that returns at once is all
  // a publish from a callback would cost.
  if (r.ok() && !dispatching_) pump();
  return r;
}

// Channel::publish's callback-free form, whole: the handle's frame would hold only a
// copy of what is built here.
Result<engine::PublishId> Connection::publish_of_handle(ChannelId channel, const Publish& p,
                                                        std::span<const std::byte> body) {
  if (traces(p) || metrics_) [[unlikely]]
    return observed_publish(channel, p, body);
  // publish()'s two lines, not a call to it: out of line here, it cost 13 instructions a message.
  Result<engine::PublishId> r =
      counted_publish(channel, detail::to_wire(p), p.properties, body, engine::PublishOptions{.timeout = p.timeout});
  if (r.ok() && !dispatching_) pump();  // from a callback the outer pump writes
  return r;
}

// With spans or metrics on, or a trace context given. Spans and metrics run the application's
// code (an observer, a Metrics), which may drop the connection's last reference: the handle
// took none (ChannelCore::live_here), so one is held here.
Result<engine::PublishId> Connection::observed_publish(ChannelId channel, const Publish& p,
                                                       std::span<const std::byte> body) {
  auto keep = shared_from_this();
  const engine::PublishOptions options{.timeout = p.timeout};
  if (!traces(p)) return publish(channel, detail::to_wire(p), p.properties, body, options);
  const detail::TracedProperties properties(p, send_trace(p));
  return publish(channel, detail::to_wire(p), properties.get(), body, options);
}

TraceContext Connection::send_trace(const Publish& publish) {
  if (!spans_) return publish.trace;  // without spans the headers go as they are
  if (publish.trace.valid()) return spans_->begin_send(publish.trace);
  return spans_->begin_send(detail::trace_of(publish.properties).value_or(TraceContext{}));
}

std::optional<TraceContext> Connection::processing_span(engine::ChannelId channel, std::uint64_t delivery_tag) const {
  return spans_ ? spans_->processing(channel, delivery_tag) : std::nullopt;
}

// ---- deliveries held toward the broker's consumer_timeout (ConsumeOptions::ack_timeout)

void Connection::note_settled(ChannelId channel, std::uint64_t delivery_tag, bool multiple) {
  // A multiple settle covers every subscription of the channel; a single one is one delivery.
  for (auto& s : consumers_)
    if (s->channel == channel && s->held()) s->held()->settled(delivery_tag, multiple);
}

void Connection::arm_held_timer() {
  std::optional<engine::Instant> next;
  for (const auto& s : consumers_)
    if (s->held())
      if (auto at = s->held()->next_warning(); at && (!next || *at < *next)) next = at;
  held_armed_ = next.has_value();
  if (!next) {
    if (held_timer_) held_timer_->cancel();
    return;
  }
  if (!held_timer_) {
    std::weak_ptr<Connection> self = weak_from_this();
    held_timer_ = driver_.timer([self] {
      if (auto c = self.lock()) c->warn_held();
    });
  }
  held_timer_->arm(*next);
}

void Connection::warn_held() {
  held_armed_ = false;
  const engine::Instant now = driver_.now();
  struct Late {
    ChannelId channel;
    std::string tag;
    std::uint64_t delivery_tag;
    engine::Duration held_for;
  };
  std::vector<Late> late;  // told after the walk: a callback may settle or end subscriptions
  for (auto& one : consumers_)
    if (Subscription& s = *one; s.held())
      s.held()->warn_due(now, [&](std::uint64_t tag, engine::Duration held_for) {
        late.push_back({s.channel, s.tag, tag, held_for});
        observe("consumer.ack_late", Level::warning, s.channel, nullptr,
                "consumer " + s.tag + " on queue " + std::string(s.queue()) + ": delivery tag " + std::to_string(tag) + " held for " +
                    std::to_string(held_for.count()) + " ms");
      });
  auto keep = weak_from_this().lock();
  for (const auto& l : late)
    if (on_ack_late) on_ack_late(l.channel, l.tag, l.delivery_tag, l.held_for);
  arm_held_timer();
}

Result<void> Connection::ack(ChannelId channel, std::uint64_t delivery_tag, bool multiple) {
  auto r = immediate([&](engine::Connection& c) { return c.ack(channel, wire::BasicAck{.delivery_tag = delivery_tag, .multiple = multiple}); });
  if (held_watches_ && r.ok()) note_settled(channel, delivery_tag, multiple);
  if (metrics_ && r.ok()) metrics_->settled_delivery(detail::ConnectionMetrics::Settle::ack, false);
  if (spans_) spans_->settled_delivery("ack", channel, delivery_tag, r.ok() ? nullptr : &r.error());
  return r;
}

Result<void> Connection::nack(ChannelId channel, std::uint64_t delivery_tag, bool multiple, bool requeue) {
  auto r = immediate([&](engine::Connection& c) { return c.nack(channel, wire::BasicNack{.delivery_tag = delivery_tag, .multiple = multiple, .requeue = requeue}); });
  if (held_watches_ && r.ok()) note_settled(channel, delivery_tag, multiple);
  if (metrics_ && r.ok()) metrics_->settled_delivery(detail::ConnectionMetrics::Settle::nack, requeue);
  if (spans_) spans_->settled_delivery("nack", channel, delivery_tag, r.ok() ? nullptr : &r.error());
  return r;
}

Result<void> Connection::reject(ChannelId channel, std::uint64_t delivery_tag, bool requeue) {
  auto r = immediate([&](engine::Connection& c) { return c.reject(channel, wire::BasicReject{.delivery_tag = delivery_tag, .requeue = requeue}); });
  if (held_watches_ && r.ok()) note_settled(channel, delivery_tag, false);
  if (metrics_ && r.ok()) metrics_->settled_delivery(detail::ConnectionMetrics::Settle::reject, requeue);
  if (spans_) spans_->settled_delivery("reject", channel, delivery_tag, r.ok() ? nullptr : &r.error());
  return r;
}

// credentials.hpp: the secret in place, without a reconnect (connection_credentials.cpp does
// it ahead of expiry with a provider).
void Connection::update_secret(std::string_view secret, std::string_view reason, Done done) {
  if (!done) done = [](Result<void>) {};
  // Weak: a waiter still registered when the connection is destroyed is told afterwards.
  std::weak_ptr<Connection> self = weak_from_this();
  request([&](engine::Connection& e) { return e.update_secret(secret, reason, driver_.now()); },
          [self, done = std::move(done)](const Error* error, const wire::Method*) {
            auto c = self.lock();
            if (error) {
              // The broker answers a refused secret by closing the connection; a secret that
              // never reached it (the connection was already gone) was not refused.
              if (c && error->connection_ended && (error->reply_code == 403 || error->reply_code == 530))
                c->observe("credentials.refused", Level::error, 0, error);
              done(*error);
              return;
            }
            if (c) c->observe("credentials.refreshed", Level::info);
            done(Result<void>());
          });
}

void Connection::close(Done done) {
  if (!done) done = [](Result<void>) {};
  if (closed_reported_) {  // already over: nothing to close
    later([done = std::move(done)] { done(Result<void>()); });
    return;
  }
  close_waiters_.push_back(std::move(done));
  if (close_asked_) return;  // a close is under way: this waiter is told when it ends
  close_asked_ = true;
  if (!engine_) {
    // Still dialling: stop the dial, so no socket outlives the close.
    if (stream_) stream_->close();
    stream_.reset();
    drop_timers();
    std::weak_ptr<Connection> self = weak_from_this();
    later([self] {
      if (auto c = self.lock()) c->finish(make_error(errc::connection_closed, "closed by the application before it was connected"));
    });
    return;
  }
  // Refused only once the engine's latch is set; then its Closed event, dispatched by pump(),
  // settles the waiters.
  (void)engine_->close(driver_.now());
  pump();
}

// ---- the handles' side

void Connection::open_channel(Callback<Channel> done) {
  std::weak_ptr<Connection> self = weak_from_this();
  open_channel([self, done = std::move(done)](const Error* e, ChannelId id) {
    if (!done) return;
    if (e) return done(*e);
    auto c = self.lock();
    if (!c) return done(make_error(errc::connection_closed, "the connection is gone"));
    auto core = std::make_shared<detail::ChannelCore>(self, c->driver_, c->loop_thread_, id);
    // The engine tells a channel's close before its number opens again, so no core is listed
    // here. One that were would stay open with nobody to close it, and ChannelCore::live_here
    // trusts `open`: closed, its handles are told so instead.
    if (auto* old = c->core_slot(id))
      (*old)->close(make_error(errc::channel_closed, "channel " + std::to_string(id) + " was opened again"));
    if (id >= c->cores_.size()) c->cores_.resize(std::size_t(id) + 1);
    c->cores_[id] = core;
    done(Channel(std::move(core)));
  });
}

void Connection::close_cores(const Error& cause) {
  auto cores = std::move(cores_);
  cores_.clear();
  for (auto& core : cores)
    if (core) core->close(cause);
}

// A consumer's full buffer holds the input to bound memory; the broker must not vanish behind
// it. While input is held, one read is let through every half heartbeat interval (every
// second without heartbeats): its frames are proof of life (the engine would otherwise take
// our own pause for a dead peer after two intervals), and a close, blocked/unblocked or a
// confirm behind the deliveries is reached. What that read brings for the full consumer is
// buffered past its limit: memory grows by at most one read per interval.
void Connection::watch_held_input() {
  if (input_holds_ == 0 || !stream_ || !engine_) {
    if (peek_timer_) peek_timer_->cancel();
    peek_armed_ = false;
    return;
  }
  if (peek_armed_ || peek_) return;
  if (!peek_timer_) {
    std::weak_ptr<Connection> self = weak_from_this();
    peek_timer_ = driver_.timer([self] {
      auto c = self.lock();
      if (!c) return;
      c->peek_armed_ = false;
      if (c->input_holds_ == 0) return;
      c->peek_ = true;
      c->pump();
    });
  }
  const engine::Duration every = heartbeat_s_ ? engine::Duration{heartbeat_s_ * 500} : engine::Duration{1000};
  peek_timer_->arm(driver_.now() + every);
  peek_armed_ = true;
}

// With the stream: nothing is left to time, and on Asio a timer must not outlive the
// application's io_context.
void Connection::drop_timers() {
  timer_.reset();
  timer_at_.reset();
  peek_timer_.reset();
  peek_armed_ = false;
}

void Connection::hold_input(int delta) {
  input_holds_ += delta;
  if (input_holds_ < 0) input_holds_ = 0;
  if (!dispatching_) pump();  // inside a dispatch the outer pump re-reads it
}

void Connection::subscribe(ChannelId channel, const ConsumeOptions& o, std::shared_ptr<detail::ConsumerCore> consumer,
                           Callback<Consumer> done) {
  // A stream subscription says so on the wire too, so the engine never rejects a delivery
  // of it: "next" is what a stream consume without an offset starts from anyway.
  wire::FieldTable arguments = o.arguments.to_table();
  if (o.stream && !arguments.find("x-stream-offset")) arguments.set("x-stream-offset", "next");
  wire::BasicConsume m{.queue = o.queue, .consumer_tag = o.tag, .no_local = false, .no_ack = o.auto_ack,
                       .exclusive = o.exclusive, .no_wait = false, .arguments = arguments};
  std::weak_ptr<detail::ConsumerCore> weak = consumer;
  const Handing handing = consumer->on_delivery ? Handing::to_callback : Handing::to_buffer;
  // The subscription holds the core while it runs (deliveries reach it even when the
  // application keeps only the Consumer handle); the handle cancels it when dropped.
  consume(channel, m, o.prefetch,
          [consumer](const engine::Message& msg) { consumer->deliver(msg); },
          [weak](const Error* cause) {
            if (auto c = weak.lock()) c->end(cause);
          },
          [consumer, done = std::move(done)](const Error* e, const wire::Method* reply) mutable {
            if (e) {
              if (done) done(*e);
              return;
            }
            if (const auto* ok = reply ? std::get_if<wire::BasicConsumeOk>(reply) : nullptr)
              consumer->tag = std::string(ok->consumer_tag);
            if (done) done(Consumer(std::move(consumer)));
            // else nobody holds the handle: the ConsumerCore lives on in the subscription
          },
          handing, o.ack_timeout);
}

}  // namespace warren::client

#include "warren/client/session.hpp"

#include <algorithm>
#include <cmath>

namespace warren::client {
namespace {

// Errors that another attempt cannot fix: the broker said no to who we are or where we go,
// or the options cannot work. Everything else (refused, reset, timed out) is transient.
bool permanent(const Error& e) {
  if (e.reply_code == 403 || e.reply_code == 530) return true;
  return e.code == make_error_code(errc::access_refused) || e.code == make_error_code(errc::invalid_url) ||
         e.code == make_error_code(errc::tls_config) || e.code == make_error_code(errc::invalid_argument);
}

// A channel's failure that another attempt cannot fix by itself: no permission (403), or a
// declaration that contradicts what the broker has (406). Someone may still fix it (an
// operator deletes the queue), so the channel keeps retrying, but publishes stop waiting.
bool permanent_for_channel(const Error& e) {
  if (e.reply_code == 403 || e.reply_code == 406) return true;
  return e.code == make_error_code(errc::access_refused) || e.code == make_error_code(errc::precondition_failed);
}

}  // namespace

engine::Duration Backoff::ceiling(unsigned attempt) const {
  const double grown = static_cast<double>(base.count()) * std::pow(factor, attempt > 0 ? attempt - 1 : 0);
  const double capped = std::min(grown, static_cast<double>(cap.count()));
  return engine::Duration{static_cast<engine::Duration::rep>(capped)};
}

// ---- a publish waiting for its channel: owns everything the views pointed at

struct RecoveringChannel::Waiting {
  std::string exchange, routing_key, body;
  bool mandatory = false;
  std::deque<std::string> strings;  // the properties' text
  wire::FieldTable headers;
  wire::BasicProperties properties;
  std::shared_ptr<struct RecoveringChannel::Tracked> tracked;

  Waiting(const wire::BasicPublish& m, const wire::BasicProperties& p, std::span<const std::byte> b)
      : exchange(m.exchange), routing_key(m.routing_key),
        body(reinterpret_cast<const char*>(b.data()), b.size()), mandatory(m.mandatory), properties(p) {
    auto own = [&](std::optional<std::string_view>& field) {
      if (field) field = strings.emplace_back(*field);
    };
    own(properties.content_type);
    own(properties.content_encoding);
    own(properties.correlation_id);
    own(properties.reply_to);
    own(properties.expiration);
    own(properties.message_id);
    own(properties.type);
    own(properties.user_id);
    own(properties.app_id);
    own(properties.cluster_id);
    if (properties.headers) {
      auto table = properties.headers->to_table();
      headers = table.ok() ? std::move(*table) : wire::FieldTable{};
      properties.headers = wire::TableRef(headers);
    }
  }
};

struct RecoveringChannel::Tracked {
  Connection::Settled done;
  std::multimap<engine::Instant, std::shared_ptr<Tracked>>::iterator deadline;
  RecoveringChannel* owner = nullptr;  // null once settled
  bool sent = false;
};

RecoveringChannel::RecoveringChannel(Session& session, Setup setup) : session_(session), setup_(std::move(setup)) {}
RecoveringChannel::~RecoveringChannel() = default;

// The one place a publish's outcome is reported: at most once, whichever of the broker's
// answer, the deadline or a failure comes first.
void RecoveringChannel::settle(const std::shared_ptr<Tracked>& t, engine::PublishOutcome outcome, const Error& cause) {
  RecoveringChannel* owner = std::exchange(t->owner, nullptr);
  if (!owner) return;
  owner->deadlines_.erase(t->deadline);
  auto done = std::move(t->done);
  if (done) done(outcome, cause);
}

void RecoveringChannel::publish(const wire::BasicPublish& m, const wire::BasicProperties& properties,
                                std::span<const std::byte> body, engine::Duration timeout, Connection::Settled done) {
  auto fail_now = [&](Error e) {
    session_.driver().post([done = std::move(done), e = std::move(e)] {
      if (done) done(engine::PublishOutcome::failed, e);
    });
  };
  if (const auto& session = session_.status(); session.state == Session::State::closed)
    return fail_now(session.last_cause && permanent(*session.last_cause)
                        ? *session.last_cause
                        : make_error(errc::connection_closed, "the session is closed"));
  if (permanent_ && !ready_) return fail_now(*permanent_);
  if (!ready_ && waiting_.size() >= session_.max_waiting_publishes())
    return fail_now(make_error(errc::resource_locked, std::to_string(waiting_.size()) +
                                                          " publishes already wait for the connection (max_waiting_publishes)"));
  auto t = std::make_shared<Tracked>();
  t->done = std::move(done);
  t->owner = this;
  const auto deadline = session_.driver().now() + timeout;
  t->deadline = deadlines_.emplace(deadline, t);
  if (!armed_ || deadline < *armed_) rearm();
  // Ready: straight to the connection, which copies the message. Otherwise it waits, owning
  // its bytes.
  if (ready_ && waiting_.empty()) return send(m, properties, body, t);
  auto w = std::make_unique<Waiting>(m, properties, body);
  w->tracked = std::move(t);
  waiting_.push_back(std::move(w));
}

void RecoveringChannel::send(const wire::BasicPublish& m, const wire::BasicProperties& properties,
                             std::span<const std::byte> body, const std::shared_ptr<Tracked>& t) {
  t->sent = true;
  // The engine's deadline is the rest of this publish's own, not the connection's default.
  const auto left = std::max(engine::Duration{1}, std::chrono::duration_cast<engine::Duration>(
                                                      t->deadline->first - session_.driver().now()));
  std::weak_ptr<Tracked> weak = t;
  connection_->publish(
      channel_, m, properties, body,
      [weak](engine::PublishOutcome outcome, const Error& cause) {
        if (auto t = weak.lock()) settle(t, outcome, cause);
      },
      engine::PublishOptions{.timeout = left});
}

void RecoveringChannel::rearm() {
  if (!deadline_timer_) {
    std::weak_ptr<RecoveringChannel> weak = weak_from_this();
    deadline_timer_ = session_.driver().timer([weak] {
      if (auto self = weak.lock()) self->expire();
    });
  }
  if (deadlines_.empty()) {
    armed_.reset();
    deadline_timer_->cancel();
    return;
  }
  armed_ = deadlines_.begin()->first;
  deadline_timer_->arm(*armed_);
}

void RecoveringChannel::expire() {
  const auto now = session_.driver().now();
  std::vector<std::shared_ptr<Tracked>> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) due.push_back(it->second);
  for (auto& t : due) {
    if (t->sent) {
      settle(t, engine::PublishOutcome::timed_out,
             make_error(errc::timeout, "no outcome before the publish's deadline; the broker may or may not have it"));
    } else {
      std::string why = connection_ ? "the channel was not ready before the publish's deadline; it was never sent"
                                    : "no connection before the publish's deadline; it was never sent";
      if (status_.last_cause) why += " (last cause: " + status_.last_cause->to_string() + ")";
      settle(t, engine::PublishOutcome::timed_out, make_error(errc::timeout, why));
    }
  }
  // What timed out while waiting leaves the queue now.
  std::erase_if(waiting_, [](const std::unique_ptr<Waiting>& w) { return w->tracked->owner == nullptr; });
  rearm();
}

void RecoveringChannel::flush_waiting() {
  while (ready_ && !waiting_.empty()) {
    auto w = std::move(waiting_.front());
    waiting_.pop_front();
    if (w->tracked->owner)
      send(wire::BasicPublish{w->exchange, w->routing_key, w->mandatory}, w->properties,
           std::as_bytes(std::span{w->body.data(), w->body.size()}), w->tracked);
  }
}

void RecoveringChannel::fail_waiting(const Error& cause) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) settle(w->tracked, engine::PublishOutcome::failed, cause);
  rearm();
}

void RecoveringChannel::consume(const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch, OnMessage on_message,
                                Connection::Answer done) {
  if (!connection_) {
    Error e = make_error(errc::connection_closed, "not connected");
    session_.driver().post([done = std::move(done), e] {
      if (done) done(&e, nullptr);
    });
    return;
  }
  const std::uint64_t epoch = epoch_;
  connection_->consume(
      channel_, m, prefetch,
      [on_message = std::move(on_message), epoch](const engine::Message& message) {
        on_message(message, DeliveryRef{epoch, message.delivery_tag});
      },
      std::move(done));
}

Result<void> RecoveringChannel::check(DeliveryRef ref) const {
  if (ref.epoch != epoch_ || !connection_)
    return make_error(errc::channel_closed, "delivery " + std::to_string(ref.delivery_tag) +
                                                " came before the connection was lost; nothing was sent, and the "
                                                "broker will deliver it again");
  return {};
}

Result<void> RecoveringChannel::ack(DeliveryRef ref, bool multiple) {
  if (auto r = check(ref); !r.ok()) return r;
  return connection_->ack(channel_, ref.delivery_tag, multiple);
}

Result<void> RecoveringChannel::nack(DeliveryRef ref, bool multiple, bool requeue) {
  if (auto r = check(ref); !r.ok()) return r;
  return connection_->nack(channel_, ref.delivery_tag, multiple, requeue);
}

void RecoveringChannel::set_status(Status status) {
  status_ = std::move(status);
  if (on_status) on_status(status_);
}

void RecoveringChannel::attach(std::shared_ptr<Connection> connection, std::uint64_t epoch) {
  connection_ = std::move(connection);
  epoch_ = epoch;
  status_.attempt = 0;
  open();
}

void RecoveringChannel::open() {
  ready_ = false;
  channel_ = 0;
  handle_ = {};
  const std::uint64_t generation = ++open_generation_;
  set_status(Status{State::opening, status_.attempt, engine::Duration{0}, status_.last_cause});
  std::weak_ptr<RecoveringChannel> weak = weak_from_this();
  // Each step's callback belongs to this attempt: a stale one (the connection was lost, or the
  // channel failed and was opened again) does nothing.
  auto current = [weak, generation]() -> std::shared_ptr<RecoveringChannel> {
    auto self = weak.lock();
    return self && self->open_generation_ == generation && self->connection_ ? self : nullptr;
  };
  connection_->open_channel([current](Result<Channel> ch) {
    auto self = current();
    if (!self) return;
    if (!ch) return self->failed(ch.error());
    self->channel_ = ch->id();
    self->handle_ = std::move(*ch);
    self->connection_->confirm_select(self->channel_, [current](const Error* e, const wire::Method*) {
      auto self = current();
      if (!self) return;
      if (e) return self->failed(*e);
      self->setup_(*self, [current](const Error* e) {
        auto self = current();
        if (!self) return;
        if (e) return self->failed(*e);
        self->ready_ = true;
        self->permanent_.reset();
        self->set_status(Status{State::ready, 0, engine::Duration{0}, std::nullopt});
        self->flush_waiting();
      });
    });
  });
}

// The channel failed while the connection lives: its open, confirm.select or setup failed,
// or the broker closed it. It is opened again after the session's backoff.
void RecoveringChannel::failed(const Error& cause) {
  if (!connection_ || !connection_->is_open()) return;  // the connection's loss handles it
  ++open_generation_;  // whatever the failed attempt still has in flight is stale now
  ready_ = false;
  if (channel_ != 0) {
    // Still open (setup's own failure, say): close it, so its number and prefetch go back.
    connection_->close_channel(channel_, [](const Error*, const wire::Method*) {});
    channel_ = 0;
  }
  handle_ = {};
  if (permanent_for_channel(cause)) {
    permanent_ = cause;
    fail_waiting(cause);  // waiting will not change the answer
  }
  const unsigned attempt = status_.attempt + 1;
  const auto delay = session_.draw_delay(attempt);
  set_status(Status{State::retrying, attempt, delay, cause});
  if (!retry_timer_) {
    std::weak_ptr<RecoveringChannel> weak = weak_from_this();
    retry_timer_ = session_.driver().keepalive_timer([weak] {
      auto self = weak.lock();
      if (self && self->connection_ && self->connection_->is_open() && !self->ready_) self->open();
    });
  }
  retry_timer_->arm(session_.driver().now() + delay);
}

void RecoveringChannel::detach() {
  ready_ = false;
  channel_ = 0;
  handle_ = {};
  connection_.reset();
  ++epoch_;  // deliveries of the dead channel are stale from now on
  ++open_generation_;
  if (retry_timer_) retry_timer_->cancel();
}

// ---- the session

Session::Session(Driver& driver, ConnectionUrl url, SessionOptions options)
    : driver_(driver), url_(std::move(url)), options_(std::move(options)),
      random_(options_.jitter_seed ? *options_.jitter_seed : std::random_device{}()) {}

Session::~Session() = default;

std::shared_ptr<Session> Session::start(Driver& driver, ConnectionUrl url, SessionOptions options) {
  std::shared_ptr<Session> self(new Session(driver, std::move(url), std::move(options)));
  std::weak_ptr<Session> weak = self;
  // It keeps the loop alive: while it waits there is no socket to.
  self->retry_timer_ = driver.keepalive_timer([weak] {
    if (auto s = weak.lock()) s->dial();
  });
  self->dial();
  return self;
}

void Session::set_status(Status status) {
  status_ = std::move(status);
  if (on_status) on_status(status_);
}

engine::Duration Session::draw_delay(unsigned attempt) {
  const auto ceiling = options_.backoff.ceiling(attempt);
  std::uniform_int_distribution<engine::Duration::rep> jitter(0, ceiling.count());
  return engine::Duration{jitter(random_)};
}

bool Session::healthy() const noexcept {
  if (status_.state != State::connected) return false;
  return std::all_of(channels_.begin(), channels_.end(), [](const auto& ch) { return ch->ready(); });
}

void Session::dial() {
  if (status_.state == State::closed) return;
  std::weak_ptr<Session> weak = weak_from_this();
  auto holder = std::make_shared<std::shared_ptr<Connection>>();
  // Each attempt starts one host further along, so a host that takes connections but never
  // serves them is not always the first one tried.
  ConnectionUrl url = url_;
  if (url.endpoints.size() > 1)
    std::rotate(url.endpoints.begin(), url.endpoints.begin() + static_cast<std::ptrdiff_t>(first_host_ % url.endpoints.size()),
                url.endpoints.end());
  ++first_host_;
  *holder = Connection::connect(driver_, url, options_.client, [weak, holder](const Error* e) {
    auto self = weak.lock();
    auto connection = std::move(*holder);
    if (!self || self->status_.state == State::closed) {
      if (connection && !e) connection->close([](const Error*) {});
      return;
    }
    if (e) return self->retry(*e);
    self->connection_ = std::move(connection);
    self->connection_->on_closed = [weak](const Error& cause) {
      if (auto s = weak.lock()) s->lost(cause);
    };
    self->connection_->on_channel_closed = [weak](engine::ChannelId id, const Error& cause) {
      auto s = weak.lock();
      if (!s) return;
      for (auto& ch : s->channels_)
        if (ch->channel_ == id) return ch->failed(cause);
    };
    self->connected();
  });
}

void Session::connected() {
  ever_connected_ = true;
  ++epoch_;
  set_status(Status{State::connected, 0, engine::Duration{0}, status_.last_cause});
  for (auto& ch : channels_) ch->attach(connection_, epoch_);
}

void Session::lost(const Error& cause) {
  connection_.reset();
  for (auto& ch : channels_) ch->detach();
  if (status_.state == State::closed) return;
  status_.attempt = 0;
  retry(cause);
}

void Session::retry(const Error& cause) {
  if (permanent(cause)) {  // whether or not it ever worked: waiting will not change the answer
    set_status(Status{State::closed, status_.attempt, engine::Duration{0}, cause});
    for (auto& ch : channels_) ch->fail_waiting(cause);  // now, not at their deadlines
    return;
  }
  const unsigned attempt = status_.attempt + 1;
  const engine::Duration delay = draw_delay(attempt);
  set_status(Status{ever_connected_ ? State::reconnecting : State::connecting, attempt, delay, cause});
  retry_timer_->arm(driver_.now() + delay);
}

std::shared_ptr<RecoveringChannel> Session::channel(RecoveringChannel::Setup setup) {
  std::shared_ptr<RecoveringChannel> ch(new RecoveringChannel(*this, std::move(setup)));
  channels_.push_back(ch);
  if (status_.state == State::connected) ch->attach(connection_, epoch_);
  return ch;
}

void Session::close(Connection::Done done) {
  const bool was_connected = connection_ && connection_->is_open();
  set_status(Status{State::closed, 0, engine::Duration{0}, status_.last_cause});
  retry_timer_->cancel();
  for (auto& ch : channels_) {
    ch->ready_ = false;
    if (ch->retry_timer_) ch->retry_timer_->cancel();
    ch->fail_waiting(make_error(errc::connection_closed, "the session closed first; it was never sent"));
  }
  if (!was_connected) {
    driver_.post([done = std::move(done)] { done(nullptr); });
    return;
  }
  connection_->close(std::move(done));
}

}  // namespace warren::client

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
  engine::Instant deadline;
  Connection::Settled done;

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

RecoveringChannel::RecoveringChannel(Session& session, Setup setup) : session_(session), setup_(std::move(setup)) {}
RecoveringChannel::~RecoveringChannel() = default;

void RecoveringChannel::publish(const wire::BasicPublish& m, const wire::BasicProperties& properties,
                                std::span<const std::byte> body, engine::Duration timeout, Connection::Settled done) {
  if (ready_ && waiting_.empty()) {
    connection_->publish(channel_, m, properties, body, std::move(done));
    return;
  }
  if (session_.status().state == Session::State::closed) {
    Error e = make_error(errc::connection_closed, "the session is closed");
    session_.driver().post([done = std::move(done), e] { done(engine::PublishOutcome::failed, e); });
    return;
  }
  if (waiting_.size() >= session_.max_waiting_publishes()) {
    Error e = make_error(errc::resource_locked, std::to_string(waiting_.size()) +
                                                     " publishes already wait for the connection (max_waiting_publishes)");
    session_.driver().post([done = std::move(done), e] { done(engine::PublishOutcome::failed, e); });
    return;
  }
  auto w = std::make_unique<Waiting>(m, properties, body);
  w->deadline = session_.driver().now() + timeout;
  w->done = std::move(done);
  if (!waiting_timer_) waiting_timer_ = session_.driver().timer([this] { expire_waiting(); });
  // Only an earlier deadline moves the timer: no scan of what already waits.
  if (!armed_ || w->deadline < *armed_) arm(w->deadline);
  waiting_.push_back(std::move(w));
}

void RecoveringChannel::arm(std::optional<engine::Instant> at) {
  armed_ = at;
  if (at) waiting_timer_->arm(*at);
  else if (waiting_timer_) waiting_timer_->cancel();
}

void RecoveringChannel::expire_waiting() {
  const auto now = session_.driver().now();
  std::vector<Connection::Settled> expired;
  std::erase_if(waiting_, [&](const std::unique_ptr<Waiting>& w) {
    if (w->deadline > now) return false;
    expired.push_back(std::move(w->done));
    return true;
  });
  std::optional<engine::Instant> next;
  for (const auto& w : waiting_) next = next ? std::min(*next, w->deadline) : w->deadline;
  arm(next);
  const Error e = make_error(errc::timeout, "no connection before the publish's deadline; it was never sent");
  for (auto& done : expired) done(engine::PublishOutcome::timed_out, e);
}

void RecoveringChannel::flush_waiting() {
  while (ready_ && !waiting_.empty()) {
    auto w = std::move(waiting_.front());
    waiting_.pop_front();
    connection_->publish(channel_, wire::BasicPublish{w->exchange, w->routing_key, w->mandatory}, w->properties,
                         std::as_bytes(std::span{w->body.data(), w->body.size()}), std::move(w->done));
  }
  if (waiting_.empty()) arm(std::nullopt);
}

void RecoveringChannel::consume(const wire::BasicConsume& m, std::optional<std::uint16_t> prefetch, OnMessage on_message,
                                Connection::Answer done) {
  if (!connection_) {
    Error e = make_error(errc::connection_closed, "not connected");
    session_.driver().post([done = std::move(done), e] { done(&e, nullptr); });
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

void RecoveringChannel::attach(std::shared_ptr<Connection> connection, std::uint64_t epoch) {
  connection_ = std::move(connection);
  epoch_ = epoch;
  ready_ = false;
  std::weak_ptr<RecoveringChannel> weak = weak_from_this();
  connection_->open_channel([weak, epoch](const Error* e, engine::ChannelId ch) {
    auto self = weak.lock();
    if (!self || self->epoch_ != epoch || e) return;  // a failed open: the connection's loss retries
    self->channel_ = ch;
    self->connection_->confirm_select(ch, [weak, epoch](const Error* e, const wire::Method*) {
      auto self = weak.lock();
      if (!self || self->epoch_ != epoch || e) return;
      self->setup_(*self, [weak, epoch](const Error* e) {
        auto self = weak.lock();
        if (!self || self->epoch_ != epoch || e) return;
        self->ready_ = true;
        self->flush_waiting();
      });
    });
  });
}

void RecoveringChannel::detach() {
  ready_ = false;
  connection_.reset();
  ++epoch_;  // deliveries of the dead channel are stale from now on
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

void Session::dial() {
  if (status_.state == State::closed) return;
  std::weak_ptr<Session> weak = weak_from_this();
  auto holder = std::make_shared<std::shared_ptr<Connection>>();
  *holder = Connection::connect(driver_, url_, options_.client, [weak, holder](const Error* e) {
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
    return;
  }
  const unsigned attempt = status_.attempt + 1;
  const auto ceiling = options_.backoff.ceiling(attempt);
  std::uniform_int_distribution<engine::Duration::rep> jitter(0, ceiling.count());
  const engine::Duration delay{jitter(random_)};
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
    auto waiting = std::move(ch->waiting_);
    ch->waiting_.clear();
    ch->arm(std::nullopt);
    Error e = make_error(errc::connection_closed, "the session closed first; it was never sent");
    for (auto& w : waiting) w->done(engine::PublishOutcome::failed, e);
  }
  if (!was_connected) {
    driver_.post([done = std::move(done)] { done(nullptr); });
    return;
  }
  connection_->close(std::move(done));
}

}  // namespace warren::client

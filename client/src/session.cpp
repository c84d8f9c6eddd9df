#include "warren/client/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "channel_core.hpp"

namespace warren::client {
namespace {

// Errors that another attempt cannot fix: the broker said no to who we are or where we go,
// or the options cannot work. Everything else (refused, reset, timed out) is transient.
// (A 406 cannot end a connection's dial: the handshake never answers with it.)
bool permanent(const Error& e) { return is_permanent(e); }

// A channel's failure that another attempt cannot fix by itself (error.hpp's is_permanent:
// no permission, a declaration that contradicts what the broker has). Someone may still fix
// it (an operator deletes the queue), so the channel keeps retrying, but publishes stop
// waiting.
bool permanent_for_channel(const Error& e) { return is_permanent(e); }

// A refusal worth telling the application about even if it retries: what is_permanent says,
// and a 404 (a passive declare of something missing; someone may create it, so it is retried).
bool refused(const Error& e) { return is_permanent(e) || e.reply_code == 404; }

}  // namespace

std::string attempt_text(unsigned attempt, engine::Duration delay) {
  return "attempt " + std::to_string(attempt) + " in " + std::to_string(delay.count()) + " ms";
}

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
  TraceContext trace;      // its tracestate views `tracestate`
  std::string tracestate;
  std::shared_ptr<struct RecoveringChannel::Tracked> tracked;

  Waiting(const Publish& p, std::span<const std::byte> b)
      : exchange(p.exchange), routing_key(p.routing_key),
        body(reinterpret_cast<const char*>(b.data()), b.size()), mandatory(p.mandatory), properties(p.properties),
        trace(p.trace), tracestate(p.trace.tracestate) {
    trace.tracestate = tracestate;
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
  [[nodiscard]] Publish view() const {
    return Publish{.exchange = exchange, .routing_key = routing_key, .mandatory = mandatory, .properties = properties, .trace = trace};
  }
};

struct RecoveringChannel::Tracked {
  Callback<engine::PublishOutcome> done;
  std::multimap<engine::Instant, std::shared_ptr<Tracked>>::iterator deadline;
  RecoveringChannel* owner = nullptr;  // null once settled
  bool sent = false;
};

RecoveringChannel::RecoveringChannel(Session& session, Setup setup)
    : session_(&session), driver_(session.driver()), setup_(std::move(setup)) {}

// Only the session's own destruction ends a channel's publishes (orphan()), so by now none
// is left to tell; should one be, it is told rather than lost.
RecoveringChannel::~RecoveringChannel() {
  abandon(make_error(errc::connection_closed, "the session was destroyed"));
}

Driver& RecoveringChannel::driver() const noexcept { return driver_; }

// Every publish not yet reported is told `cause`, from the loop: this runs inside
// destructors, which may run inside the application's callbacks.
void RecoveringChannel::abandon(const Error& cause) {
  std::vector<Callback<engine::PublishOutcome>> dones;
  for (auto& [at, t] : deadlines_) {
    t->owner = nullptr;
    if (t->done) dones.push_back(std::move(t->done));
  }
  deadlines_.clear();
  waiting_.clear();
  armed_.reset();
  if (deadline_timer_) deadline_timer_->cancel();
  if (dones.empty()) return;
  driver_.post([dones = std::move(dones), cause]() mutable {
    for (auto& done : dones) done(cause);
  });
}

// The session is being destroyed and the application may keep this channel: it lets go of
// the connection, tells every publish, and from now on refuses publishes at once.
void RecoveringChannel::orphan(const Error& cause) {
  detach();
  session_ = nullptr;
  abandon(cause);
}

// The one place a publish's outcome is reported: at most once, whichever of the broker's
// answer, the deadline or a failure comes first.
void RecoveringChannel::settle(const std::shared_ptr<Tracked>& t, Result<engine::PublishOutcome> outcome) {
  RecoveringChannel* owner = std::exchange(t->owner, nullptr);
  if (!owner) return;
  owner->deadlines_.erase(t->deadline);
  auto done = std::move(t->done);
  if (done) done(std::move(outcome));
}

void RecoveringChannel::publish(const Publish& p, Body body, Callback<engine::PublishOutcome> done) {
  auto fail_now = [&](Error e) {
    driver_.post([done = std::move(done), e = std::move(e)] {
      if (done) done(e);
    });
  };
  if (!session_) return fail_now(make_error(errc::connection_closed, "the session was destroyed"));
  const engine::Duration timeout = p.timeout.value_or(session_->options_.client.engine.request_timeout);
  if (session_->status().state == Session::State::closed) return fail_now(session_->closed_cause());
  if (permanent_ && !ready_) return fail_now(*permanent_);
  if (!ready_ && waiting_.size() >= session_->max_waiting_publishes())
    return fail_now(make_error(errc::resource_locked, std::to_string(waiting_.size()) +
                                                          " publishes already wait for the connection (max_waiting_publishes)"));
  auto t = std::make_shared<Tracked>();
  t->done = std::move(done);
  t->owner = this;
  const auto deadline = driver_.now() + timeout;
  t->deadline = deadlines_.emplace(deadline, t);
  if (!armed_ || deadline < *armed_) rearm();
  // Ready: straight to the connection, which copies the message. Otherwise it waits, owning
  // its bytes.
  if (ready_ && waiting_.empty()) return send(p, body, t);
  auto w = std::make_unique<Waiting>(p, body);
  w->tracked = std::move(t);
  waiting_.push_back(std::move(w));
}

void RecoveringChannel::send(const Publish& p, std::span<const std::byte> body, const std::shared_ptr<Tracked>& t) {
  t->sent = true;
  // The engine's deadline is the rest of this publish's own, not the connection's default.
  Publish bounded = p;
  bounded.timeout = std::max(engine::Duration{1}, std::chrono::duration_cast<engine::Duration>(
                                                      t->deadline->first - driver_.now()));
  std::weak_ptr<Tracked> weak = t;
  channel_.publish(bounded, body, [weak](Result<engine::PublishOutcome> outcome) {
    if (auto t = weak.lock()) settle(t, std::move(outcome));
  });
}

void RecoveringChannel::rearm() {
  if (!deadline_timer_) {
    std::weak_ptr<RecoveringChannel> weak = weak_from_this();
    deadline_timer_ = driver_.timer([weak] {
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
  const auto now = driver_.now();
  std::vector<std::shared_ptr<Tracked>> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) due.push_back(it->second);
  for (auto& t : due) {
    if (t->sent) {
      Error e = make_error(errc::timeout, "no outcome before the publish's deadline; the broker may or may not have it");
      e.sent = Sent::maybe;
      settle(t, std::move(e));
    } else {
      std::string why = connection_ ? "the channel was not ready before the publish's deadline; it was never sent"
                                    : "no connection before the publish's deadline; it was never sent";
      if (status_.last_cause) why += " (last cause: " + status_.last_cause->to_string() + ")";
      Error e = make_error(errc::timeout, why);
      e.sent = Sent::no;
      settle(t, std::move(e));
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
    if (w->tracked->owner) send(w->view(), std::as_bytes(std::span{w->body.data(), w->body.size()}), w->tracked);
  }
}

void RecoveringChannel::fail_waiting(const Error& cause) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) settle(w->tracked, cause);
  rearm();
}

void RecoveringChannel::set_status(Status status) {
  status_ = std::move(status);
  if (on_status) on_status(status_);
}

void RecoveringChannel::attach(std::shared_ptr<Connection> connection) {
  connection_ = std::move(connection);
  status_.attempt = 0;
  open();
}

void RecoveringChannel::open() {
  ready_ = false;
  channel_ = Channel{};
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
    self->channel_ = std::move(*ch);
    self->channel_.confirm_select([current](Result<void> r) {
      auto self = current();
      if (!self) return;
      if (!r) return self->failed(r.error());
      self->setup_(*self, [current](Result<void> r) {
        auto self = current();
        if (!self) return;
        if (!r) return self->failed(r.error());
        self->ready_ = true;
        self->permanent_.reset();
        self->refusal_told_ = false;
        if (self->session_ && std::exchange(self->was_ready_, true))
          self->session_->observe("channel.recovered", Level::info, self->channel_.id(), nullptr, {});
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
  if (channel_.is_open()) {
    // Still open (setup's own failure, say): close it, so its number and prefetch go back.
    channel_.close(nullptr);
  }
  channel_ = Channel{};
  const bool is_refused = refused(cause) && session_;
  const bool stop = is_refused && !session_->options_.retry_refused_setup;
  if (permanent_for_channel(cause) || stop) {
    permanent_ = cause;
    fail_waiting(cause);  // waiting will not change the answer
  }
  if (is_refused && !std::exchange(refusal_told_, true)) {
    session_->observe("channel.setup_refused", Level::error, 0, &cause, stop ? "not retried" : "retrying");
    if (session_->options_.on_setup_refused) {
      session_->options_.on_setup_refused(cause);
    } else {
      std::fprintf(stderr, "warren: a recovering channel's setup was refused: %s (%s; SessionOptions::on_setup_refused replaces this line)\n",
                   cause.to_string().c_str(), stop ? "not retried" : "retrying with backoff");
    }
  }
  if (stop) {
    if (retry_timer_) retry_timer_->cancel();
    set_status(Status{State::failed, status_.attempt, engine::Duration{0}, cause});
    return;
  }
  const unsigned attempt = status_.attempt + 1;
  const auto delay = session_->draw_delay(attempt);
  session_->observe("channel.retrying", Level::warning, 0, &cause, attempt_text(attempt, delay));
  set_status(Status{State::retrying, attempt, delay, cause});
  if (!retry_timer_) {
    std::weak_ptr<RecoveringChannel> weak = weak_from_this();
    retry_timer_ = driver_.keepalive_timer([weak] {
      auto self = weak.lock();
      if (self && self->connection_ && self->connection_->is_open() && !self->ready_) self->open();
    });
  }
  retry_timer_->arm(driver_.now() + delay);
}

void RecoveringChannel::detach() {
  ready_ = false;
  channel_ = Channel{};  // its handle, and every delivery of it, fail from now on
  connection_.reset();
  ++open_generation_;
  if (retry_timer_) retry_timer_->cancel();
}

// ---- the session

Session::Session(Driver& driver, std::vector<ConnectionUrl> urls, SessionOptions options)
    : driver_(driver), urls_(std::move(urls)), options_(std::move(options)),
      random_(options_.jitter_seed ? *options_.jitter_seed : std::random_device{}()) {}

Session::~Session() {
  // Its recovering channels let go of the connection and tell every publish (the
  // application may keep a channel; its later publishes fail at once).
  for (auto& ch : channels_) ch->orphan(make_error(errc::connection_closed, "the session was destroyed"));
  // Dropped while plain channels wait for a connection: each is still told, after this turn.
  fail_channel_waiters(make_error(errc::connection_closed, "the session was destroyed before a connection came"));
}

Error Session::closed_cause() const {
  if (status_.last_cause && permanent(*status_.last_cause)) return *status_.last_cause;
  return make_error(errc::connection_closed, "the session is closed");
}

std::shared_ptr<Session> Session::start(Driver& driver, ConnectionUrl url, SessionOptions options) {
  std::vector<ConnectionUrl> urls;
  urls.push_back(std::move(url));
  return start(driver, std::move(urls), std::move(options));
}

std::shared_ptr<Session> Session::start(Driver& driver, std::vector<ConnectionUrl> urls, SessionOptions options) {
  std::erase_if(urls, [](const ConnectionUrl& u) { return u.endpoints.empty(); });
  const bool none = urls.empty();
  std::shared_ptr<Session> self(new Session(driver, std::move(urls), std::move(options)));
  if (none) {
    self->status_ = Status{State::closed, 0, engine::Duration{0}, make_error(errc::invalid_argument, "a session needs a URL with a host")};
    return self;
  }
  std::weak_ptr<Session> weak = self;
  // It keeps the loop alive: while it waits there is no socket to.
  self->retry_timer_ = driver.keepalive_timer([weak] {
    if (auto s = weak.lock()) s->dial();
  });
  self->dial();
  return self;
}

void Session::observe(std::string_view name, Level level, engine::ChannelId channel, const Error* cause,
                      std::string_view subject) const {
  const auto& observer = options_.client.observer;
  if (!observer) return;
  const Endpoint& host = connection_ ? connection_->endpoint() : urls_.front().endpoints.front();
  const std::string peer = host.host + ":" + std::to_string(host.port);
  observer->on_record(Record{name, level, peer, channel, cause, subject});
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
  // serves them is not always the first one tried. An attempt dials one URL: its hosts from
  // that one on (Connection::connect moves along them), the next attempt the next.
  std::size_t at = first_host_ % host_count();
  std::size_t which = 0;
  while (at >= urls_[which].endpoints.size()) at -= urls_[which++].endpoints.size();
  ConnectionUrl url = urls_[which];
  std::rotate(url.endpoints.begin(), url.endpoints.begin() + static_cast<std::ptrdiff_t>(at), url.endpoints.end());
  // The host just lost goes last: a hung one costs a whole handshake timeout to find out again.
  if (avoid_)
    std::stable_partition(url.endpoints.begin(), url.endpoints.end(),
                          [&](const Endpoint& e) { return !(e.host == avoid_->host && e.port == avoid_->port); });
  ++first_host_;
  *holder = Connection::connect(driver_, url, options_.client, [weak, holder, which](Result<void> r) {
    const Error* e = r ? nullptr : &r.error();
    auto self = weak.lock();
    auto connection = std::move(*holder);
    if (!self || self->status_.state == State::closed) {
      if (connection && !e) connection->close([](Result<void>) {});
      return;
    }
    if (e) return self->retry(*e);
    self->connection_ = std::move(connection);
    self->connected_url_ = which;
    self->connection_->on_closed = [weak](const Error& cause) {
      if (auto s = weak.lock()) s->lost(cause);
    };
    self->connection_->on_channel_closed = [weak](engine::ChannelId id, const Error& cause) {
      auto s = weak.lock();
      if (!s) return;
      for (auto& ch : s->channels_)
        if (ch->channel_.id() == id) return ch->failed(cause);
    };
    self->connected();
  });
  dialing_ = *holder;
}

void Session::connected() {
  avoid_.reset();
  observe(ever_connected_ ? "session.reconnected" : "session.connected", Level::info, 0, nullptr, {});
  if (ever_connected_ && options_.client.metrics)
    options_.client.metrics->counter({"warren.session.reconnects", "{reconnect}", "Sessions connected again after losing their connection"})
        .add();
  ever_connected_ = true;
  frame_max_bytes_ = connection_->frame_max_bytes();
  broker_version_ = connection_->broker_version();
  set_status(Status{State::connected, 0, engine::Duration{0}, status_.last_cause});
  for (auto& ch : channels_) ch->attach(connection_);
  // The plain channels asked for meanwhile, in the order asked.
  auto waiters = std::move(channel_waiters_);
  channel_waiters_.clear();
  if (channel_waiter_timer_) channel_waiter_timer_->cancel();
  for (auto& [deadline, done] : waiters) {
    if (!connection_ || !connection_->is_open()) {  // lost again inside a callback: wait on
      channel_waiters_.emplace(deadline, std::move(done));
      continue;
    }
    connection_->open_channel(std::move(done));
  }
  if (!channel_waiters_.empty()) channel_waiter_timer_->arm(channel_waiters_.begin()->first);
}

void Session::open_channel(Callback<Channel> done) {
  if (status_.state == State::closed) {
    driver_.post([done = std::move(done), cause = closed_cause()] { done(cause); });
    return;
  }
  if (status_.state == State::connected && connection_ && connection_->is_open())
    return connection_->open_channel(std::move(done));
  if (!channel_waiter_timer_) {
    std::weak_ptr<Session> weak = weak_from_this();
    channel_waiter_timer_ = driver_.timer([weak] {
      if (auto s = weak.lock()) s->expire_channel_waiters();
    });
  }
  const auto deadline = driver_.now() + options_.client.engine.request_timeout;
  channel_waiters_.emplace(deadline, std::move(done));
  channel_waiter_timer_->arm(channel_waiters_.begin()->first);
}

void Session::expire_channel_waiters() {
  const auto now = driver_.now();
  std::vector<Callback<Channel>> expired;
  while (!channel_waiters_.empty() && channel_waiters_.begin()->first <= now) {
    expired.push_back(std::move(channel_waiters_.begin()->second));
    channel_waiters_.erase(channel_waiters_.begin());
  }
  if (!channel_waiters_.empty()) channel_waiter_timer_->arm(channel_waiters_.begin()->first);
  for (auto& done : expired)
    done(make_error(errc::timeout, "no connection came within the request timeout (the session is still dialling)"));
}

void Session::fail_channel_waiters(const Error& cause) {
  auto waiters = std::move(channel_waiters_);
  channel_waiters_.clear();
  if (channel_waiter_timer_) channel_waiter_timer_->cancel();
  for (auto& [deadline, done] : waiters)
    driver_.post([done = std::move(done), cause] { done(cause); });
}

std::size_t Session::host_count() const noexcept {
  std::size_t n = 0;
  for (const auto& u : urls_) n += u.endpoints.size();
  return n;
}

void Session::lost(const Error& cause) {
  // The next attempt starts at another host than the one lost, drawn at random among the
  // rest: a node that went away (killed, hung) does not send every one of its clients to the
  // same next node, and the lost one is tried last.
  if (const std::size_t n = host_count(); connection_ && n > 1) {
    const Endpoint& gone = connection_->endpoint();
    std::size_t position = 0, found = n;
    for (const auto& u : urls_)
      for (const auto& e : u.endpoints) {
        if (found == n && e.host == gone.host && e.port == gone.port) found = position;
        ++position;
      }
    if (found < n) {
      std::uniform_int_distribution<std::size_t> other(1, n - 1);
      first_host_ = found + other(random_);
      avoid_ = gone;
    }
  }
  connection_.reset();
  for (auto& ch : channels_) ch->detach();
  if (status_.state == State::closed) return;
  status_.attempt = 0;
  retry(cause);
}

void Session::retry(const Error& cause) {
  // With a credentials provider a refused login (403 at the connection level: only the login
  // is refused there) or a refused new secret (530 to connection.update-secret) is a token that
  // expired or was revoked: the next dial asks the provider again, which may hand over a valid
  // one. Anything else permanent (a missing vhost, its access refused: 530 to
  // connection.open) stays so.
  const bool refreshable =
      options_.client.credentials && !cause.channel_close &&
      (cause.reply_code == 403 || (cause.reply_code == 530 && cause.class_id == 10 && cause.method_id == 70));
  if (permanent(cause) && !refreshable) {  // whether or not it ever worked: waiting will not change the answer
    observe("session.gave_up", Level::error, 0, &cause, {});
    set_status(Status{State::closed, status_.attempt, engine::Duration{0}, cause});
    for (auto& ch : channels_) ch->fail_waiting(cause);  // now, not at their deadlines
    fail_channel_waiters(cause);
    return;
  }
  const unsigned attempt = status_.attempt + 1;
  const engine::Duration delay = draw_delay(attempt);
  observe("session.reconnecting", Level::warning, 0, &cause, attempt_text(attempt, delay));
  set_status(Status{ever_connected_ ? State::reconnecting : State::connecting, attempt, delay, cause});
  if (status_.state == State::closed) return;  // closed from on_status: nothing more to dial
  retry_timer_->arm(driver_.now() + delay);
}

std::shared_ptr<RecoveringChannel> Session::channel(RecoveringChannel::Setup setup) {
  std::shared_ptr<RecoveringChannel> ch(new RecoveringChannel(*this, std::move(setup)));
  channels_.push_back(ch);
  if (status_.state == State::connected) ch->attach(connection_);
  return ch;
}

void Session::close(Callback<void> done) {
  if (!done) done = [](Result<void>) {};
  const bool was_connected = connection_ && connection_->is_open();
  // The application's own close: what went wrong before is no longer the state's cause.
  set_status(Status{State::closed, 0, engine::Duration{0}, std::nullopt});
  if (retry_timer_) retry_timer_->cancel();  // none when started without a URL
  for (auto& ch : channels_) {
    ch->ready_ = false;
    if (ch->retry_timer_) ch->retry_timer_->cancel();
    Error never_sent = make_error(errc::connection_closed, "the session closed first; it was never sent");
    never_sent.sent = Sent::no;
    ch->fail_waiting(never_sent);
  }
  fail_channel_waiters(make_error(errc::connection_closed, "the session closed before a connection came"));
  // A dial under way (a host that takes the connection and never answers) ends now, not at its
  // handshake timeout: nothing of the session's may keep the loop running after close().
  if (auto dialing = dialing_.lock(); dialing && dialing != connection_) dialing->close(nullptr);
  if (!was_connected) {
    driver_.post([done = std::move(done)] { done(Result<void>()); });
    return;
  }
  connection_->close(std::move(done));
}

void Session::update_secret(std::string_view secret, std::string_view reason, Connection::Done done) {
  if (connection_ && connection_->is_open()) return connection_->update_secret(secret, reason, std::move(done));
  if (done)
    driver_.post([done = std::move(done)] {
      done(make_error(errc::connection_closed, "the session has no connection now; the next one asks for credentials itself"));
    });
}

const char* to_string(Session::State state) noexcept {
  switch (state) {
    case Session::State::connecting: return "connecting";
    case Session::State::connected: return "connected";
    case Session::State::reconnecting: return "reconnecting";
    case Session::State::closed: return "closed";
  }
  return "?";
}

const char* to_string(RecoveringChannel::State state) noexcept {
  switch (state) {
    case RecoveringChannel::State::opening: return "opening";
    case RecoveringChannel::State::ready: return "ready";
    case RecoveringChannel::State::retrying: return "retrying";
    case RecoveringChannel::State::failed: return "failed";
  }
  return "?";
}

namespace {
template <class Status>
std::string status_text(const char* state, const Status& s) {
  std::string text = state;
  std::string more;
  if (s.attempt > 0) more = attempt_text(s.attempt, s.delay);
  if (s.last_cause) more += std::string(more.empty() ? "" : "; ") + "last cause: " + s.last_cause->to_string();
  if (!more.empty()) text += " (" + more + ")";
  return text;
}
}  // namespace

std::string to_string(const Session::Status& status) {
  return status_text(to_string(status.state), status);
}

std::string to_string(const RecoveringChannel::Status& status) {
  return status_text(to_string(status.state), status);
}

}  // namespace warren::client

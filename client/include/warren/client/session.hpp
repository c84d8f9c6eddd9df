// A Session outlives sockets. It dials (the URL's hosts in turn), and when the connection is
// lost it dials again with exponential backoff and full jitter, then re-runs the setup
// function each recovering channel was given, on a fresh channel. It never replays a
// topology cache: what a channel needs, its setup declares again.
//
// What survives a drop, and what does not:
// - A publish made while disconnected waits, within its own deadline, and goes out once its
//   channel's setup has run again. At most `max_waiting_publishes` wait; past that a publish
//   fails at once (nothing is queued without bound).
// - A publish whose confirm was outstanding at the drop fails with outcome `failed` ("its
//   fate is unknown") and is never republished: the broker may have it.
// - A delivery from before the drop cannot be settled: its tag belonged to the dead channel.
//   ack()/nack() on the Delivery or Message send nothing and say so (errc::channel_closed);
//   the broker redelivers the message. Processing is therefore at least once. A stream
//   consumer of the dead channel never hands out what it had buffered.
// - The first connection is retried too while its failures are transient; refused
//   credentials (403), a missing vhost (530) and invalid options fail at once, and so does
//   every publish still waiting.
// - Each attempt starts at the next host of the URL, so a host that keeps failing is not
//   always the first one tried.
// - A channel fails on its own too: its open, confirm.select or setup fails, or the broker
//   closes it (a 404 on a publish to a missing exchange, say). It is opened again with the
//   same backoff while the connection lives, and says so through its on_status. While the
//   cause is one a retry cannot fix by itself (403, 406), publishes fail at once with it
//   instead of waiting out their deadlines. healthy() is true only when the connection is up
//   and every recovering channel is ready.
#pragma once

#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "warren/client/connection.hpp"

namespace warren::client {

struct Backoff {
  engine::Duration base{100};  // the first retry waits up to this
  double factor = 2.0;         // each further retry's ceiling grows by this
  engine::Duration cap{30000}; // no ceiling above this
  // The ceiling for retry `attempt` (1-based): min(cap, base * factor^(attempt-1)). The delay
  // is drawn uniformly from [0, ceiling] ("full jitter").
  [[nodiscard]] engine::Duration ceiling(unsigned attempt) const;
};

// "attempt 3 in 412 ms": a retry's number and delay, as statuses and records write them.
[[nodiscard]] std::string attempt_text(unsigned attempt, engine::Duration delay);

struct SessionOptions {
  ClientOptions client{};
  Backoff backoff{};
  std::size_t max_waiting_publishes = 10000;
  std::optional<std::uint64_t> jitter_seed{};  // tests fix it; otherwise random
  // A recovering channel's open or setup refused in a way a retry cannot fix by itself
  // (is_permanent: 403, an inequivalent redeclare's 406; or a 404, a passive declare of
  // something missing): told once per episode (until the channel is ready again). Unset: one
  // line on standard error, so such a channel is never retried in silence.
  std::function<void(const Error& cause)> on_setup_refused{};
  // false: such a channel is not retried (its state is `failed`, its publishes fail at once)
  // until the session's next connection.
  bool retry_refused_setup = true;
};

class Session;

// A channel that is re-opened, put in confirm mode and set up again after every reconnect.
class RecoveringChannel : public std::enable_shared_from_this<RecoveringChannel> {
 public:
  // Runs on each new channel, after confirm.select, with that generation's Channel handle
  // (declare, bind, consume on it); `done` with success marks the channel ready.
  using Setup = std::function<void(RecoveringChannel& channel, Callback<void> done)>;
  enum class State { opening, ready, retrying, failed };  // failed: refused, not retried (SessionOptions)
  struct Status {
    State state = State::opening;
    unsigned attempt = 0;               // retrying: which retry is next (1-based)
    engine::Duration delay{0};          // retrying: how long until it
    std::optional<Error> last_cause{};  // why the channel is not ready, when it failed
  };
  ~RecoveringChannel();

  // Kept after its session was destroyed, the channel fails every publish at once
  // (connection_closed); the publishes it held then were told the same, from the loop.
  // Every change of this channel's state, as it happens (on the loop's thread).
  std::function<void(const Status& status)> on_status;
  [[nodiscard]] const Status& status() const noexcept { return status_; }

  // Publishes now if the channel is ready, else waits until it is. The publish's timeout
  // (unset: the session's client.engine.request_timeout) bounds all of it: the wait, the
  // write and the broker's answer. The outcome is reported as by Channel::publish.
  void publish(const Publish& publish, Body body, Callback<engine::PublishOutcome> done);
  // This generation's channel: for setup's declarations and subscriptions. An empty handle
  // (every verb fails) while there is none; a handle of an earlier generation fails with
  // that channel's cause.
  [[nodiscard]] const Channel& channel() const noexcept { return channel_; }
  [[nodiscard]] engine::ChannelId id() const noexcept { return channel_.id(); }
  [[nodiscard]] bool ready() const noexcept { return ready_; }
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.size(); }
  [[nodiscard]] std::size_t in_flight() const noexcept { return deadlines_.size() - waiting_.size(); }
  // The loop its session runs on (what a completion token's initiation is handed to).
  [[nodiscard]] Driver& driver() const noexcept;

 private:
  friend class Session;
  struct Waiting;
  struct Tracked;  // one publish until its outcome is reported, waiting or sent
  RecoveringChannel(Session& session, Setup setup);
  void attach(std::shared_ptr<Connection> connection);  // opens it
  void detach();  // the connection is gone
  void open();    // channel.open, confirm.select, setup, on the current connection
  void failed(const Error& cause);  // this channel (not the connection) failed: retry it
  void fail_waiting(const Error& cause);
  void set_status(Status status);
  void flush_waiting();
  // Hands a publish to the connection, with the rest of its own deadline as the engine's.
  void send(const Publish& p, std::span<const std::byte> body, const std::shared_ptr<Tracked>& t);
  void expire();  // publishes past their deadline, waiting or sent
  void rearm();   // the deadline timer, for the earliest deadline or none
  static void settle(const std::shared_ptr<Tracked>& t, Result<engine::PublishOutcome> outcome);
  void abandon(const Error& cause);  // every publish not yet reported is told `cause` (posted)
  void orphan(const Error& cause);   // the session is being destroyed

  Session* session_;  // null once the session was destroyed
  Driver& driver_;
  Setup setup_;
  std::shared_ptr<Connection> connection_;
  Channel channel_;
  std::uint64_t open_generation_ = 0;  // callbacks of an earlier open attempt are stale
  bool ready_ = false;
  Status status_;
  std::optional<Error> permanent_;  // a cause a retry cannot fix by itself: publishes fail at once
  bool refusal_told_ = false;       // this episode's refusal was reported (on_setup_refused)
  bool was_ready_ = false;          // ready once before: the next ready is a recovery
  std::unique_ptr<Timer> retry_timer_;
  std::deque<std::unique_ptr<Waiting>> waiting_;
  std::multimap<engine::Instant, std::shared_ptr<Tracked>> deadlines_;  // every unsettled publish
  std::unique_ptr<Timer> deadline_timer_;
  std::optional<engine::Instant> armed_;  // the earliest deadline, as armed
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  enum class State { connecting, connected, reconnecting, closed };
  struct Status {
    State state = State::connecting;
    unsigned attempt = 0;          // reconnecting: which retry is next (1-based)
    engine::Duration delay{0};     // reconnecting: how long until it
    std::optional<Error> last_cause{};
  };

  [[nodiscard]] static std::shared_ptr<Session> start(Driver& driver, ConnectionUrl url, SessionOptions options);
  // Several URLs (each with its own credentials, vhost or TLS settings), tried as one URL's
  // hosts are: each attempt dials one URL, from the next host along them all. None: the
  // session is closed at once with errc::invalid_argument.
  [[nodiscard]] static std::shared_ptr<Session> start(Driver& driver, std::vector<ConnectionUrl> urls,
                                                      SessionOptions options);
  ~Session();

  // Every change of state, as it happens.
  std::function<void(const Status& status)> on_status;

  // A recovering channel; its setup runs now if connected, and after every reconnect.
  [[nodiscard]] std::shared_ptr<RecoveringChannel> channel(RecoveringChannel::Setup setup);
  void close(Callback<void> done);
  // connection.update-secret on the current connection (Connection::update_secret); while
  // there is none, errc::connection_closed (the next dial asks client.credentials anyway).
  void update_secret(std::string_view secret, std::string_view reason, Connection::Done done);

  [[nodiscard]] const Status& status() const noexcept { return status_; }
  // Connected, and every recovering channel ready.
  [[nodiscard]] bool healthy() const noexcept;
  [[nodiscard]] Driver& driver() noexcept { return driver_; }
  // The host the session is connected to now; nullopt while it is not.
  [[nodiscard]] std::optional<Endpoint> endpoint() const {
    if (connection_ && connection_->is_open()) return connection_->endpoint();
    return std::nullopt;
  }
  [[nodiscard]] std::size_t max_waiting_publishes() const noexcept { return options_.max_waiting_publishes; }

  // The connection the session is connected on now; null while it is not. For code that
  // works on a Connection (a pipeline, a status board) and starts again on the next one after
  // a loss: the handle does not recover, and a kept one stays closed once it was lost.
  [[nodiscard]] std::shared_ptr<Connection> connection() const {
    if (connection_ && connection_->is_open()) return connection_;
    return nullptr;
  }
  // Which of the URLs given to start() connection() was dialled from (its user, its vhost);
  // nullopt while there is none.
  [[nodiscard]] std::optional<std::size_t> url_index() const {
    if (connection()) return connected_url_;
    return std::nullopt;
  }

  // A plain channel on the session's connection, for code that keeps its own channels and
  // sets up again what it needs after a reconnect (the messaging layer does). It does not
  // recover: the connection's loss closes it with the cause, and its owner opens another.
  // While the session is connecting or reconnecting the call waits for the next connection,
  // at most client.engine.request_timeout (then errc::timeout); on a closed session, or when
  // the session closes or is dropped meanwhile, it fails. `done` is told exactly once, never
  // inside this call.
  void open_channel(Callback<Channel> done);
  // What the latest connection negotiated and was told: frame_max (0 before the first
  // connection) and the broker's version, kept while the session reconnects.
  [[nodiscard]] std::uint32_t frame_max_bytes() const noexcept { return frame_max_bytes_; }
  [[nodiscard]] std::optional<BrokerVersion> broker_version() const { return broker_version_; }

 private:
  Session(Driver& driver, std::vector<ConnectionUrl> urls, SessionOptions options);
  void dial();
  void connected();
  void lost(const Error& cause);
  void retry(const Error& cause);
  void set_status(Status status);
  friend class RecoveringChannel;
  [[nodiscard]] engine::Duration draw_delay(unsigned attempt);  // full jitter under the backoff's ceiling
  // Why a closed session refuses work: the cause no retry fixes (403, 530), else "closed".
  [[nodiscard]] Error closed_cause() const;
  void fail_channel_waiters(const Error& cause);  // every open_channel still waiting (posted)
  void expire_channel_waiters();                  // those past their deadline

  Driver& driver_;
  std::vector<ConnectionUrl> urls_;  // never empty once started
  SessionOptions options_;
  // One record to SessionOptions::client.observer, if there is one, naming the host the
  // session is connected to (else its URL's first host).
  void observe(std::string_view name, Level level, engine::ChannelId channel, const Error* cause,
               std::string_view subject) const;
  std::mt19937_64 random_;
  Status status_;
  std::shared_ptr<Connection> connection_;
  std::size_t connected_url_ = 0;  // connection_'s index in urls_
  std::weak_ptr<Connection> dialing_;  // the latest dial's, until it is connection_ or gone
  std::unique_ptr<Timer> retry_timer_;
  std::vector<std::shared_ptr<RecoveringChannel>> channels_;
  bool ever_connected_ = false;
  // Where the next attempt starts, counted along every URL's hosts in turn: each attempt one
  // host further; after a loss, a host other than the lost one, drawn at random, so the
  // clients of a node that went away do not all land on the same next one (and the lost one
  // comes last in each attempt until a connection comes).
  std::size_t first_host_ = 0;
  std::optional<Endpoint> avoid_;  // the host lost last: dialled last until a connection comes
  [[nodiscard]] std::size_t host_count() const noexcept;
  std::multimap<engine::Instant, Callback<Channel>> channel_waiters_;  // open_channel while not connected
  std::unique_ptr<Timer> channel_waiter_timer_;
  std::uint32_t frame_max_bytes_ = 0;
  std::optional<BrokerVersion> broker_version_;
};

// The states' names, for logs: "connecting", "ready", ...
[[nodiscard]] const char* to_string(Session::State state) noexcept;
[[nodiscard]] const char* to_string(RecoveringChannel::State state) noexcept;
// "reconnecting (attempt 3 in 400 ms; last cause: connection lost: ...)", "connected": the
// attempt and delay while a retry waits, the last cause when there is one.
[[nodiscard]] std::string to_string(const Session::Status& status);
[[nodiscard]] std::string to_string(const RecoveringChannel::Status& status);

}  // namespace warren::client

// One run of a subcommand: read and parse the URLs (url_sources.hpp), pick the loop, connect (each --url in turn, each
// URL's hosts in turn), open a channel, hand over to the command, and turn whatever goes
// wrong into one line on stderr and a non-zero exit. A protocol fault or a lost connection
// ends the run when it is seen, not when a later timeout runs out.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "metrics_endpoint.hpp"
#include "password_file.hpp"
#include "record_log.hpp"
#include "runtime.hpp"
#include "warren/client/connection.hpp"
#include "warren/client/session.hpp"

namespace warren::cli {

inline constexpr const char* default_url = "amqp://guest:guest@127.0.0.1:5672";

// The options every subcommand takes.
struct Common {
  std::vector<std::string> urls;  // --url; empty: --url-file, else WARREN_URL, else default_url
  std::string url_file;           // --url-file: one URL a line (url_sources.hpp)
  std::string password_file;      // --password-file: the secret, re-read (password_file.hpp)
  std::string driver = "uv";
  std::string log_level = "off";   // the client's event records on stderr: debug, info, warning, error
  std::string log_format = "text";  // or json
  std::string metrics_listen;       // HOST:PORT serving /metrics; empty: no metrics kept
};

// Exit codes: 0 done, 1 the work failed (broker said no, timeout, nack), 2 the command line
// was wrong. A stop by a signal: 0 for a worker, else death by the signal (Job::worker()).
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

// How long a non-worker's stop may take: confirms of what it sent, its closes.
inline constexpr auto stop_deadline = std::chrono::seconds(1);

// Seconds as the command line gives them (--timeout, -z): checked, converted, and printed
// back as given ("1", "2.5").
[[nodiscard]] Result<void> check_timeout_seconds(double seconds);  // finite and positive
[[nodiscard]] engine::Duration from_seconds(double seconds);
[[nodiscard]] std::string seconds_text(double seconds);

// "connect 127.0.0.1:5999: connection refused", "access refused (403): ...": a dial error
// already says what and why; warren's own errors say their kind first.
[[nodiscard]] std::string describe(const Error& error);
// "returned 312 NO_ROUTE": the line the CLI's contract fixes for a returned publish. The
// error's detail goes on to name the exchange and routing key, which the command line
// already said; the broker's own text is what comes before them.
[[nodiscard]] std::string returned_line(const Error& error);

class Job {
 public:
  explicit Job(Common common) : common_(std::move(common)) {}
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the command to its end and returns the exit code.
  int run();

 protected:
  // The connection is up and channel_ is open.
  virtual void start() = 0;
  // The command's own checks before anything is dialled; an error is a usage error.
  [[nodiscard]] virtual Result<void> validate() { return {}; }
  // SIGTERM or SIGINT once start() ran, on the loop (tools/warren/stop_signals.hpp; before
  // start() the Job itself stops the run: see worker()). A long-running command stops taking
  // work, hands back what is in flight, ends its children and exits (docs/warren-cli.md,
  // "STOPPING"). By default: stop_by_signal() at once.
  virtual void on_stop_signal(int signal);
  // A worker (pipe, work run) ends a stop with exit 0, having handed back what it held, and
  // says nothing for it; every other command ends by the signal after one line on stderr.
  [[nodiscard]] virtual bool worker() const { return false; }
  // What the stop line adds after "stopped by SIGTERM: " (what it read and did not get
  // confirmed, "3 line(s) read, 1 not confirmed"); "" adds nothing.
  [[nodiscard]] virtual std::string unfinished() const { return {}; }
  virtual client::ClientOptions options() { return {}; }
  // A long-running command that outlives a lost connection (work run, log append): its layer
  // runs over a client::Session (session()) instead of conn_ and channel_, which stay empty.
  // The first connection must come as without one (every URL and host tried once, else the
  // command fails); after it, a lost connection (a node killed, or hung past the heartbeat)
  // is dialled again along the URLs' hosts, another host than the lost one first, for as long
  // as the command runs.
  [[nodiscard]] virtual bool recovers() const { return false; }
  // recovers(): the session is connected again after a loss (start() ran on the first one).
  virtual void reconnected() {}
  [[nodiscard]] const std::shared_ptr<client::Session>& session() const noexcept { return session_; }
  // The session's connection when it is open and another than `since` (the session connected
  // again after `since` was lost); null while none is open or it is still `since`.
  [[nodiscard]] std::shared_ptr<client::Connection> connected_again_since(const std::shared_ptr<client::Connection>& since) const {
    auto now = session_ ? session_->connection() : nullptr;
    return now && now != since ? now : nullptr;
  }
  // A step that failed because its channel or connection went away under it, while the
  // command goes on: the broker takes back what it held (an unsettled delivery is delivered
  // again). With a session, the channel or the connection (which the session dials again);
  // without one, only the channel, on a connection still open.
  [[nodiscard]] bool went_away_under_it(const Error& error) const;
  // A step the broker did not answer in time while its connection lives on (a quorum queue
  // whose leader hangs or is being elected): the request timed out and its channel closed.
  // A subscription's or pipeline's start is made again after a pause, not the end of a service.
  [[nodiscard]] bool unanswered_while_connected(const Error& error) const;
  // A recovering producer's publish that did not land and is made again (tools/warren/again.hpp):
  // what went away under it, a nack (the broker did not take it: a quorum queue without a
  // leader, a full queue that rejects publishes) and a publish timeout (no confirm in time: a
  // leader being elected; the broker may have it).
  [[nodiscard]] bool worth_making_again(const Error& error) const;
  // Once, as the job starts closing its connections (finish, a failure, a stop): a command's
  // layer ends its subscriptions here, so no retry timer of theirs keeps the loop running.
  virtual void closing() {}

  // A non-worker's stop, in two steps: begin_stop() once (false when a stop was already under
  // way: the caller ends at once with stopped_now()) arms the stop's one deadline, after which
  // the process ends however far it got; close_then_die() closes every connection (so acks
  // and publishes already written reach the broker) and ends the process by the signal once
  // they are closed. finish() during a stop is close_then_die().
  [[nodiscard]] bool begin_stop(int signal);
  void close_then_die();
  [[noreturn]] void stopped_now();
  [[nodiscard]] bool stopping() const noexcept { return stop_signal_ != 0; }
  void stop_by_signal(int signal) {
    if (begin_stop(signal)) close_then_die();
    else stopped_now();
  }

  void fail(std::string_view what, const Error& error, int code = exit_failed);
  // A line on stderr that is not the end (a put made again, a message the broker redelivers):
  // "warren: <what>: <why>" as text, a record named `event` under --log-format json, so a JSON
  // log reader never meets a line it cannot parse.
  void say(std::string_view event, std::string_view what, std::string_view why) const {
    print_final_line(common_.log_format, {.event = event, .level = client::Level::warning, .what = what, .why = why});
  }
  void fail_text(std::string_view what, std::string_view why, int code = exit_failed);
  // Our own words for `cause` (a returned publish's line), its reply code kept for the record.
  void fail_text(std::string_view what, std::string_view why, const Error& cause) {
    fail_with(what, why, exit_failed, cause.reply_code);
  }
  // Prints "warren: <what>: <why>" (or "warren: <why>" when `what` is empty), or its record
  // under --log-format json (record_log.hpp).
  void report(std::string_view what, std::string_view why, std::uint16_t reply_code = 0) const;
  void finish();  // success: close cleanly, then exit with exit_code_
  [[nodiscard]] bool failed() const noexcept { return exit_code_ != 0; }
  // The failure reported on stderr, without its "warren: " ("" while none was).
  [[nodiscard]] const std::string& failure_text() const noexcept { return failure_text_; }
  [[nodiscard]] client::Driver& driver() { return runtime_->driver(); }
  // What --metrics-listen serves (null without it): a command's layers count there too.
  [[nodiscard]] const std::shared_ptr<client::Metrics>& metrics() const noexcept { return metrics_; }
  // What --log-level prints to (null when off): a command's layers report there too.
  [[nodiscard]] const std::shared_ptr<client::Observer>& records() const noexcept { return records_; }
  // One record of the command's own there (a warning about what it would not pass on, say).
  void record(std::string_view name, client::Level level, std::string_view subject) const {
    if (records_) records_->on_record(client::Record{.name = name, .level = level, .subject = subject});
  }
  // Opens one more connection to the same URLs (perf: one per producer and consumer).
  void connect_another(client::Callback<std::shared_ptr<client::Connection>> done);
  // The same with options of its own (e.g. a consumer's read batching), not options()'s.
  void connect_another(client::ClientOptions options, client::Callback<std::shared_ptr<client::Connection>> done);
  void track(std::shared_ptr<client::Connection> c);  // closed with the job
  // The user `c` logged in as: the user of the URL it was dialled from, or "" when that URL
  // asked for EXTERNAL (the certificate names the user, and warren does not read it).
  [[nodiscard]] std::string login_user(const client::Connection& c) const;
  // The queue as it is, or declared durable when it is missing (never a transient non-exclusive
  // queue: RabbitMQ 4.3 refuses one by default, docs/compatibility.md); `done` gets its message
  // count. The passive check runs on a channel of its own, since a 404 closes it.
  void ensure_queue(const std::string& queue, client::Callback<std::uint32_t> messages);

  std::shared_ptr<client::Connection> conn_;
  client::Channel channel_;
  int exit_code_ = 0;

 private:
  [[nodiscard]] std::size_t host_count() const;  // every URL's hosts
  void start_session();
  void on_session_status(const client::Session::Status& status);
  void connect_from(std::size_t index, std::shared_ptr<const client::ClientOptions> options,
                    std::shared_ptr<client::Callback<std::shared_ptr<client::Connection>>> done);
  void close_all();
  void on_signal(int signal);
  void stop_before_start(int signal);
  void fail_with(std::string_view what, std::string_view why, int code, std::uint16_t reply_code);

  Common common_;
  std::shared_ptr<client::Observer> records_;  // --log-level: every connection's records
  std::shared_ptr<client::Metrics> metrics_;   // --metrics-listen: every connection's figures
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::shared_ptr<PasswordFile> password_file_;  // --password-file
  void watch_password_file();
  bool password_unreadable_ = false;  // said once per spell the file cannot be read
  std::vector<client::ConnectionUrl> urls_;
  std::unique_ptr<Runtime> runtime_;
  // After runtime_: a timer is destroyed before the loop it runs on.
  std::unique_ptr<client::Timer> password_watch_;  // re-reads it; a change goes to every connection
  std::vector<std::shared_ptr<client::Connection>> connections_;
  std::shared_ptr<client::Session> session_;  // recovers(): the command's one connection
  std::size_t failed_dials_ = 0;              // the session's first connection: attempts that failed
  std::map<const client::Connection*, std::size_t> url_index_;  // which of urls_ each was dialled from
  // Connections still dialling or in their handshake: a stop closes them too (a broker that
  // never answers must not hold the stop until the connect timeout).
  std::vector<std::weak_ptr<client::Connection>> dialing_;
  bool started_ = false;  // start() ran
  bool closing_ = false;
  bool finished_ = false;  // finish() was called: the run succeeded
  int stop_signal_ = 0;    // a non-worker is stopping by this signal
  bool dying_ = false;     // close_then_die() ran
  std::unique_ptr<client::Timer> stop_deadline_;
  std::string failure_text_;
};

}  // namespace warren::cli

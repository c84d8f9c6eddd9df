#include "job.hpp"

#include "record_log.hpp"

#include "stop_signals.hpp"
#include "url_sources.hpp"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <system_error>

namespace warren::cli {

std::string describe(const Error& error) {
  // A driver's dial and socket errors carry the system's code; their detail already reads
  // "connect 127.0.0.1:5999: connection refused".
  if (error.code.category() != warren::error_category() && !error.detail.empty()) return error.detail;
  return error.to_string();
}

std::string returned_line(const Error& error) {
  const std::string_view detail = error.detail;
  return "returned " + std::to_string(error.reply_code) + " " + std::string(detail.substr(0, detail.find(" (")));
}

Result<void> check_timeout_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0)
    return make_error(errc::invalid_argument, "--timeout must be a positive number of seconds");
  return {};
}

engine::Duration from_seconds(double seconds) {
  return std::chrono::duration_cast<engine::Duration>(std::chrono::duration<double>(seconds));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

void Job::report(std::string_view what, std::string_view why, std::uint16_t reply_code) const {
  print_final_line(common_.log_format, {.event = "command.failed", .what = what, .why = why, .reply_code = reply_code});
}

int Job::run() {
  // The loop and the stop handler first: a signal from here on is this command's to handle
  // (one that came earlier is handed over now), whatever phase it comes in. Nothing below
  // blocks before the loop runs; reading input and dialling happen on it.
  runtime_ = make_runtime(common_.driver);
  if (!runtime_) {
    report("--driver", "expected uv or asio, not '" + common_.driver + "'");
    return exit_usage;
  }
  stop_signals::set(driver(), [this](int signal) { on_signal(signal); });
  struct Cleared {
    ~Cleared() { stop_signals::clear(); }  // on every return: a later signal finds no handler
  } cleared;
  // Taken out of the environment whichever source wins: no command warren runs inherits it.
  const auto environment_url = take_environment_url();
  auto texts = url_texts(common_, environment_url);
  if (!texts.ok()) {
    report("", texts.error().detail);
    return exit_usage;
  }
  if (!texts->warning.empty())
    print_final_line(common_.log_format,
                     {.event = "url_file.readable", .level = client::Level::warning, .why = texts->warning});
  for (const auto& text : texts->urls) {
    auto url = client::parse_url(text.text);
    if (!url.ok()) {
      report(text.where, describe(url.error()));  // names the source and line, never the URL
      return exit_usage;
    }
    urls_.push_back(std::move(*url));
  }
  if (auto ok = validate(); !ok.ok()) {
    report("", describe(ok.error()));
    return exit_usage;
  }
  if (!common_.password_file.empty()) {
    // Read once now: a file that cannot be read is a mistake on the command line.
    if (auto first = read_password_file(common_.password_file); !first) {
      report("", first.error().detail);
      return exit_usage;
    }
    password_file_ = std::make_shared<PasswordFile>(common_.password_file);
    watch_password_file();
  }
  records_ = make_record_log(common_.log_level, common_.log_format);
  if (!common_.metrics_listen.empty()) {
    metrics_ = std::make_shared<client::Metrics>();
    auto endpoint = MetricsEndpoint::start(common_.metrics_listen, metrics_);
    if (!endpoint) {
      report("", endpoint.error().detail);
      return endpoint.error().code == make_error_code(errc::invalid_argument) ? exit_usage : exit_failed;
    }
    metrics_endpoint_ = std::move(*endpoint);
    // Where it is, for a scraper (and a script that asked for any free port).
    std::fprintf(stderr, "warren: metrics at %s\n", metrics_endpoint_->address().c_str());
  }
  if (recovers()) {
    start_session();
    runtime_->run();
    session_->on_status = nullptr;  // the loop ended: nothing reports to this job after it
    return exit_code_;
  }
  connect_another([this](Result<std::shared_ptr<client::Connection>> c) {
    if (!c) return fail("", c.error());
    conn_ = std::move(*c);
    conn_->open_channel([this](Result<client::Channel> ch) {
      if (closing_) return;  // stopped (or failed) meanwhile: nothing to start
      if (!ch) return fail("channel.open", ch.error());
      channel_ = std::move(*ch);
      started_ = true;
      start();
    });
  });
  runtime_->run();
  return exit_code_;
}

std::size_t Job::host_count() const {
  std::size_t n = 0;
  for (const auto& u : urls_) n += u.endpoints.size();
  return n;
}

void Job::start_session() {
  client::SessionOptions o;
  o.client = options();
  if (!o.client.observer) o.client.observer = records_;
  if (!o.client.credentials) o.client.credentials = password_file_;
  if (!o.client.metrics) o.client.metrics = metrics_;
  session_ = client::Session::start(driver(), urls_, std::move(o));
  session_->on_status = [this](const client::Session::Status& s) { on_session_status(s); };
  // The session's own records say when it reconnects (session.reconnecting, .reconnected).
}

void Job::on_session_status(const client::Session::Status& status) {
  using State = client::Session::State;
  if (closing_) return;
  switch (status.state) {
    case State::connected:
      if (!started_) {
        started_ = true;
        return start();
      }
      return reconnected();
    case State::connecting:
      // The first connection: an attempt dials one URL's hosts, from one host further along
      // them all each time. Once every host was an attempt's first (so every URL was dialled),
      // the command fails as one without a session does, with the last cause.
      if (status.last_cause && ++failed_dials_ >= host_count()) fail("", *status.last_cause);
      return;
    case State::reconnecting: return;
    case State::closed:  // refused for good (403, 530): waiting will not change the answer
      if (status.last_cause) fail("", *status.last_cause);
      return;
  }
}

bool Job::went_away_under_it(const Error& error) const {
  const bool channel = error.code == make_error_code(errc::channel_closed);
  if (!session_) return channel && conn_ && conn_->is_open();
  if (session_->status().state == client::Session::State::closed) return false;
  // A heartbeat timeout fails what was in flight with errc::timeout and connection_ended,
  // before the session hears of the loss: the flag, not the code, says the connection ended;
  // and a consumer's end may not carry it, so a connection no longer open says it too
  // (Session::connection() is null once its engine latched the end).
  return channel || error.connection_ended || error.code == make_error_code(errc::connection_closed) ||
         error.code == make_error_code(errc::connection_lost) || session_->status().state != client::Session::State::connected ||
         !session_->connection();
}

bool Job::unanswered_while_connected(const Error& error) const {
  if (error.code != make_error_code(errc::timeout) || error.connection_ended) return false;
  const auto now = session_ ? session_->connection() : conn_;
  if (session_ && session_->status().state != client::Session::State::connected) return false;
  return now && now->is_open();
}

bool Job::worth_making_again(const Error& error) const {
  if (!recovers()) return false;
  if (went_away_under_it(error)) return true;
  if (session_ && session_->status().state == client::Session::State::closed) return false;
  // A timeout that is not a publish's (sent unknown: a read-back, a declare) says nothing of
  // whether the message landed.
  return error.code == make_error_code(errc::nacked) ||
         (error.code == make_error_code(errc::timeout) && error.sent != Sent::unknown);
}

void Job::on_signal(int signal) {
  if (stop_signal_ != 0) return stopped_now();  // a second signal while stopping: at once
  if (!started_) return stop_before_start(signal);
  on_stop_signal(signal);
}

// Connecting, or in its handshake, or opening its channel: nothing was taken or sent yet, so
// nothing is waited for.
void Job::stop_before_start(int signal) {
  if (worker()) return finish();
  stop_by_signal(signal);
}

void Job::on_stop_signal(int signal) { stop_by_signal(signal); }

bool Job::begin_stop(int signal) {
  if (stop_signal_ != 0) return false;
  stop_signal_ = signal;
  stop_deadline_ = driver().timer([this] { stopped_now(); });
  stop_deadline_->arm(driver().now() + stop_deadline);
  return true;
}

void Job::close_then_die() {
  if (dying_) return;
  dying_ = true;
  if (!closing_) closing();
  closing_ = true;
  if (password_watch_) password_watch_->cancel();
  std::vector<std::shared_ptr<client::Connection>> all = connections_;
  for (auto& weak : dialing_)
    if (auto c = weak.lock(); c && std::find(all.begin(), all.end(), c) == all.end()) all.push_back(std::move(c));
  // A session with no connection (dialling, or between attempts) has nothing to close: its
  // close() ends the dial, and its callback is only posted, which need not keep libuv's loop
  // running, so the stop would end as the loop runs dry instead of by the signal.
  const bool session_connected = session_ && session_->status().state == client::Session::State::connected;
  if (session_ && !session_connected) session_->close(nullptr);
  if (all.empty() && !session_connected) stopped_now();
  auto left = std::make_shared<std::size_t>(all.size() + (session_connected ? 1 : 0));
  for (auto& c : all)
    c->close([this, left](Result<void>) {
      if (--*left == 0) stopped_now();
    });
  if (session_connected)
    session_->close([this, left](Result<void>) {
      if (--*left == 0) stopped_now();
    });
}

void Job::stopped_now() {
  std::string why = std::string("stopped by ") + (stop_signal_ == SIGINT ? "SIGINT" : "SIGTERM");
  if (const std::string more = unfinished(); !more.empty()) why += ": " + more;
  print_final_line(common_.log_format, {.event = "command.stopped", .level = client::Level::warning, .why = why});
  std::cout.flush();
  std::fflush(nullptr);  // what it printed on a file or a pipe is not lost with the process
  stop_signals::die_by(stop_signal_ ? stop_signal_ : SIGTERM);
}

// Every 5 s: a secret that changed in the file goes to every open connection at once
// (connection.update-secret), ahead of the old one's expiry; a connection dialled later reads
// the file itself.
void Job::watch_password_file() {
  password_watch_ = driver().timer([this] {
    auto secret = password_file_->changed_secret();
    if (!secret) {
      // Said once until it can be read again; the connections keep the secret they have.
      if (!password_unreadable_) record("credentials.refresh_failed", client::Level::warning, secret.error().detail);
      password_unreadable_ = true;
    } else {
      password_unreadable_ = false;
      if (*secret) {
        for (auto& c : connections_)
          if (c->is_open()) c->update_secret(**secret, "--password-file changed", nullptr);
        if (session_) session_->update_secret(**secret, "--password-file changed", nullptr);
      }
    }
    if (!closing_) password_watch_->arm(driver().now() + std::chrono::seconds(5));
  });
  if (!closing_) password_watch_->arm(driver().now() + std::chrono::seconds(5));
}

void Job::connect_another(client::Callback<std::shared_ptr<client::Connection>> done) {
  connect_another(options(), std::move(done));
}

void Job::connect_another(client::ClientOptions options, client::Callback<std::shared_ptr<client::Connection>> done) {
  if (!options.observer) options.observer = records_;
  if (!options.credentials) options.credentials = password_file_;
  if (!options.metrics) options.metrics = metrics_;
  connect_from(0, std::make_shared<const client::ClientOptions>(std::move(options)),
               std::make_shared<decltype(done)>(std::move(done)));
}

void Job::connect_from(std::size_t index, std::shared_ptr<const client::ClientOptions> options,
                       std::shared_ptr<client::Callback<std::shared_ptr<client::Connection>>> done) {
  auto holder = std::make_shared<std::shared_ptr<client::Connection>>();
  *holder = client::Connection::connect(driver(), urls_[index], *options, [this, index, options, done, holder](Result<void> r) {
    const Error* e = r ? nullptr : &r.error();
    auto c = std::move(*holder);
    std::erase_if(dialing_, [](const std::weak_ptr<client::Connection>& w) { return w.expired(); });
    if (e) {
      // Refused credentials are not a host problem: another URL is not tried for them. Nor
      // is one after a stop or a failure.
      if (index + 1 < urls_.size() && e->code != make_error_code(errc::access_refused) && !closing_)
        return connect_from(index + 1, options, done);
      return (*done)(*e);
    }
    url_index_[c.get()] = index;
    track(c);
    (*done)(std::move(c));
  });
  dialing_.push_back(*holder);
  if (closing_) (*holder)->close(nullptr);  // stopped or failed while it was asked for
}

std::string Job::login_user(const client::Connection& c) const {
  std::optional<std::size_t> index;
  if (const auto it = url_index_.find(&c); it != url_index_.end()) index = it->second;
  else if (session_ && session_->connection().get() == &c) index = session_->url_index();
  if (!index || *index >= urls_.size()) return {};
  const client::ConnectionUrl& url = urls_[*index];
  if (url.auth_mechanism == engine::Mechanism::external) return {};
  return url.user;
}

void Job::ensure_queue(const std::string& queue, client::Callback<std::uint32_t> messages) {
  auto done = std::make_shared<decltype(messages)>(std::move(messages));
  conn_->open_channel([this, queue, done](Result<client::Channel> probe) {
    if (!probe) return (*done)(probe.error());
    probe->queue_declare({.name = queue, .passive = true}, [this, queue, done, probe = *probe](Result<client::QueueDeclared> q) {
      if (q) {
        probe.close(nullptr);
        return (*done)(q->message_count);
      }
      if (q.error().reply_code != 404) return (*done)(q.error());
      channel_.queue_declare({.name = queue, .durable = true}, [done](Result<client::QueueDeclared> q) {
        if (!q) return (*done)(q.error());
        (*done)(q->message_count);
      });
    });
  });
}

void Job::track(std::shared_ptr<client::Connection> c) {
  c->on_closed = [this](const Error& cause) {
    if (!closing_) fail("", cause);
  };
  connections_.push_back(std::move(c));
  if (closing_) close_all();
}

void Job::fail(std::string_view what, const Error& error, int code) {
  // When the connection itself ended, every step in flight fails with its cause: that is the
  // connection's failure, reported as such, not the step's.
  if (conn_ && !conn_->is_open()) what = {};
  fail_with(what, describe(error), code, error.reply_code);
}

void Job::fail_text(std::string_view what, std::string_view why, int code) { fail_with(what, why, code, 0); }

void Job::fail_with(std::string_view what, std::string_view why, int code, std::uint16_t reply_code) {
  // Once the work is done, or while a stop closes it, what our own close ends (consumers,
  // the connection, publishes in flight) is no failure.
  if ((finished_ && exit_code_ == 0) || stop_signal_ != 0) return;
  if (exit_code_ == 0) {  // the first failure is the one worth reading
    report(what, why, reply_code);
    failure_text_ = what.empty() ? std::string(why) : std::string(what) + ": " + std::string(why);
    exit_code_ = code;
  }
  close_all();
}

void Job::finish() {
  if (stop_signal_ != 0) return close_then_die();
  finished_ = true;
  close_all();
}

void Job::close_all() {
  if (!closing_) closing();
  closing_ = true;
  if (password_watch_) password_watch_->cancel();  // an armed Asio timer would keep the loop running
  for (auto& c : connections_)
    if (c->is_open()) c->close([](Result<void>) {});
  for (auto& weak : dialing_)
    if (auto c = weak.lock()) c->close([](Result<void>) {});
  if (session_) session_->close(nullptr);
}

}  // namespace warren::cli

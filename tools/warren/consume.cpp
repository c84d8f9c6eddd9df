// warren consume: prints each message (its body, or a JSON object per line) and acks it
// after printing. With --count N exactly N messages are taken from the queue: the prefetch
// is at most N, and the last acks are held back so the broker never sends more than N (the
// rest would only go back to the queue marked redelivered). With --no-ack and --count the
// messages are fetched one at a time (basic.get), because a no-ack consumer cannot be
// limited and what it was sent past N would be lost.
//
// A lost connection (a node killed, or hung past the heartbeat) is not the end once the first
// was made: the job runs over a Session and consumes again on its next connection. What was
// printed and not yet acked (the acks held back for --count) is delivered again and printed
// again: at least once. The basic.get loop of --no-ack --count does not recover.
#include <algorithm>
#include <iostream>

#include "again.hpp"
#include "commands.hpp"
#include "message_json.hpp"
#include "untrusted_text.hpp"

namespace warren::cli {
namespace {

struct ConsumeArgs {
  Common common;
  std::string queue;
  std::uint64_t count = 0;  // 0: until interrupted or --timeout
  std::optional<std::uint16_t> prefetch;
  bool no_ack = false;
  std::optional<double> timeout_s;
  bool json = false;
  bool raw = false;  // the body's bytes even on a terminal
};

class ConsumeJob final : public Job {
 public:
  explicit ConsumeJob(std::shared_ptr<ConsumeArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  Result<void> validate() override {
    if (args_->timeout_s)
      if (auto ok = check_timeout_seconds(*args_->timeout_s); !ok.ok()) return ok;
    if (args_->prefetch && *args_->prefetch == 0)
      return make_error(errc::invalid_argument, "--prefetch must be at least 1");
    return {};
  }

  [[nodiscard]] bool recovers() const override { return !(args_->no_ack && args_->count > 0); }

  void start() override {
    if (args_->timeout_s) {
      deadline_timer_ = driver().timer([this] { timed_out(); });
      deadline_timer_->arm(started_ + from_seconds(*args_->timeout_s));
    }
    if (args_->no_ack && args_->count > 0) return get_next();
    subscribe();
  }

  // On the session's current connection (every job that subscribes recovers): a channel of
  // its own, then the consumer.
  void subscribe() {
    on_connection_ = session()->connection();
    session()->open_channel([this, generation = ++generation_](Result<client::Channel> ch) {
      if (generation != generation_ || done_ || failed() || stopping()) return;
      if (!ch) {
        if (connection_went(ch.error())) return wait_for_connection();
        if (unanswered_while_connected(ch.error())) return subscribe_again(ch.error());
        return fail("channel.open", ch.error());
      }
      session_channel_ = std::move(*ch);
      consume_on(session_channel_);
    });
  }
  void consume_on(const client::Channel& ch) {
    // The prefetch is at most what is left of the count (after a loss: of what is left).
    std::uint64_t prefetch = args_->prefetch.value_or(250);
    if (args_->count > 0) prefetch = std::min<std::uint64_t>(prefetch, args_->count - received_);
    prefetch_ = prefetch;
    ch.consume(
        {.queue = args_->queue, .auto_ack = args_->no_ack, .prefetch = static_cast<std::uint16_t>(prefetch)},
        [this](const client::Delivery& d) { on_message(d); },
        [this](Result<client::Consumer> c) {
          if (done_ || failed()) return;
          if (!c) {
            if (connection_went(c.error())) return wait_for_connection();
            if (unanswered_while_connected(c.error())) return subscribe_again(c.error());
            return fail("consume " + args_->queue, c.error());
          }
          if (again_) again_->landed();
          consumer_ = std::move(*c);
          // Our own cancel comes only once the count is reached; a lost connection is consumed
          // again on the next; any other end (the queue deleted, the channel closed by the
          // broker) is a failure.
          consumer_.on_ended([this](const Error& cause) {
            if (failed() || done_) return;
            if (connection_went(cause)) return wait_for_connection();
            fail("consume " + args_->queue, cause);
          });
        });
  }

  // No answer in time on a connection that lives (a quorum queue whose leader hangs or is
  // being elected): the request's channel is closed; a new one consumes after a pause.
  void subscribe_again(const Error& why) {
    say("consume.subscribing_again", "consume " + args_->queue, why.to_string() + "; subscribing again");
    if (!again_) again_.emplace(driver(), [this] {
        if (done_ || failed() || stopping() || waiting_for_connection_) return;
        // Lost during the pause: the next connection subscribes (reconnected()).
        if (const auto c = session()->connection(); !c || !c->is_open()) return wait_for_connection();
        subscribe();
      });
    again_->arm();
  }
  void closing() override {
    if (again_) again_->cancel();
    Job::closing();
  }

  // The connection went away (not only the channel): the session dials again.
  [[nodiscard]] bool connection_went(const Error& e) const {
    if (!went_away_under_it(e)) return false;
    const auto now = session()->connection();  // null once its engine latched the end
    return e.connection_ended || e.code != make_error_code(errc::channel_closed) || !now || now != on_connection_;
  }
  void wait_for_connection() {
    if (waiting_for_connection_) return;
    waiting_for_connection_ = true;
    held_.reset();  // its channel is gone: the broker delivers it again
    // The end may come after the session is connected again (a consumer's end reaches the
    // job after the session's status does on a heartbeat timeout).
    if (connected_again_since(on_connection_)) driver().post([this] { reconnected(); });
  }
  void reconnected() override {
    if (!waiting_for_connection_ || done_ || failed() || stopping()) return;
    if (!connected_again_since(on_connection_)) return;
    waiting_for_connection_ = false;
    subscribe();
  }

  bool print(const engine::Message& m) {
    if (args_->json) {
      std::cout << json_line(message_json(m)) << '\n';
    } else {
      std::cout << shown_body({reinterpret_cast<const char*>(m.body.data()), m.body.size()}, args_->raw) << '\n';
    }
    std::cout.flush();
    return true;
  }

  void on_message(const client::Delivery& d) {
    if (done_ || failed()) return;
    if (!print(d.raw())) return;
    ++received_;
    const bool last = args_->count > 0 && received_ == args_->count;
    // The cancel goes out before the last ack, so the window that ack opens is never filled.
    if (last && !args_->no_ack) consumer_.cancel(nullptr);
    if (!args_->no_ack) {
      // Acking message i lets the broker send message i + prefetch: hold back the acks that
      // would let it send past the count, and ack them all together at the end.
      if (args_->count == 0 || received_ + prefetch_ <= args_->count || last) {
        if (auto r = d.ack({.multiple = last}); !r.ok()) {
          if (connection_went(r.error())) return wait_for_connection();  // delivered again on the next
          return fail("ack", r.error());
        }
        held_.reset();
      } else {
        held_ = d.take();  // printed, not acked yet: a stop acks it with those before it
      }
    }
    if (args_->count > 0 && received_ == args_->count) {
      done_ = true;
      finish();
    }
  }

  // SIGTERM or SIGINT: nothing more is printed; what was printed and held back unacked is
  // acked (the close that follows makes sure the broker has it), what was sent ahead and not
  // printed goes back with the channel.
  void on_stop_signal(int signal) override {
    if (!begin_stop(signal)) return stopped_now();
    done_ = true;
    if (held_) (void)held_->ack({.multiple = true});
    held_.reset();
    close_then_die();
  }

  void get_next() {
    channel_.get({.queue = args_->queue, .auto_ack = true}, [this](Result<std::optional<client::Message>> m) {
      if (!m) return fail("get " + args_->queue, m.error());
      if (done_ || failed()) return;
      if (!*m) {  // empty: look again shortly (the deadline, if any, ends the wait)
        if (!poll_timer_) poll_timer_ = driver().timer([this] { get_next(); });
        poll_timer_->arm(driver().now() + std::chrono::milliseconds(50));
        return;
      }
      if (!print((*m)->view())) return;
      if (++received_ == args_->count) {
        done_ = true;
        return finish();
      }
      get_next();
    });
  }

  void timed_out() {
    if (done_ || failed()) return;
    if (poll_timer_) poll_timer_->cancel();
    std::string why = "timed out after " + seconds_text(*args_->timeout_s) + " s with " + std::to_string(received_) + " message(s)";
    if (args_->count > 0) why += " of " + std::to_string(args_->count);
    fail_text("consume " + args_->queue, why);
  }

  std::shared_ptr<ConsumeArgs> args_;
  engine::Instant started_ = std::chrono::steady_clock::now();
  std::unique_ptr<client::Timer> deadline_timer_, poll_timer_;
  client::Consumer consumer_;  // held while the subscription runs: dropping it cancels
  // With a session: the connection the subscription runs on, its channel, and whether the job
  // waits for the next connection to consume again.
  std::shared_ptr<client::Connection> on_connection_;
  client::Channel session_channel_;
  std::uint64_t generation_ = 0;
  bool waiting_for_connection_ = false;
  std::optional<client::Message> held_;  // the last message printed whose ack is held back
  std::uint64_t received_ = 0;
  std::uint64_t prefetch_ = 0;
  bool done_ = false;
  std::optional<Again> again_;  // a subscription the broker did not answer in time, made again
};

}  // namespace

void add_consume(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ConsumeArgs>();
  auto* cmd = app.add_subcommand("consume", "print messages from a queue, one per line, acking each after printing");
  add_common_options(*cmd, args->common);
  cmd->add_option("--queue", args->queue, "the queue")->required();
  cmd->add_option("--count", args->count, "exit 0 after this many messages (default: no limit)");
  cmd->add_option("--prefetch", args->prefetch, "unacked messages the broker may send ahead (default 250)");
  cmd->add_flag("--no-ack", args->no_ack, "the broker forgets each message once sent (at most once)");
  cmd->add_option("--timeout", args->timeout_s, "exit 1 when this many seconds pass first (counted from the start)");
  cmd->add_flag("--json", args->json, "one JSON object per message: body, exchange, routing_key, ... headers");
  cmd->add_flag("--raw", args->raw, "write each body's bytes as they are, even on a terminal (where they are escaped)");
  cmd->callback([&run, args] { run = [args] { return ConsumeJob(args).run(); }; });
}

}  // namespace warren::cli

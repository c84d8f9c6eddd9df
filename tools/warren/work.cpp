// warren work put | run: the messaging layer's work queue on the command line. Names on the
// broker are the layer's: the queue NAME is "P.NAME", its retry levels "P.NAME.retry.<ms>",
// its dead-letter queue "P.NAME.dlq". `run` runs /bin/sh -c CMD per message and prints one
// line per outcome: done|retry|release|dead-letter <message-id> attempt=<n>.
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "again.hpp"
#include "commands.hpp"
#include "layer_job.hpp"
#include "shell.hpp"
#include "stdin_lines.hpp"
#include "trace_environment.hpp"
#include "untrusted_text.hpp"
#include "values.hpp"
#include "warren/messaging/work_queue.hpp"

namespace warren::cli {
namespace {

inline constexpr int exit_release = 75;  // EX_TEMPFAIL: not this worker, not now

struct WorkArgs {
  Common common;
  std::string prefix = "warren";
  std::string queue;
  // put
  std::optional<std::string> body;
  std::vector<std::string> headers;
  // run
  std::string exec;
  std::uint32_t attempts = 5;
  std::uint64_t backoff_base_ms = 1000, backoff_max_ms = 60000;
  double backoff_factor = 2.0;
  std::string backoff_jitter = "full";
  std::uint16_t prefetch = 1;
  std::uint64_t count = 0;  // 0: until --timeout or interrupted
  std::optional<double> timeout_s;
};

// What both commands share: the layer over the job's connection, and the work queue.
class WorkJob : public LayerJob {
 public:
  explicit WorkJob(std::shared_ptr<WorkArgs> args) : LayerJob(args->common), args_(std::move(args)) {}

 protected:
  Result<void> validate() override {
    if (auto ok = messaging::check_options({.prefix = args_->prefix}); !ok) return make_error(errc::invalid_argument, "--prefix " + ok.error().detail);
    if (args_->timeout_s)
      if (auto ok = check_timeout_seconds(*args_->timeout_s); !ok.ok()) return ok;
    return {};
  }
  Result<void> make_queue() {
    // A retry level that could not be declared does not stop the worker (its retries fail
    // unconfirmed and the message stays in the work queue) but is said on stderr, never among
    // the result lines.
    auto on_event = [this](const messaging::Event& e) {
      if (e.what == "retry-levels") say("work.retry_levels_failed", "retry levels of " + e.subject, describe(e.cause));
    };
    if (auto ok = make_layer({.prefix = args_->prefix, .on_event = on_event, .observer = records(), .metrics = metrics()}); !ok)
      return ok;
    auto q = messaging::WorkQueue::create(
        layer_, {.name = args_->queue,
                 .attempts = args_->attempts,
                 .backoff = {.base = std::chrono::milliseconds(args_->backoff_base_ms),
                             .max = std::chrono::milliseconds(args_->backoff_max_ms),
                             .factor = args_->backoff_factor,
                             .jitter = args_->backoff_jitter == "none" ? messaging::Jitter::none : messaging::Jitter::full}});
    if (!q) return q.error();
    queue_ = *q;
    return {};
  }

  std::shared_ptr<WorkArgs> args_;
  std::shared_ptr<messaging::WorkQueue> queue_;
};

class PutJob final : public WorkJob {
 public:
  using WorkJob::WorkJob;

 private:
  static constexpr std::uint64_t window = 1000;  // unconfirmed puts in flight at most

  Result<void> validate() override {
    if (auto ok = WorkJob::validate(); !ok) return ok;
    for (const auto& h : args_->headers)
      if (auto r = add_typed_entry(headers_, h, Untyped::string); !r.ok())
        return make_error(errc::invalid_argument, "--header " + r.error().detail);
    trace_ = trace_from_environment(headers_).value_or(client::TraceContext{});  // a traced script's, continued
    return {};
  }

  // Standard input is read once the topology is there, each line put as soon as it is read
  // (as publish does): a producer that writes slowly, or never ends, is put as it goes, and
  // a stop finds little read and not yet confirmed.
  void start() override {
    if (auto ok = make_queue(); !ok) return fail("", ok.error(), exit_usage);
    again_.emplace(driver(), [this] { put_again_now(); });
    queue_->declare([this](Result<void> r) {
      if (!r) return fail("declare " + queue_->queue(), r.error());
      if (stopping()) return;
      if (!args_->body) lines_.emplace(driver(), [this] { put_more(); });
      put_more();
    });
  }

  // The next body: --body once, else the next line; nothing when none is there (yet).
  std::optional<std::string> next_body() {
    if (args_->body) {
      if (sent_ > 0) {
        input_done_ = true;
        return std::nullopt;
      }
      return *args_->body;
    }
    std::string line;
    switch (lines_->take(line)) {
      case StdinLines::Take::line: return line;
      case StdinLines::Take::end: input_done_ = true; return std::nullopt;
      case StdinLines::Take::later: return std::nullopt;
    }
    return std::nullopt;
  }

  // A lost node is not the end of a put either: it goes on through another host, as `work run`
  // does, and a put the loss left without its confirm is made again (at least once).
  [[nodiscard]] bool recovers() const override { return true; }

  void put_more() {
    while (!failed() && !input_done_ && !stopping() && sent_ - settled_ < window) {
      auto body = next_body();
      if (!body) break;
      const std::uint64_t number = ++sent_;
      // Its id is drawn once: a put made again after a loss is the same message to a consumer
      // that deduplicates.
      unconfirmed_[number] = {std::move(*body), layer_->make_uuid()};
      put(number);
    }
    if (input_done_ && settled_ == sent_ && !failed() && !stopping()) finish();
  }
  void put(std::uint64_t number) {
    const auto& [body, id] = unconfirmed_[number];
    queue_->put({.body = body, .headers = headers_, .message_id = id, .trace = trace_},
                [this, number](Result<void> r) { put_done(number, r); });
  }

  void put_done(std::uint64_t number, const Result<void>& r) {
    if (!r && !stopping() && !failed() && worth_making_again(r.error())) return put_again(number, r.error());
    unconfirmed_.erase(number);
    ++settled_;
    if (r) {
      ++ok_;
      again_->landed();
    }
    if (stopping()) {
      if (settled_ == sent_) close_then_die();
      return;
    }
    if (!r) return fail("message " + std::to_string(number), r.error());
    put_more();
  }

  // SIGTERM or SIGINT: nothing more is read or put; what was put has the stop's deadline to
  // be confirmed, then the stop line says what was not.
  void on_stop_signal(int signal) override {
    if (!begin_stop(signal)) return stopped_now();
    if (settled_ + to_put_again_.size() == sent_) close_then_die();
  }

  [[nodiscard]] std::string unfinished() const override {
    if (args_->body) return "1 message(s), " + std::to_string(1 - ok_) + " not confirmed";
    const std::uint64_t read = lines_ ? lines_->lines_read() : 0;  // none before it connected
    return std::to_string(read) + " line(s) read, " + std::to_string(read - ok_) + " not confirmed";
  }

  // A put that did not land (Job::worth_making_again) is made again after a pause (while the
  // session dials, a put fails at once). After a nack the broker has nothing; after a lost
  // connection or a timeout it may have it, and the queue may then hold it twice. Each kind
  // of cause is said once.
  void put_again(std::uint64_t number, const Error& cause) {
    if (said_.insert(cause.code.value()).second) {
      const bool maybe_twice = cause.code != make_error_code(errc::nacked) && cause.sent != Sent::no;
      say("work.put_again", "work put " + queue_->queue() + ": message " + std::to_string(number),
          cause.detail + "; putting it again" + (maybe_twice ? " (the queue may then hold it twice)" : ""));
    }
    to_put_again_.push_back(number);
    again_->arm();
  }
  void put_again_now() {
    auto numbers = std::move(to_put_again_);
    to_put_again_.clear();
    if (stopping()) {  // not put again: the stop line counts them as not confirmed
      settled_ += numbers.size();
      if (settled_ == sent_) close_then_die();
      return;
    }
    for (auto n : numbers) put(n);
  }

  wire::FieldTable headers_;
  client::TraceContext trace_;
  std::optional<StdinLines> lines_;
  std::uint64_t sent_ = 0, settled_ = 0, ok_ = 0;
  bool input_done_ = false;
  std::map<std::uint64_t, std::pair<std::string, std::string>> unconfirmed_;  // body and message_id, until its outcome
  std::vector<std::uint64_t> to_put_again_;  // when again_ fires
  std::optional<Again> again_;  // from start(): the loop is made as the job runs
  void closing() override {
    if (again_) again_->cancel();
    WorkJob::closing();
  }
  std::set<int> said_;  // the causes of a put made again said on stderr (error codes)
};

class RunJob final : public WorkJob {
 public:
  using WorkJob::WorkJob;
  ~RunJob() override {  // commands still running when the run ended: stop them, then wait
    shell::kill_running();
    std::unique_lock lock(children_mutex_);
    children_done_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  Result<void> validate() override {
    if (auto ok = WorkJob::validate(); !ok) return ok;
    if (args_->exec.empty()) return make_error(errc::invalid_argument, "--exec must name a command");
    if (args_->attempts == 0) return make_error(errc::invalid_argument, "--attempts must be at least 1");
    if (args_->prefetch == 0) return make_error(errc::invalid_argument, "--prefetch must be at least 1");
    if (args_->backoff_base_ms == 0 || args_->backoff_max_ms < args_->backoff_base_ms)
      return make_error(errc::invalid_argument, "--backoff-base-ms must be positive and --backoff-max-ms at least it");
    if (!messaging::factor_in_range(args_->backoff_factor))
      return make_error(errc::invalid_argument, "--backoff-factor must be above 1 and at most 1000");
    if (static_cast<std::uint64_t>(args_->backoff_max_ms) > static_cast<std::uint64_t>(messaging::max_delay.count()))
      return make_error(errc::invalid_argument, "--backoff-max-ms must be at most " +
                                                    std::to_string(messaging::max_delay.count()) +
                                                    " (a delay level is a queue's x-message-ttl)");
    return {};
  }

  [[nodiscard]] bool worker() const override { return true; }
  // A node lost (killed, or hung past the heartbeat) is not the end of a worker: it goes on
  // through another host, and what it held unsettled is delivered again (docs/warren-cli.md).
  [[nodiscard]] bool recovers() const override { return true; }

  void start() override {
    if (auto ok = make_queue(); !ok) return fail("", ok.error(), exit_usage);
    if (args_->timeout_s) {
      deadline_ = driver().timer([this] { timed_out(); });
      deadline_->arm(started_ + from_seconds(*args_->timeout_s));
    }
    subscribe();
  }

  void subscribe() {
    queue_->consume({.prefetch = args_->prefetch}, [this](messaging::WorkItem item) { handle(std::move(item)); },
                    [this](Result<std::shared_ptr<messaging::Subscription>> s) {
                      if (done_ || failed()) return;
                      // The connection went away while the first subscription was set up (the
                      // same again on the session's next one, as after a later loss), or the
                      // broker did not answer in time (again on this one, after a pause).
                      const bool unanswered = !s && unanswered_while_connected(s.error());
                      if (!s && !stopping_ && (unanswered || went_away_under_it(s.error()))) {
                        if (unanswered)
                          say("work.subscribing_again", "work run " + queue_->queue(), s.error().to_string() + "; subscribing again");
                        if (!subscribe_again_) subscribe_again_.emplace(driver(), [this] { subscribe(); });
                        return subscribe_again_->arm();
                      }
                      if (!s) return fail("work run " + queue_->queue(), s.error());
                      if (subscribe_again_) subscribe_again_->landed();
                      worker_ = *s;
                      // Stopped while the consume was on its way (its first deliveries can come
                      // before this answer): it stops consuming now.
                      if (stopping_) worker_->stop_consuming(nullptr);
                    });
  }

  // SIGTERM or SIGINT: nothing new is started, and each running command's process group gets
  // SIGTERM (SIGKILL after the grace, or at once on a second signal). The subscription and its
  // channel stay open meanwhile: closing them would hand the running commands' messages to
  // another worker while they still run. Each running message is settled by its command's end
  // (exit 0: done, as ever; anything else: left unsettled, no attempt counted, since the stop
  // may be why it failed), and once none runs the run ends with exit 0 and the broker takes
  // back whatever is unsettled, a message delivered after the stop included.
  void on_stop_signal(int) override {
    if (stopping_) return shell::kill_running();
    if (done_ || failed()) return;
    stopping_ = true;
    if (deadline_) deadline_->cancel();
    // No more deliveries (basic.cancel), the channel kept for the running commands' settles:
    // a message put meanwhile goes to another worker, not to this one on its way out.
    if (worker_) worker_->stop_consuming(nullptr);
    shell::terminate_running();
    if (in_flight_ == 0) return finish();
    grace_ = driver().timer([] { shell::kill_running(); });
    grace_->arm(driver().now() + stop_grace);
  }

  void handle(messaging::WorkItem item) {
    if (stopping_) return (void)item.release();  // delivered before our cancel: back at once, no attempt counted
    if (done_ || failed()) return;  // past the count: left unsettled, requeued when we close
    ++in_flight_;
    auto shared = std::make_shared<messaging::WorkItem>(std::move(item));
    std::vector<std::pair<std::string, std::string>> env{{"WARREN_ATTEMPT", std::to_string(shared->attempt())}};
    // The publisher's message_id goes to a shell: only when it is text without a control
    // character (at most a short string's 255 bytes, as the protocol has it).
    const auto id = shared->message_id();
    if (environment_safe(id, 255)) env.emplace_back("WARREN_MESSAGE_ID", std::string(id));
    else record("work.message_id_dropped", client::Level::warning, shown_id(id));
    // The command's work is a span under the context the item carried (the carrier convention
    // for processes: TRACEPARENT and TRACESTATE in its environment).
    if (const auto trace = shared->message().trace()) {
      auto child = trace_environment(trace->child());
      for (auto& variable : child.environment) env.push_back(std::move(variable));
      if (child.tracestate_dropped) record("work.tracestate_dropped", client::Level::warning, shown_id(id));
    }
    std::string body(shared->body());
    auto& d = driver();
    {
      std::lock_guard lock(children_mutex_);
      ++running_;
    }
    std::thread([this, &d, shared, env = std::move(env), body = std::move(body)] {
      // Its output goes to warren's stderr, never among the result lines; its last error line is kept.
      auto result = std::make_shared<shell::Outcome>(
          shell::run({.command = args_->exec, .input = body, .environment = env, .capture_output = false, .echo_errors = true}));
      d.post([this, shared, result] { finished(shared, *result); });
      std::lock_guard lock(children_mutex_);
      --running_;
      children_done_.notify_all();
    }).detach();
  }

  // A message_id as one field of a result line: "-" when there is none, quoted and escaped
  // when it could break the line (untrusted_text.hpp; a literal "-" is quoted too).
  static std::string shown_id(std::string_view id) {
    if (id.empty()) return "-";
    return id == "-" ? std::string("\"-\"") : line_field(id);
  }

  void print(std::string_view outcome, const messaging::WorkItem& item) {
    std::cout << outcome << ' ' << shown_id(item.message_id()) << " attempt=" << item.attempt() << '\n';
    std::cout.flush();
  }

  void counted() {
    if (args_->count > 0 && ++settled_ == args_->count && !done_) {
      done_ = true;
      if (deadline_) deadline_->cancel();
      finish();
    }
  }

  void finished(const std::shared_ptr<messaging::WorkItem>& item, const shell::Outcome& r) {
    --in_flight_;
    if (stopping_) {  // only a success settles; anything else goes back as it came
      if (r.failure.empty() && r.exit_status == 0 && !done_ && !failed()) {
        if (auto ok = item->done(); !ok) unsettled("ack", *item, ok.error());
        else print("done", *item);
      }
      if (in_flight_ == 0) {
        if (grace_) grace_->cancel();
        finish();
      }
      return;
    }
    if (done_ || failed()) return;
    if (!r.failure.empty()) return fail_text("exec", r.failure);
    if (r.exit_status == 0) {
      if (auto ok = item->done(); !ok) return unsettled("ack", *item, ok.error());
      print("done", *item);
      return counted();
    }
    if (r.exit_status == exit_release) {
      if (auto ok = item->release(); !ok) return unsettled("release", *item, ok.error());
      return print("release", *item);
    }
    // The line and attempt are printed from what the item was, before retry() moves it on.
    const auto attempt = item->attempt();
    const std::string id = shown_id(item->message_id());
    client::FieldTable extra{{"x-warren-exit-status", static_cast<std::int64_t>(r.exit_status)}};
    item->retry({.error = r.last_error_line, .headers = extra},
                [this, item, attempt, id](Result<messaging::Retried> how) {
                  if (done_ || failed()) return;
                  if (!how) return unsettled_id("retry", id, how.error());
                  std::cout << (how->dead_lettered ? "dead-letter " : "retry ") << id << " attempt=" << attempt << '\n';
                  std::cout.flush();
                  if (how->dead_lettered) counted();
                });
  }

  // A settle that failed because its channel or the connection went away under it (the
  // consumer's channel after a 404 or 406, the layer's control channel mid-republish, a node
  // lost) is not the run's end: the broker redelivers what was not settled, and the layer
  // subscribes again once the session is back. One line on stderr, no outcome line; anything
  // else ends the run.
  void unsettled(std::string_view what, const messaging::WorkItem& item, const Error& e) {
    unsettled_id(what, shown_id(item.message_id()), e);
  }
  void unsettled_id(std::string_view what, const std::string& id, const Error& e) {
    // A retry's republish the broker did not take (its channel gone, a nack, no confirm in
    // time, a delay level gone): the layer hands the message back to the queue after the
    // retry's delay, and the next retry declares the levels again (docs/messaging.md).
    const bool went = went_away_under_it(e);
    if (what == "retry" && (went || worth_making_again(e) || e.code == make_error_code(errc::unroutable)))
      return say("work.unsettled", std::string(what) + ' ' + id, describe(e) + " (it goes back to the queue)");
    if (went) return say("work.unsettled", std::string(what) + ' ' + id, e.detail + " (the broker redelivers it)");
    fail(std::string(what) + " " + id, e);
  }

  void timed_out() {
    if (done_ || failed()) return;
    std::string why = "timed out after " + seconds_text(*args_->timeout_s) + " s with " + std::to_string(settled_) + " message(s)";
    if (args_->count > 0) why += " of " + std::to_string(args_->count);
    fail_text("work run " + queue_->queue(), why);
  }

  void closing() override {
    if (subscribe_again_) subscribe_again_->cancel();
    if (queue_) queue_->hand_back_held();  // a retry held back for its delay goes back now
    WorkJob::closing();
  }

  static constexpr auto stop_grace = std::chrono::seconds(10);
  std::optional<Again> subscribe_again_;  // the first subscription, after a loss ended its setup
  engine::Instant started_ = std::chrono::steady_clock::now();
  std::unique_ptr<client::Timer> deadline_;
  std::unique_ptr<client::Timer> grace_;  // after a stop signal: then SIGKILL
  int in_flight_ = 0;  // commands started and not yet finished (loop thread)
  bool stopping_ = false;
  std::shared_ptr<messaging::Subscription> worker_;
  std::mutex children_mutex_;
  std::condition_variable children_done_;
  int running_ = 0;  // commands on their threads
  std::uint64_t settled_ = 0;  // done or dead-lettered
  bool done_ = false;
};

void add_names(CLI::App& cmd, WorkArgs& args) {
  cmd.add_option("--queue", args.queue, "the work queue NAME (the queue P.NAME)")->required();
  cmd.add_option("--prefix", args.prefix, "the namespace P of every name on the broker (default warren)");
}

}  // namespace

void add_work(CLI::App& app, Runner& run) {
  auto* work = app.add_subcommand("work", "a work queue with retries, backoff and a dead-letter queue");
  work->require_subcommand(1);

  auto put = std::make_shared<WorkArgs>();
  auto* p = work->add_subcommand("put", "put each line of standard input (or --body) on the work queue, confirmed");
  add_common_options(*p, put->common);
  add_names(*p, *put);
  p->add_option("--body", put->body, "one message with this text");
  p->add_option("--header", put->headers, "K=V (long string), K:int=V, K:bool=true|false, K:float=V")->type_name("K=V");
  p->callback([&run, put] { run = [put] { return PutJob(put).run(); }; });

  auto args = std::make_shared<WorkArgs>();
  auto* r = work->add_subcommand("run", "run a command per message: exit 0 done, 75 release, other retry");
  add_common_options(*r, args->common);
  add_names(*r, *args);
  r->add_option("--exec", args->exec, "run with /bin/sh -c, the body on standard input")->required();
  r->add_option("--attempts", args->attempts, "tries per message before the dead-letter queue (default 5)");
  r->add_option("--backoff-base-ms", args->backoff_base_ms, "the first retry's longest delay (default 1000)");
  r->add_option("--backoff-max-ms", args->backoff_max_ms, "no retry waits longer (default 60000)");
  r->add_option("--backoff-factor", args->backoff_factor, "the longest delay grows by this per failure (default 2)");
  r->add_option("--backoff-jitter", args->backoff_jitter, "full: a delay drawn below the longest; none: the longest (default full)")
      ->check(CLI::IsMember({"full", "none"}));
  r->add_option("--prefetch", args->prefetch, "messages run at once (default 1)");
  r->add_option("--count", args->count, "exit 0 once this many messages were done or dead-lettered");
  r->add_option("--timeout", args->timeout_s, "exit 1 when this many seconds pass first");
  r->callback([&run, args] { run = [args] { return RunJob(args).run(); }; });
}

}  // namespace warren::cli

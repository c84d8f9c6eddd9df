// warren pipe: a pipeline from a queue to an exchange through a shell command. Each message's
// body goes to `/bin/sh -c CMD` on standard input; its standard output is published
// (confirmed, mandatory) with the source's headers and properties. A failure (non-zero exit,
// failed publish) is handled by --on-error. Built on patterns/pipeline's QueuePipeline.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "again.hpp"
#include "commands.hpp"
#include "message_json.hpp"
#include "shell_command.hpp"
#include "span_file.hpp"
#include "trace_environment.hpp"
#include "warren/pipeline/queue_pipeline.hpp"
#include "warren/pipeline/status_board.hpp"
#include "warren/pipeline/topology.hpp"

namespace warren::cli {
namespace {

// Set by SIGTERM or SIGINT once the job started (Job::on_stop_signal; before that the Job
// ends the run itself): a stop while declaring or verifying ends the run as the contract says
// (exit 0, nothing taken), not with the signal.
std::atomic<bool> stop_asked{false};

struct PipeArgs {
  Common common;
  std::string from, to, exec;
  std::optional<std::string> routing_key;
  std::size_t concurrency = 1;
  std::string on_error = "dead-letter";
  std::optional<std::string> dead_letter_exchange;
  std::string dead_letter_routing_key;
  bool native_dlx = false;
  bool dlx_by_policy = false;  // with native_dlx: a policy sets the queue's DLX (AMQP cannot see it)
  bool declare = false, verify = false;
  std::uint64_t count = 0;
  std::string status_file;
  std::optional<double> timeout_s;
};

constexpr auto drain_deadline = std::chrono::seconds(30);
constexpr const char* pipeline_name = "warren pipe";

// The stage: the command runs in the record's span (the pipeline made the record's traceparent
// a child of its input's), handed to it as TRACEPARENT; a span it hands back through its span
// file (span_file.hpp) becomes the output's parent. A record without a valid traceparent runs
// without either.
std::string run_stage(const std::string& command, pipeline::Record& r) {
  const auto stage = client::TraceContext::from(r.headers);
  if (!stage) return run_shell(command, r.body);
  const SpanFile file;
  // An invalid tracestate is left out (trace_environment.hpp); the stage runs in the span still.
  auto environment = trace_environment(*stage).environment;
  environment.emplace_back("WARREN_TRACEPARENT_FILE", file.path());
  std::string output = run_shell(command, r.body, std::move(environment));
  std::string tracestate;
  if (const auto mine = file.handed_back(*stage, tracestate)) {
    r.headers.set("traceparent", mine->traceparent());
    if (!tracestate.empty()) r.headers.set("tracestate", tracestate);
  }
  return output;
}

class PipeJob final : public Job {
 public:
  explicit PipeJob(std::shared_ptr<PipeArgs> args)
      : Job(args->common), args_(std::move(args)), workers_(args_->concurrency ? args_->concurrency : 1) {
    last_.pipeline = pipeline_name;
    last_.queue = args_->from;
  }
  ~PipeJob() override { kill_running_commands(); }

  // The last status, saying `stopped`, once the run is over, with the failure if it failed;
  // also when it ended before the pipeline started (connect, --declare, --verify, a signal).
  void write_final_status() {
    if (pipeline_) last_ = status_now();
    last_.state = pipeline::State::stopped;
    write_status();
  }

 private:
  void on_stop_signal(int) override { stop_asked.store(true); }
  [[nodiscard]] bool worker() const override { return true; }
  // A lost node is not the end of a pipe: its pipeline is started again on the session's next
  // connection, through another host, and what was in flight at the loss (its outcome dropped)
  // is delivered again (docs/warren-cli.md).
  [[nodiscard]] bool recovers() const override { return true; }

  Result<void> validate() override {
    if (args_->timeout_s)
      if (auto ok = check_timeout_seconds(*args_->timeout_s); !ok.ok()) return ok;
    if (args_->concurrency == 0 || args_->concurrency > 65535)
      return make_error(errc::invalid_argument, "--concurrency must be between 1 and 65535");
    if (args_->declare && args_->verify) return make_error(errc::invalid_argument, "--declare and --verify exclude each other");
    if (args_->dlx_by_policy && !args_->native_dlx)
      return make_error(errc::invalid_argument, "--dlx-by-policy goes with --native-dlx");
    if (args_->declare && args_->native_dlx && !args_->dead_letter_exchange && !args_->dlx_by_policy)
      return make_error(errc::invalid_argument,
                        "--declare with --native-dlx needs --dead-letter-exchange (the queue's x-dead-letter-exchange)");
    if (args_->on_error == "dead-letter" && !args_->native_dlx && !args_->dead_letter_exchange)
      return make_error(errc::invalid_argument,
                        "--on-error dead-letter needs --dead-letter-exchange or --native-dlx (the queue's own x-dead-letter-exchange)");
    return {};
  }

  void start() override {
    conn_ = session()->connection();  // the pipeline opens its own channels on it
    start_again_.emplace(driver(), [this] { start_again_now(); });
    // Ticking from here on: a stop asked for before the pipeline runs ends the run at once.
    tick_ = driver().timer([this] { tick(); });
    tick_->arm(driver().now() + std::chrono::milliseconds(100));
    if (args_->timeout_s) {
      deadline_ = driver().timer([this] { timed_out(); });
      deadline_->arm(started_ + from_seconds(*args_->timeout_s));
    }
    if (stop_asked.load()) return stop_before_start();
    // What the command line names: the source queue, the destination and dead-letter exchanges
    // (the default exchange always exists). Their settings beyond the name are not known, so
    // --verify checks existence and --declare uses the defaults (durable queue, durable direct
    // exchange); an existing object declared otherwise is a 406, named. With --native-dlx and
    // --dead-letter-exchange, --declare gives the queue that x-dead-letter-exchange (and
    // --dead-letter-routing-key as its x-dead-letter-routing-key).
    pipeline::Topology t;
    pipeline::QueueSpec queue{.name = args_->from};
    if (args_->declare && args_->native_dlx) {
      queue.arguments.set("x-dead-letter-exchange", *args_->dead_letter_exchange);
      if (!args_->dead_letter_routing_key.empty())
        queue.arguments.set("x-dead-letter-routing-key", args_->dead_letter_routing_key);
    }
    t.queues.push_back(std::move(queue));
    if (args_->declare || args_->verify) {
      if (!args_->to.empty()) t.exchanges.push_back({.name = args_->to});
      if (args_->dead_letter_exchange && !args_->dead_letter_exchange->empty() && *args_->dead_letter_exchange != args_->to)
        t.exchanges.push_back({.name = *args_->dead_letter_exchange});
    }
    auto then = [this](Result<void> r) {
      if (stopping_before_start_) return;
      if (!r) return fail("pipe " + args_->from, r.error());
      if (args_->native_dlx) return check_native_dlx();
      start_pipeline();
    };
    if (args_->declare) pipeline::declare_topology(conn_, t, then);
    // --native-dlx alone: the queue must exist before its arguments are probed (the probe, a
    // redeclare, would create it).
    else if (args_->verify || args_->native_dlx) pipeline::verify_topology(conn_, t, {.compare_settings = false}, then);
    else start_pipeline();
  }

  // --native-dlx rejects failures to the queue's own x-dead-letter-exchange: without one they
  // would be dropped, so its absence (or another exchange than --dead-letter-exchange names)
  // ends the run before anything is taken.
  void check_native_dlx() {
    const std::string expected = args_->dead_letter_exchange.value_or("");
    pipeline::find_dead_letter_exchange(conn_, args_->from, expected, [this, expected](Result<std::optional<std::string>> dlx) {
      if (stopping_before_start_) return;
      const std::string what = "pipe " + args_->from + ": --native-dlx";
      if (!dlx) return fail(what, dlx.error());
      // A policy's dead-letter-exchange is no argument and cannot be seen over AMQP: the
      // operator says it is there. An argument, when there is one, still wins (as it does
      // in RabbitMQ) and is checked.
      if (!*dlx && args_->dlx_by_policy) return start_pipeline();
      if (!*dlx)
        return fail_text(what, "queue '" + args_->from +
                                   "' has no x-dead-letter-exchange argument, so failed records would be dropped "
                                   "(a policy's dead-letter-exchange cannot be seen over AMQP: "
                                   "--dlx-by-policy says one sets it)");
      if (args_->dead_letter_exchange && **dlx != expected)
        return fail_text(what, "queue '" + args_->from + "' dead-letters to exchange '" + **dlx + "', not '" + expected + "'");
      start_pipeline();
    });
  }

  void start_pipeline() {
    pipeline::QueuePipelineOptions o;
    o.core.name = pipeline_name;
    o.core.concurrency = args_->concurrency;
    const std::string policy = args_->on_error;
    o.core.on_error = [policy](const pipeline::Record&, const pipeline::RecordError&) {
      if (policy == "skip") return pipeline::Outcome::skipped;
      if (policy == "stop") return pipeline::Outcome::stop;
      if (policy == "requeue") return pipeline::Outcome::requeued;
      return pipeline::Outcome::dead_lettered;
    };
    o.source.queue = args_->from;
    // After a loss, what is left of --count (the outcomes before it count; those dropped at
    // the loss are delivered again).
    const std::uint64_t left = args_->count ? args_->count - std::min(outcomes_, args_->count) : 0;
    o.source.limit = left;
    auto prefetch = std::min<std::uint64_t>(args_->concurrency, args_->count ? std::max<std::uint64_t>(left, 1) : 65535);
    o.source.prefetch = static_cast<std::uint16_t>(prefetch);
    pipeline::DestinationOptions d{.exchange = args_->to};
    if (args_->routing_key) d.routing_key = *args_->routing_key;
    else d.route = [](const pipeline::Record& r) { return r.metadata.routing_key; };
    o.destination = std::move(d);
    if (args_->dead_letter_exchange && !args_->native_dlx)  // native: the queue's own DLX takes failures
      o.dead_letter = pipeline::DeadLetterOptions{.exchange = *args_->dead_letter_exchange,
                                                  .routing_key = args_->dead_letter_routing_key};
    o.native_dead_letter = args_->native_dlx;
    o.login_user = login_user(*conn_);  // a user_id that is ours travels on
    // --on-error requeue: a record that always fails comes back once a second, not in a hot loop.
    o.requeue_delay = std::chrono::seconds(1);
    o.metrics = metrics();

    auto& drv = driver();
    const std::string command = args_->exec;
    std::vector<pipeline::Stage> stages{
        pipeline::Stage::offload(workers_, [&drv](std::function<void()> fn) { drv.post(std::move(fn)); },
                                 [command](pipeline::Record& r) {
                                   r.body = run_stage(command, r);
                                   return pipeline::Verdict::next;
                                 })};
    const std::uint64_t generation = ++generation_;
    std::weak_ptr<client::Connection> on = conn_;
    o.on_outcome = [this, generation](const pipeline::Record&, const pipeline::Finished&) {
      if (generation != generation_) return;  // a lost connection's pipeline: dropped, delivered again
      if (args_->count && ++outcomes_ == args_->count) drain();
    };
    o.on_stopped = [this, generation, on](const std::optional<std::string>& failure) {
      if (generation != generation_) return;
      if (failure && lost(on)) return take_up_again(*failure);
      stop_timers();
      if (board_) board_->stop();  // the others see this worker stopped
      last_ = status_now();
      write_status();
      if (failure) return fail_text("pipe " + args_->from, *failure);
      finish();
    };
    pipeline_ = pipeline::QueuePipeline::start(conn_, std::move(o), std::move(stages), [this, on, generation](Result<void> r) {
      if (generation != generation_) return;  // one given up already
      // Lost again while a pipeline started after a loss (or after a start that timed out)
      // opened; the first one's loss ends the run, as a first connection's does.
      if (!r && generation > 1 && lost(on)) return take_up_again(r.error().to_string());
      if (!r && stop_asked.load() && !failed()) return stop_before_start();  // nothing was taken
      // No answer in time on a connection that still lives (a quorum queue whose leader hangs
      // or is being elected): not the end of a service; made again after a pause.
      if (!r && unanswered_while_connected(r.error()) && on.lock() == session()->connection() && !failed() && !draining_)
        return start_again(r.error().to_string());
      if (!r) return fail("pipe " + args_->from, r.error());
      start_again_->landed();
      write_status();
      if (args_->status_file.empty()) return;
      // Workers of this pipeline (this name on this queue) see each other through the broker.
      board_ = pipeline::StatusBoard::start(conn_, {.worker = worker_name()}, [this] { return status_now(); },
                                            [this, on](Result<void> b) {
                                              if (!b && !lost(on)) fail("pipe " + args_->from + ": status board", b.error());
                                            });
    });
  }

  // The connection a pipeline ran on is gone while the session goes on: a node lost, not the
  // end of the run (a stop, a drain, a closed session are).
  bool lost(const std::weak_ptr<client::Connection>& on) const {
    const auto c = on.lock();
    return !(c && c->is_open()) && !failed() && !draining_ && !stop_asked.load() &&
           session()->status().state != client::Session::State::closed;
  }

  // The pipeline (and its status board) is retired, its counts carried, and a new one starts
  // on the session's next connection. Its stage commands still running end on their own: their
  // outcomes are dropped (the broker delivers those messages again), so the old pipeline is
  // kept until the run ends.
  void take_up_again(const std::string& why) {
    if (board_) {
      board_->stop();  // its timer ends; its last report goes nowhere
      retired_boards_.push_back(std::move(board_));
    }
    if (pipeline_) {
      carry(pipeline_->status());
      retired_.push_back(std::move(pipeline_));
    }
    say("pipe.taking_again", "pipe " + args_->from,
        why + "; taking records again once connected (those in flight are delivered again)");
    waiting_for_connection_ = true;
    if (connected_again_since(conn_))  // already connected again
      driver().post([this] { reconnected(); });
  }
  // A start that timed out: the pipeline is given up (nothing was taken: it never consumed)
  // and started again on the same connection after a pause that doubles (again.hpp), or on
  // the next one if this one is lost meanwhile.
  void start_again(const std::string& why) {
    // It took nothing and runs nothing: dropped, after this turn (this is its own callback).
    if (pipeline_) driver().post([gone = std::move(pipeline_)] {});
    say("pipe.starting_again", "pipe " + args_->from, why + "; starting the pipeline again on the same connection");
    start_again_->arm();
  }
  void start_again_now() {
    if (failed() || draining_ || stop_asked.load() || pipeline_ || waiting_for_connection_) return;
    if (conn_ && conn_->is_open()) return start_pipeline();
    if (lost(conn_)) return take_up_again("the connection was lost before the pipeline could start again");
    fail_text("pipe " + args_->from, "the connection closed before the pipeline could start again");
  }
  void closing() override {
    if (start_again_) start_again_->cancel();
    Job::closing();
  }

  void reconnected() override {
    if (!waiting_for_connection_ || failed() || stop_asked.load()) return;
    const auto now = connected_again_since(conn_);
    if (!now) return;
    waiting_for_connection_ = false;
    conn_ = now;
    start_pipeline();
  }

  static void add_counts(pipeline::Status& to, const pipeline::Status& from) {
    to.completed += from.completed;
    to.skipped += from.skipped;
    to.dead_lettered += from.dead_lettered;
    to.failed += from.failed;
    to.dropped += from.dropped;
    to.slow += from.slow;
  }
  void carry(const pipeline::Status& s) { add_counts(carried_, s); }
  // The running pipeline's status with the counts of those a loss retired added; between
  // connections nothing is in flight and the counts are all carried.
  [[nodiscard]] pipeline::Status status_now() const {
    pipeline::Status s = pipeline_ ? pipeline_->status()
                                   : pipeline::Status{.pipeline = last_.pipeline, .queue = last_.queue, .state = last_.state};
    add_counts(s, carried_);
    return s;
  }

  // Asked to stop before the pipeline took anything: nothing to drain, the run is done.
  void stop_before_start() {
    stopping_before_start_ = true;
    stop_timers();
    finish();
  }

  void drain() {
    if (draining_) return;
    draining_ = true;
    pipeline_->drain(drain_deadline, nullptr);  // on_stopped ends the run
  }

  // Asio's timers keep its loop running: a run that is over must not leave one armed.
  static std::string worker_name() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + std::to_string(::getpid());
  }

  void stop_timers() {
    if (board_) board_->stop();
    if (tick_) tick_->cancel();
    if (deadline_) deadline_->cancel();
  }

  void tick() {
    if (session()->status().state == client::Session::State::closed) return stop_timers();  // the run is over
    if (stop_asked.load()) {
      if (!pipeline_) return stop_before_start();
      drain();
    }
    if (pipeline_ && driver().now() >= next_status_) {
      last_ = status_now();
      write_status();
      next_status_ = driver().now() + std::chrono::seconds(1);
    }
    tick_->arm(driver().now() + std::chrono::milliseconds(100));
  }

  void timed_out() {
    if (failed()) return;
    stop_timers();
    kill_running_commands();
    std::string why = "timed out after " + seconds_text(*args_->timeout_s) + " s with " + std::to_string(outcomes_) + " record(s)";
    if (args_->count) why += " of " + std::to_string(args_->count);
    fail_text("pipe " + args_->from, why);
  }

  void write_status() {
    if (args_->status_file.empty()) return;
    if (pipeline_ && last_.state != pipeline::State::stopped) last_ = status_now();
    Json workers = Json::array();
    if (board_)
      for (const auto& w : board_->workers()) {
        const bool me = w.worker == worker_name();
        workers.push_back({{"worker", w.worker},
                           {"state", pipeline::to_string(me ? last_.state : w.status.state)},
                           {"lease", w.status.queue},
                           {"in_flight", me ? last_.in_flight : w.status.in_flight},
                           {"completed", me ? last_.completed : w.status.completed},
                           {"dead_lettered", me ? last_.dead_lettered : w.status.dead_lettered},
                           {"failed", me ? last_.failed : w.status.failed}});
      }
    const std::string& failure = failure_text();
    Json j{{"pipeline", last_.pipeline},
           {"worker", worker_name()},
           {"state", pipeline::to_string(last_.state)},
           {"lease", {{"queue", args_->from}, {"observational", true}}},
           {"in_flight", last_.in_flight},
           {"completed", last_.completed},
           {"skipped", last_.skipped},
           {"dead_lettered", last_.dead_lettered},
           {"failed", last_.failed},
           {"dropped", last_.dropped},
           {"slow", last_.slow},
           {"workers", std::move(workers)},
           {"error", failure.empty() ? Json(nullptr) : Json(failure)},
           {"updated_at", std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count()}};
    // Replaced atomically: a reader sees the old file or the new one, never half of one. The
    // new one is made beside it under a name nobody can guess or plant a link at (mkstemp
    // opens O_EXCL), written, synced, then renamed over; a failure is said once, not ignored.
    const std::string text = j.dump() + '\n';
    std::string tmp = args_->status_file + ".XXXXXX";
    const char* failed_step = nullptr;
    int error = 0;
    auto failed = [&](const char* step) {
      if (failed_step) return;
      failed_step = step;
      error = errno;
    };
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) {
      failed("create");
    } else {
      (void)::fchmod(fd, 0644);
      for (std::size_t written = 0; written < text.size() && !failed_step;) {
        const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno != EINTR) failed("write");
        else if (n > 0) written += static_cast<std::size_t>(n);
      }
      if (!failed_step && ::fsync(fd) != 0) failed("sync");
      if (::close(fd) != 0) failed("write");
      if (!failed_step && std::rename(tmp.c_str(), args_->status_file.c_str()) != 0) failed("rename");
      if (failed_step) ::unlink(tmp.c_str());
    }
    if (!failed_step) {
      status_error_.clear();
      return;
    }
    std::string why = std::string(failed_step) + ": " + std::strerror(error);  // the same failure is said once
    if (why != status_error_) say("pipe.status_unwritten", "--status " + args_->status_file, why);
    status_error_ = std::move(why);
  }
  std::string status_error_;  // the last failure to write the status file, said once

  std::shared_ptr<PipeArgs> args_;
  pipeline::WorkerPool workers_;
  std::shared_ptr<pipeline::QueuePipeline> pipeline_;  // null while a loss waits for the next connection
  std::shared_ptr<pipeline::StatusBoard> board_;
  // Those a loss retired: their stage commands may still run and report (dropped) to them.
  std::vector<std::shared_ptr<pipeline::QueuePipeline>> retired_;
  std::vector<std::shared_ptr<pipeline::StatusBoard>> retired_boards_;
  pipeline::Status carried_;            // the retired pipelines' counts
  std::uint64_t generation_ = 0;        // which pipeline is the running one
  bool waiting_for_connection_ = false;
  std::optional<Again> start_again_;  // from start(): a start that timed out, made again
  pipeline::Status last_;
  std::unique_ptr<client::Timer> tick_, deadline_;
  engine::Instant started_ = std::chrono::steady_clock::now();
  engine::Instant next_status_{};
  std::uint64_t outcomes_ = 0;
  bool draining_ = false;
  bool stopping_before_start_ = false;
};

}  // namespace

void add_pipe(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PipeArgs>();
  auto* cmd = app.add_subcommand("pipe", "run each message of a queue through a shell command and publish its output");
  add_common_options(*cmd, args->common);
  cmd->add_option("--from", args->from, "the source queue (manual acks)")->required();
  cmd->add_option("--to", args->to, "the destination exchange (\"\" is the default exchange)")->required();
  cmd->add_option("--routing-key", args->routing_key, "the destination routing key (default: the source message's)");
  cmd->add_option("--exec", args->exec, "run by /bin/sh -c with the body on standard input; its output is published")
      ->required();
  cmd->add_option("--concurrency", args->concurrency, "records in flight at once (default 1)");
  cmd->add_option("--on-error", args->on_error, "what a failed record becomes (default dead-letter)")
      ->check(CLI::IsMember({"dead-letter", "skip", "stop", "requeue"}));
  cmd->add_option("--dead-letter-exchange", args->dead_letter_exchange, "where failed records are published, with an envelope");
  cmd->add_option("--dead-letter-routing-key", args->dead_letter_routing_key,
                  "the dead-letter routing key (default: the source message's)");
  cmd->add_flag("--native-dlx", args->native_dlx, "failed records are rejected to the queue's own x-dead-letter-exchange");
  cmd->add_flag("--dlx-by-policy", args->dlx_by_policy,
                "with --native-dlx: a policy sets the queue's dead-letter-exchange (no argument is required)");
  cmd->add_flag("--declare", args->declare,
                "declare the source queue (durable) and the exchanges named (durable, direct) before starting");
  cmd->add_flag("--verify", args->verify,
                "check that the source queue and the exchanges named exist; exit 1 naming every missing one");
  cmd->add_option("--count", args->count, "exit 0 once this many records reached an outcome");
  cmd->add_option("--status", args->status_file, "write the worker's status as JSON to FILE every second")->type_name("FILE");
  cmd->add_option("--timeout", args->timeout_s, "exit 1 when this many seconds pass first (counted from the start)");
  cmd->callback([&run, args] {
    run = [args] {
      ::signal(SIGPIPE, SIG_IGN);  // a command that exits before reading its input ends a write, not warren
      PipeJob job(args);
      int code = job.run();
      if (code != exit_usage) job.write_final_status();  // a usage error started nothing
      return code;
    };
  });
}

}  // namespace warren::cli

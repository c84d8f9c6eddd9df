// warren log append | read: the messaging layer's log (a stream queue "P.log.NAME") on the
// command line. `append` prints each entry's offset; `read` prints OFFSET<TAB>BODY (or JSON)
// per entry, catch-up pages up to the tip read when it started, then with --follow a live
// tail. A trimmed offset exits 3: "warren: gap: offset N is gone; the oldest retained is M".
#include <charconv>
#include <iostream>
#include <optional>

#include "again.hpp"
#include "commands.hpp"
#include "layer_job.hpp"
#include "message_json.hpp"
#include "stdin_lines.hpp"
#include "trace_environment.hpp"
#include "untrusted_text.hpp"
#include "warren/messaging/log.hpp"

namespace warren::cli {
namespace {

inline constexpr int exit_gap = 3;

struct LogArgs {
  Common common;
  std::string prefix = "warren";
  std::string log;
  std::string from = "first";
  std::uint64_t count = 0;  // 0: no limit
  bool follow = false;
  bool json = false;
  bool raw = false;  // the body's bytes even on a terminal
};

class LogJob : public LayerJob {
 public:
  explicit LogJob(std::shared_ptr<LogArgs> args) : LayerJob(args->common), args_(std::move(args)) {}

 protected:
  Result<void> validate() override {
    if (auto ok = messaging::check_options({.prefix = args_->prefix}); !ok)
      return make_error(errc::invalid_argument, "--prefix " + ok.error().detail);
    return {};
  }
  Result<void> make_log() {
    // A tail whose stream went away (deleted, its node down) ends the run with the cause, as
    // the CLI's contract has it; the layer on its own would consume again once it is back. A
    // tail whose connection went away consumes again on the session's next one, from the entry
    // after the last it handed on.
    auto on_event = [this](const messaging::Event& e) {
      if (e.what == "consumer.closed" && !failed() && !went_away_under_it(e.cause)) fail("log read " + e.subject, e.cause);
    };
    if (auto ok = make_layer({.prefix = args_->prefix, .on_event = on_event, .observer = records(), .metrics = metrics()}); !ok)
      return ok;
    auto l = messaging::Log::create(layer_, {.name = args_->log, .on_gap = [this](const messaging::Gap& g) {
                                               gap_ = g;
                                               on_gap(g);
                                             }});
    if (!l) return l.error();
    log_ = *l;
    return {};
  }

  // A gap met by the live tail (a read's gap ends its page instead).
  virtual void on_gap(const messaging::Gap&) {}

  std::shared_ptr<LogArgs> args_;
  std::shared_ptr<messaging::Log> log_;
  std::optional<messaging::Gap> gap_;
};

class AppendJob final : public LogJob {
 public:
  using LogJob::LogJob;

 private:
  void start() override {
    if (auto ok = make_log(); !ok) return fail("", ok.error(), exit_usage);
    trace_ = trace_from_environment().value_or(client::TraceContext{});  // a traced script's, continued
    lines_.emplace(driver(), [this] { next(); });
    again_.emplace(driver(), [this] {
      if (stopping()) return close_then_die();
      append_line();
    });
    next();
  }
  // A lost node is not the end of an appender: it goes on through another host (the stream's
  // replicas there), as `work run` does.
  [[nodiscard]] bool recovers() const override { return true; }

  // One at a time: each answer is the offset its entry landed on. A line not there yet calls
  // again when it comes (the loop goes on meanwhile).
  void next() {
    if (stopping() || appending_) return;
    switch (lines_->take(line_)) {
      case StdinLines::Take::later: return;
      case StdinLines::Take::end: return finish();
      case StdinLines::Take::line: break;
    }
    ++taken_;
    append_line();
  }
  // The line in line_. An append that did not land (Job::worth_making_again: the connection
  // went away under it, a nack, no confirm in time while the stream elects a leader) is made
  // again after a pause. Its fate may be unknown (the broker may have taken it), so the log
  // then holds it once or twice, and the offset printed is the one confirmed. Every printed
  // offset holds its line.
  void append_line() {
    appending_ = true;
    log_->append({.body = line_, .trace = trace_}, [this](Result<std::uint64_t> offset) {
      appending_ = false;
      if (offset) {
        ++appended_;
        again_->landed();
        std::cout << *offset << '\n';
        std::cout.flush();
      }
      if (stopping()) return close_then_die();
      if (!offset) {
        if (failed() || !worth_making_again(offset.error())) return fail("log append " + log_->queue(), offset.error());
        if (!said_again_) {  // once per line, however many tries it takes
          const bool maybe_twice =
              offset.error().code != make_error_code(errc::nacked) && offset.error().sent != Sent::no;
          say("log.append_again", "log append " + log_->queue() + ": line " + std::to_string(taken_),
              offset.error().detail + "; appending it again" + (maybe_twice ? " (the log may then hold it twice)" : ""));
          said_again_ = true;
        }
        appending_ = true;
        again_->arm();
        return;
      }
      said_again_ = false;
      next();
    });
  }

  // SIGTERM or SIGINT: nothing more is read or appended; the entry in flight has the stop's
  // deadline to land (and its offset to be printed), then the stop line says what did not.
  void on_stop_signal(int signal) override {
    if (!begin_stop(signal)) return stopped_now();
    if (!appending_ || (again_ && again_->armed())) close_then_die();
  }

  [[nodiscard]] std::string unfinished() const override {
    const std::uint64_t read = lines_ ? lines_->lines_read() : 0;  // none before it connected
    return std::to_string(read) + " line(s) read, " + std::to_string(read - appended_) + " not confirmed";
  }

  std::optional<StdinLines> lines_;
  std::string line_;
  client::TraceContext trace_;
  bool appending_ = false;
  bool said_again_ = false;  // this line's append is being made again (said on stderr)
  std::optional<Again> again_;  // from start(): the loop is made as the job runs
  void closing() override {
    if (again_) again_->cancel();
    LogJob::closing();
  }
  std::uint64_t appended_ = 0;  // offsets printed
  std::uint64_t taken_ = 0;     // lines taken from the input: line_ is this one (1-based)
};

class ReadJob final : public LogJob {
 public:
  using LogJob::LogJob;

 private:
  Result<void> validate() override {
    if (auto ok = LogJob::validate(); !ok) return ok;
    const auto& f = args_->from;
    if (f == "first" || f == "last" || f == "next") {
      from_.position = f;
    } else {
      std::uint64_t n = 0;
      auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), n);
      if (ec != std::errc() || end != f.data() + f.size() || f.empty())
        return make_error(errc::invalid_argument, "--from '" + f + "': first, last, next or an offset");
      from_.offset = n;
    }
    return {};
  }

  void start() override {
    if (auto ok = make_log(); !ok) return fail("", ok.error(), exit_usage);
    again_.emplace(driver(), [this] { following_ ? tail() : page(); });
    log_->declare([this](Result<void> r) {
      if (!r) return fail("log read " + log_->queue(), r.error());
      page();
    });
  }
  // A lost node is not the end of a reader: the catch-up reads again from after the last entry
  // printed, and the tail consumes again from there, through another host.
  [[nodiscard]] bool recovers() const override { return true; }

  bool print(const engine::Message& m, std::uint64_t offset) {
    if (args_->json) {
      Json out;
      out["offset"] = offset;
      const Json entry = message_json(m);  // named: a range-for would not keep a temporary alive
      for (auto& [k, v] : entry.items()) out[k] = v;
      std::cout << json_line(out) << '\n';
    } else {
      std::cout << offset << '\t' << shown_body({reinterpret_cast<const char*>(m.body.data()), m.body.size()}, args_->raw)
                << '\n';
    }
    std::cout.flush();
    ++printed_;
    last_ = offset;
    if (args_->count > 0 && printed_ == args_->count) {
      finish();
      return false;
    }
    return true;
  }

  // Catch-up pages until the tip read first, then (with --follow) the live tail.
  void page() {
    log_->read({.from = from_}, [this](Result<messaging::Page> p) {
      if (failed()) return;
      if (!p && !gap_ && went_away_under_it(p.error())) {  // again, from after what was printed
        if (last_) from_ = {.offset = *last_ + 1};
        return again_->arm();
      }
      // A stream member hung, or not running yet on this node: with --follow (a service), again
      // after a pause; a one-off read says why it ended.
      if (!p && !gap_ && args_->follow && member_silent_or_away(p.error())) {
        say("log.reading_again", "log read " + log_->queue(), p.error().to_string() + "; reading again");
        if (last_) from_ = {.offset = *last_ + 1};
        return again_->arm();
      }
      if (p) again_->landed();
      if (!p) {
        if (gap_)
          return fail_text("gap", "offset " + std::to_string(gap_->asked) + " is gone; the oldest retained is " +
                                      std::to_string(gap_->oldest), exit_gap);
        return fail("log read " + log_->queue(), p.error());
      }
      if (!started_tip_set_) {
        started_tip_set_ = true;
        started_tip_ = p->tip;
      }
      bool past_tip = false;
      for (auto& e : p->entries) {
        if (started_tip_ && e.offset > *started_tip_) {  // stop at the tip read when it started
          past_tip = true;
          break;
        }
        if (!print(e.message.view(), e.offset)) return;
      }
      const bool at_tip = !started_tip_ || past_tip || (last_ && *last_ >= *started_tip_) || p->complete;
      if (!at_tip) {  // the delivery paused: ask again from where it stopped
        if (p->entries.empty()) {
          if (++stalls_ >= 3)
            return fail_text("log read " + log_->queue(), "no entries arrived below the tip " + std::to_string(*started_tip_));
        } else {
          stalls_ = 0;
          from_ = {.offset = *last_ + 1};
        }
        return page();
      }
      if (!args_->follow) return finish();
      tail();
    });
  }

  void on_gap(const messaging::Gap& g) override {
    if (!following_ || failed()) return;
    fail_text("gap", "offset " + std::to_string(g.asked) + " is gone; the oldest retained is " + std::to_string(g.oldest),
              exit_gap);
  }

  void tail() {
    following_ = true;
    // After what was printed; else after the tip the catch-up stopped at, but never before
    // an offset asked for (a --from past the tip waits for it).
    messaging::From from = from_;
    if (last_) {
      from = {.offset = *last_ + 1};
    } else if (started_tip_ && from_.position != "next") {
      const std::uint64_t after_tip = *started_tip_ + 1;
      from = {.offset = from_.offset ? std::max(*from_.offset, after_tip) : after_tip};
    }
    log_->follow(
        from, [this](const client::Delivery& d, std::uint64_t offset) {
          if (!failed() && !done_) done_ = !print(d.raw(), offset);
        },
        [this](const Error& cause) {
          if (!done_) fail("log read " + log_->queue(), cause);
        },
        [this](Result<std::shared_ptr<messaging::LogTail>> t) {
          if (failed() || done_) return;
          // The connection went away while the tail was set up (CI saw it: a node hung just
          // after the catch-up): the tail is made again, from after what was printed.
          if (!t && went_away_under_it(t.error())) return again_->arm();
          // A stream member hung, or not running yet on this node: again, after a pause.
          if (!t && member_silent_or_away(t.error())) {
            say("log.following_again", "log read " + log_->queue(), t.error().to_string() + "; starting the tail again");
            return again_->arm();
          }
          if (!t) return fail("log read " + log_->queue(), t.error());
          again_->landed();
          tail_ = *t;
        });
  }

  // A look or a tail the stream's member did not answer in time, or refused because it is not
  // running on this node: worth making again after a pause.
  [[nodiscard]] bool member_silent_or_away(const Error& e) const {
    return unanswered_while_connected(e) || messaging::stream_member_unavailable(e);
  }

  messaging::From from_;
  std::optional<std::uint64_t> started_tip_;
  bool started_tip_set_ = false;
  std::optional<std::uint64_t> last_;
  std::uint64_t printed_ = 0;
  int stalls_ = 0;
  bool done_ = false;
  bool following_ = false;
  std::shared_ptr<messaging::LogTail> tail_;
  std::optional<Again> again_;  // a catch-up page, or the tail's start, that the loss of its connection ended
  void closing() override {
    if (again_) again_->cancel();
    LogJob::closing();
  }
};

void add_log_names(CLI::App& cmd, LogArgs& args) {
  cmd.add_option("--log", args.log, "the log NAME (the stream queue P.log.NAME)")->required();
  cmd.add_option("--prefix", args.prefix, "the namespace P of every name on the broker (default warren)");
}

}  // namespace

void add_log(CLI::App& app, Runner& run) {
  auto* log = app.add_subcommand("log", "an append-only log on a stream queue");
  log->require_subcommand(1);

  auto append = std::make_shared<LogArgs>();
  auto* a = log->add_subcommand("append", "append each line of standard input; print each entry's offset");
  add_common_options(*a, append->common);
  add_log_names(*a, *append);
  a->callback([&run, append] { run = [append] { return AppendJob(append).run(); }; });

  auto read = std::make_shared<LogArgs>();
  auto* r = log->add_subcommand("read", "print OFFSET<TAB>BODY per entry up to the tip (then live with --follow)");
  add_common_options(*r, read->common);
  add_log_names(*r, *read);
  r->add_option("--from", read->from, "first, last, next or an offset (default first)");
  r->add_option("--count", read->count, "exit 0 after this many entries");
  r->add_flag("--follow", read->follow, "after the tip, print entries as they are appended");
  r->add_flag("--json", read->json, "one JSON object per entry, with an offset field");
  r->add_flag("--raw", read->raw, "write each body's bytes as they are, even on a terminal (where they are escaped)");
  r->callback([&run, read] { run = [read] { return ReadJob(read).run(); }; });
}

}  // namespace warren::cli

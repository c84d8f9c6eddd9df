// warren publish: messages from --body, --body-file, --count x --size, or one per line of
// standard input. With --confirm it waits for every confirm and names the first message the
// broker nacked or returned.
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "stdin_lines.hpp"
#include "trace_environment.hpp"
#include "values.hpp"

namespace warren::cli {
namespace {

struct PublishArgs {
  Common common;
  std::string exchange, routing_key;
  bool confirm = false, mandatory = false, persistent = false;
  std::vector<std::string> headers, properties;
  std::optional<std::string> body, body_file;
  std::optional<std::uint64_t> count;
  std::optional<std::size_t> size;
};

// Where the bodies come from, one at a time.
class Bodies {
 public:
  virtual ~Bodies() = default;
  virtual std::optional<std::string_view> next() = 0;
  // After next() found none: whether more may come (the caller is called again then).
  [[nodiscard]] virtual bool more_later() const { return false; }
};

class RepeatedBody final : public Bodies {  // --body, --body-file, --size: the same bytes N times
 public:
  RepeatedBody(std::string body, std::uint64_t count) : body_(std::move(body)), left_(count) {}
  std::optional<std::string_view> next() override {
    if (left_ == 0) return std::nullopt;
    --left_;
    return body_;
  }

 private:
  std::string body_;
  std::uint64_t left_;
};

// One message per line (see StdinLines), each published as soon as it is read.
class StdinBodies final : public Bodies {
 public:
  StdinBodies(client::Driver& driver, std::function<void()> on_more) : lines_(driver, std::move(on_more)) {}
  std::optional<std::string_view> next() override {
    const auto took = lines_.take(line_);
    later_ = took == StdinLines::Take::later;
    if (took != StdinLines::Take::line) return std::nullopt;
    return line_;
  }
  [[nodiscard]] bool more_later() const override { return later_; }
  [[nodiscard]] std::size_t lines_read() const { return lines_.lines_read(); }

 private:
  StdinLines lines_;
  std::string line_;
  bool later_ = false;
};

class PublishJob final : public Job {
 public:
  explicit PublishJob(std::shared_ptr<PublishArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  static constexpr std::uint64_t window = 1000;  // unconfirmed publishes in flight at most

  Result<void> validate() override {
    int sources = (args_->body ? 1 : 0) + (args_->body_file ? 1 : 0) + (args_->size ? 1 : 0);
    if (sources > 1) return make_error(errc::invalid_argument, "give one of --body, --body-file and --size");
    if (args_->count && sources == 0)
      return make_error(errc::invalid_argument, "--count needs --size, --body or --body-file (standard input sends one message a line)");
    for (const auto& h : args_->headers)
      if (auto r = add_typed_entry(headers_, h, Untyped::string); !r.ok())
        return make_error(errc::invalid_argument, "--header " + r.error().detail);
    for (const auto& p : args_->properties)
      if (auto r = properties_.set(p); !r.ok()) return make_error(errc::invalid_argument, "--property " + r.error().detail);
    if (args_->persistent) properties_.set_persistent();
    properties_.set_headers(headers_);
    const std::uint64_t count = args_->count.value_or(1);
    total_ = count;
    if (args_->body) {
      bodies_ = std::make_unique<RepeatedBody>(*args_->body, count);
    } else if (args_->body_file) {
      std::ifstream file(*args_->body_file, std::ios::binary);
      if (!file) return make_error(errc::invalid_argument, "--body-file " + *args_->body_file + ": cannot be read");
      std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      if (file.bad()) return make_error(errc::invalid_argument, "--body-file " + *args_->body_file + ": read failed");
      bodies_ = std::make_unique<RepeatedBody>(std::move(bytes), count);
    } else if (args_->size) {
      bodies_ = std::make_unique<RepeatedBody>(std::string(*args_->size, 'w'), count);
    }  // else standard input, read from start() on, on the loop's side
    return {};
  }

  void start() override {
    if (!bodies_) {
      auto lines = std::make_unique<StdinBodies>(driver(), [this] { publish_more(); });
      stdin_ = lines.get();
      bodies_ = std::move(lines);
    }
    publish_ = {.exchange = args_->exchange, .routing_key = args_->routing_key, .mandatory = args_->mandatory,
                .properties = properties_.properties()};
    // A traced script's context continues in what it sends.
    if (const auto trace = trace_from_environment(headers_)) publish_.trace = *trace;
    conn_->on_writable = [this] { publish_more(); };
    if (!args_->confirm) return publish_more();
    channel_.confirm_select([this](Result<void> r) {
      if (!r) return fail("confirm.select", r.error());
      publish_more();
    });
  }

  // SIGTERM or SIGINT: no more is read or sent; what was sent has the stop's deadline to be
  // confirmed, then the stop line says what was not.
  void on_stop_signal(int signal) override {
    if (!begin_stop(signal)) return stopped_now();
    if (settled_ == sent_) close_then_die();
  }

  [[nodiscard]] std::string unfinished() const override {
    const std::string not_done = args_->confirm ? " not confirmed" : " not sent";
    const bool from_stdin = !args_->body && !args_->body_file && !args_->size;
    if (!from_stdin) return std::to_string(total_) + " message(s), " + std::to_string(total_ - ok_) + not_done;
    const std::uint64_t read = stdin_ ? stdin_->lines_read() : 0;  // none before it connected
    return std::to_string(read) + " line(s) read, " + std::to_string(read - ok_) + not_done;
  }

  void publish_more() {
    while (!failed() && !input_done_ && !stopping()) {
      if (args_->confirm && sent_ - settled_ >= window) return;  // a confirm will call again
      if (conn_->congested()) return;                            // on_writable will
      auto body = bodies_->next();
      if (!body) {
        if (bodies_->more_later()) return;  // the next line calls again
        input_done_ = true;
        break;
      }
      const std::uint64_t number = ++sent_;
      channel_.publish(publish_, client::as_bytes(*body),
                       [this, number](Result<engine::PublishOutcome> outcome) { settled(number, outcome); });
    }
    if (input_done_ && settled_ == sent_ && !failed() && !stopping()) finish();
  }

  void settled(std::uint64_t number, const Result<engine::PublishOutcome>& outcome) {
    ++settled_;
    if (outcome) ++ok_;
    if (stopping()) {
      if (settled_ == sent_) close_then_die();
      return;
    }
    if (!outcome) {
      const Error& cause = outcome.error();
      std::string why;
      if (cause.code == make_error_code(errc::unroutable))
        why = returned_line(cause);
      else if (cause.code == make_error_code(errc::nacked))
        why = "nacked by the broker";
      else  // its fate is unknown: it ran out of time, or its channel or connection ended
        why = std::string(cause.code == make_error_code(errc::timeout) ? "timed_out" : "failed") + ": " + describe(cause);
      return fail_text("message " + std::to_string(number), why, cause);
    }
    publish_more();
  }

  std::shared_ptr<PublishArgs> args_;
  wire::FieldTable headers_;
  MessageProperties properties_;
  client::Publish publish_;  // the same for every message: only the body changes
  std::unique_ptr<Bodies> bodies_;
  StdinBodies* stdin_ = nullptr;  // bodies_, when they are standard input's lines
  std::uint64_t total_ = 0;       // --body, --body-file, --size: the messages asked for
  std::uint64_t sent_ = 0, settled_ = 0;
  std::uint64_t ok_ = 0;  // settled and confirmed (without --confirm: written)
  bool input_done_ = false;
};

}  // namespace

void add_publish(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PublishArgs>();
  auto* cmd = app.add_subcommand("publish", "publish messages (one per line of standard input by default)");
  add_common_options(*cmd, args->common);
  cmd->add_option("--exchange", args->exchange, "the exchange (default: the default exchange \"\")");
  cmd->add_option("--routing-key", args->routing_key, "the routing key");
  cmd->add_flag("--confirm", args->confirm, "wait for the broker's confirms; exit 1 on a nack or return");
  cmd->add_flag("--mandatory", args->mandatory, "ask the broker to return unroutable messages (reported with --confirm)");
  cmd->add_flag("--persistent", args->persistent, "delivery_mode 2");
  cmd->add_option("--header", args->headers, "K=V (long string), K:int=V, K:bool=true|false, K:float=V")->type_name("K=V");
  cmd->add_option("--property", args->properties,
                  "NAME=VALUE: content_type, content_encoding, delivery_mode, priority, correlation_id, reply_to, "
                  "expiration, message_id, timestamp, type, user_id, app_id")
      ->type_name("NAME=VALUE");
  cmd->add_option("--body", args->body, "one message with this text");
  cmd->add_option("--body-file", args->body_file, "one message with this file's bytes, unchanged");
  cmd->add_option("--count", args->count, "send the body this many times")->check(CLI::PositiveNumber);
  cmd->add_option("--size", args->size, "bodies of exactly this many bytes (with --count)")->check(CLI::NonNegativeNumber);
  cmd->callback([&run, args] { run = [args] { return PublishJob(args).run(); }; });
}

}  // namespace warren::cli

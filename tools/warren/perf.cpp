// warren perf: a load tool with RabbitMQ PerfTest's flags where they exist. Each producer
// and each consumer has a connection of its own, all on one loop. Bodies carry their send
// time (steady clock, nanoseconds) in their first 8 bytes, so consumers measure latency.
// CPU is the process's user + system time (getrusage) over the measured phase; CPU per
// message divides it by the larger of messages sent and messages received. Each second a
// line on standard error says how the run goes, as PerfTest's do; standard output keeps the
// summary.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "histogram.hpp"
#include "message_json.hpp"
#include "process_usage.hpp"

namespace warren::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct PerfArgs {
  Common common;
  int producers = 1, consumers = 1;
  std::size_t size = 12;
  std::uint64_t producer_count = 0, consumer_count = 0;  // 0: no limit
  std::uint32_t confirm_window = 0;                      // 0: no confirms
  std::uint16_t prefetch = 250;
  bool auto_ack = false;
  std::uint32_t multi_ack = 0;  // ack with multiple every N; 0 (or 1): each
  std::string queue;
  double seconds = 0;  // 0: until the counts are reached
  double rate = 0;     // messages per second per producer; 0: as fast as it can
  int consumer_channels = 1;
  // Consumers' read batching: unset, ClientOptions' default (adaptive); --read-min-bytes asks
  // for throughput mode (0: off), --read-burst-bytes for batching only past bursts.
  std::optional<std::size_t> read_min_bytes;
  std::uint64_t read_max_wait_us = 1000;
  std::size_t read_burst_bytes = 0;
  // Producers: the depth of the confirm window at which their confirms are read in batches;
  // unset, ClientOptions' default (ReadBatching::owed_confirms); 0: never.
  std::optional<std::size_t> read_owed_confirms;
  // Before the measured phase, every connection idle this long: its CPU, wake-ups and RSS.
  double idle_seconds = 0;
  bool json = false;
};

// Handshakes in flight at once: ten thousand at once would have the broker time some out.
constexpr std::size_t dials_in_flight = 64;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

class PerfJob;

struct Producer {
  std::shared_ptr<client::Connection> conn;
  client::Channel channel;
  std::uint64_t sent = 0;
  std::uint64_t settled_through = 0;  // highest publish id settled (confirms come in order)
  std::uint64_t first_id = 0;         // id of the first publish, to turn ids into counts
  std::unique_ptr<client::Timer> pace;  // -r: the next turn of a rate-limited producer
  bool done = false;
};

// One consumer: a channel and its subscription, on a consumer connection (-Y per connection).
struct Subscriber {
  client::Channel channel;
  client::Consumer subscription;  // held for the run: dropping it cancels
  std::uint64_t received = 0;
  std::uint64_t unacked = 0;
  bool done = false;
};

struct Consumer {
  std::shared_ptr<client::Connection> conn;
  std::vector<Subscriber> subscribers;
};

class PerfJob final : public Job {
 public:
  explicit PerfJob(std::shared_ptr<PerfArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  Result<void> validate() override {
    const auto& a = *args_;
    if (a.producers < 0 || a.consumers < 0) return make_error(errc::invalid_argument, "-x and -y must not be negative");
    if (a.producers == 0 && a.consumers == 0) return make_error(errc::invalid_argument, "nothing to do: -x 0 -y 0");
    if (a.producers == 0 && a.queue.empty())
      return make_error(errc::invalid_argument, "-x 0 reads what is already in a queue: give it with -u");
    if (a.seconds < 0 || !std::isfinite(a.seconds)) return make_error(errc::invalid_argument, "-z must be a number of seconds");
    if (a.producers > 0 && a.producer_count == 0 && a.seconds == 0)
      return make_error(errc::invalid_argument, "unbounded run: give -C (messages per producer) or -z (seconds)");
    if (a.rate < 0 || !std::isfinite(a.rate)) return make_error(errc::invalid_argument, "-r must be messages per second, 0 or more");
    if (a.consumer_channels < 1) return make_error(errc::invalid_argument, "-Y must be 1 or more");
    if (a.idle_seconds < 0 || !std::isfinite(a.idle_seconds))
      return make_error(errc::invalid_argument, "--idle-seconds must be a number of seconds, 0 or more");
    if (a.read_max_wait_us == 0) return make_error(errc::invalid_argument, "--read-max-wait must be 1 us or more");
    if (a.read_burst_bytes > 0 && !a.read_min_bytes)
      return make_error(errc::invalid_argument, "--read-burst-bytes needs --read-min-bytes");
    body_.assign(a.size, 'w');
    return {};
  }

  void start() override {
    if (!args_->queue.empty()) {
      queue_ = args_->queue;
      return ensure_queue(queue_, [this](Result<std::uint32_t> messages) {
        if (!messages) return fail("queue " + queue_, messages.error());
        declared(*messages);
      });
    }
    // Durable, since other connections use it (so not exclusive) and RabbitMQ 4.3 refuses a
    // transient non-exclusive queue; deleted at the end.
    channel_.queue_declare({.durable = true}, [this](Result<client::QueueDeclared> q) {
      if (!q) return fail("queue.declare", q.error());
      queue_ = q->name;
      delete_queue_ = true;
      declared(0);
    });
  }

  void declared(std::uint32_t messages) {
    initial_messages_ = messages;
    rss_before_kb_ = current_rss_kb();
    publish_ = {.routing_key = queue_};
    connect_workers();
  }

  void connect_workers() {
    producers_.resize(static_cast<std::size_t>(args_->producers));
    consumers_.resize(static_cast<std::size_t>(args_->consumers));
    pending_setup_ = args_->producers + args_->consumers;
    for (std::size_t i = 0; i < dials_in_flight; ++i) dial_next_worker();
  }

  std::size_t connections() const { return producers_.size() + consumers_.size(); }

  // Producers first, then consumers; each connection made starts the next dial.
  void dial_next_worker() {
    if (next_worker_ < producers_.size()) return setup_producer(producers_[next_worker_++]);
    if (const std::size_t c = next_worker_ - producers_.size(); c < consumers_.size()) {
      ++next_worker_;
      setup_consumer(consumers_[c]);
    }
  }

  // Connection, channel, and confirm mode when asked for; publishing starts once every
  // worker is ready, so consumers are listening before the first message.
  void setup_producer(Producer& p) {
    client::ClientOptions options = this->options();
    if (args_->read_owed_confirms) options.read_batching.owed_confirms = *args_->read_owed_confirms;
    connect_another(std::move(options), [this, &p](Result<std::shared_ptr<client::Connection>> c) {
      if (!c) return fail("producer connect", c.error());
      p.conn = std::move(*c);
      dial_next_worker();
      p.conn->open_channel([this, &p](Result<client::Channel> ch) {
        if (!ch) return fail("producer channel.open", ch.error());
        p.channel = std::move(*ch);
        p.conn->on_writable = [this, &p] { publish_more(p); };
        // The callback-free publish: outcomes arrive here by range, nothing is stored per message.
        p.conn->on_publish_done = [this, &p](const engine::PublishDone& d) { on_settled(p, d); };
        if (args_->confirm_window == 0) return worker_ready();
        p.channel.confirm_select([this](Result<void> r) {
          if (!r) return fail("confirm.select", r.error());
          worker_ready();
        });
      });
    });
  }

  // A consumer connection and its -Y channels, each with a subscription of its own; the
  // connection counts as ready once every subscription is.
  void setup_consumer(Consumer& c) {
    client::ClientOptions options = this->options();
    if (args_->read_min_bytes)
      options.read_batching = {.min_bytes = *args_->read_min_bytes,
                               .max_wait = std::chrono::microseconds(args_->read_max_wait_us),
                               .burst_bytes = args_->read_burst_bytes};
    connect_another(std::move(options), [this, &c](Result<std::shared_ptr<client::Connection>> conn) {
      if (!conn) return fail("consumer connect", conn.error());
      c.conn = std::move(*conn);
      dial_next_worker();
      c.subscribers.resize(static_cast<std::size_t>(args_->consumer_channels));
      pending_setup_ += args_->consumer_channels - 1;
      for (auto& s : c.subscribers) setup_subscriber(c, s);
    });
  }

  void setup_subscriber(Consumer& c, Subscriber& s) {
    c.conn->open_channel([this, &s](Result<client::Channel> ch) {
      if (!ch) return fail("consumer channel.open", ch.error());
      s.channel = std::move(*ch);
      s.channel.consume(
          {.queue = queue_, .auto_ack = args_->auto_ack, .prefetch = args_->prefetch},
          [this, &s](const client::Delivery& d) { on_message(s, d); },
          [this, &s](Result<client::Consumer> subscription) {
            if (!subscription) return fail("basic.consume " + queue_, subscription.error());
            s.subscription = std::move(*subscription);
            s.subscription.on_ended([this](const Error& cause) {
              if (!finished_) fail("consumer", cause);
            });
            worker_ready();
          });
    });
  }

  void worker_ready() {
    if (--pending_setup_ > 0) return;
    if (args_->idle_seconds > 0) return idle();
    measure();
  }

  // --idle-seconds: every connection set up and nothing moving (heartbeats aside).
  void idle() {
    idling_ = true;
    const auto idle_from = Clock::now();
    const double cpu_from = cpu_seconds();
    const long switches_from = voluntary_switches();
    std::fprintf(stderr, "idle: %zu connections ready, idle for %.1f s\n", connections(),
                 args_->idle_seconds);
    idle_timer_ = driver().timer([this, idle_from, cpu_from, switches_from] {
      idling_ = false;
      const double s = std::chrono::duration<double>(Clock::now() - idle_from).count();
      idle_ = {{"seconds", s},
               {"cpu_us_per_s", (cpu_seconds() - cpu_from) * 1e6 / s},
               {"wakeups_per_s", static_cast<double>(voluntary_switches() - switches_from) / s},
               {"rss_kb", current_rss_kb()},
               {"rss_before_kb", rss_before_kb_}};
      measure();
    });
    idle_timer_->arm(idle_from + from_seconds(args_->idle_seconds));
  }

  void measure() {
    // For a script that starts its producers once these consumers are listening and were
    // idle (bench/scale.sh); a run without an idle phase keeps stderr to its progress lines.
    if (args_->idle_seconds > 0) std::fprintf(stderr, "measuring: %zu connections\n", connections());
    started_ = Clock::now();
    cpu_start_ = cpu_seconds();
    if (args_->seconds > 0) {
      stop_timer_ = driver().timer([this] { end(); });
      stop_timer_->arm(started_ + from_seconds(args_->seconds));
    }
    progress_timer_ = driver().timer([this] { progress(); });
    progress_at_ = started_ + std::chrono::seconds(1);
    progress_timer_->arm(progress_at_);
    for (auto& p : producers_) publish_more(p);
    check_done();
  }

  void publish_more(Producer& p) {
    const auto limit = args_->producer_count;
    const auto window = args_->confirm_window;
    while (!p.done && !finished_) {
      if (limit > 0 && p.sent == limit) break;
      if (window > 0 && p.sent - settled_count(p) >= window) return;  // a confirm calls again
      if (p.conn->congested()) return;                                // on_writable does
      if (args_->rate > 0 && p.sent >= allowed_by_rate()) return pace(p);
      // The send time, for this run's consumers to measure latency by; a run without
      // consumers does not read the clock per message (it would be measured as the client's).
      if (args_->consumers > 0 && body_.size() >= 8) {
        const std::uint64_t t = now_ns();
        std::memcpy(body_.data(), &t, 8);
      }
      auto id = p.channel.publish(publish_, client::as_bytes(body_));
      if (!id.ok()) return fail("publish", id.error());
      if (p.sent++ == 0) p.first_id = *id;
    }
    producer_maybe_done(p);
  }

  // -r: what a producer may have sent by now, from the start of the run. With -z the run's
  // time counts, not the clock's: on a busy machine the stop timer fires late, and the
  // producer must not go on pacing past the time it was given.
  std::uint64_t allowed_by_rate() const {
    double s = std::chrono::duration<double>(Clock::now() - started_).count();
    if (args_->seconds > 0) s = std::min(s, args_->seconds);
    return static_cast<std::uint64_t>(s * args_->rate) + 1;
  }

  // Publishing resumes on a timer: every 1/rate seconds, but not more often than each
  // millisecond (a fast rate publishes a few per turn).
  void pace(Producer& p) {
    if (!p.pace) p.pace = driver().timer([this, &p] { publish_more(p); });
    const auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(1.0 / args_->rate));
    p.pace->arm(driver().now() + std::max<std::chrono::steady_clock::duration>(gap, std::chrono::milliseconds(1)));
  }

  std::uint64_t settled_count(const Producer& p) const {
    return p.settled_through == 0 ? 0 : p.settled_through - p.first_id + 1;
  }

  void on_settled(Producer& p, const engine::PublishDone& d) {
    if (d.outcome != engine::PublishOutcome::confirmed && d.outcome != engine::PublishOutcome::written)
      return fail("publish", d.cause);
    p.settled_through = std::max<std::uint64_t>(p.settled_through, d.last);
    // A full window is topped up once a quarter of it is free, not at each confirm: each
    // wake-up for confirms then writes a batch, not a message or two.
    const std::uint64_t window = args_->confirm_window;
    if (window > 0 && p.sent - settled_count(p) <= window - std::max<std::uint64_t>(1, window / 4)) publish_more(p);
    else if (window > 0) producer_maybe_done(p);
  }

  void producer_maybe_done(Producer& p) {
    if (p.done || args_->producer_count == 0 || p.sent < args_->producer_count) return;
    if (args_->confirm_window > 0 && settled_count(p) < p.sent) return;
    p.done = true;
    check_done();
  }

  void on_message(Subscriber& c, const client::Delivery& d) {
    if (c.done || finished_) return;
    ++c.received;
    ++received_total_;
    // The send time, from a producer of this run (a consumer alone does not read the clock
    // per message: that would be measured as the client's cost).
    if (args_->producers > 0 && d.body().size() >= 8) {
      std::uint64_t t;
      std::memcpy(&t, d.body().data(), 8);
      const std::uint64_t now = now_ns();
      if (now >= t && now - t < std::uint64_t{3600} * 1'000'000'000) {
        latency_.record(now - t);
        second_latency_.record(now - t);
      }
    }
    if (!args_->auto_ack) {
      ++c.unacked;
      if (args_->multi_ack <= 1 || c.unacked >= args_->multi_ack) ack(c, d);
    }
    const bool own_limit = args_->consumer_count > 0 && c.received == args_->consumer_count;
    if (own_limit) {
      c.done = true;
      if (c.unacked) ack(c, d);
    }
    check_done();
  }

  // With -A N one ack settles this delivery and every earlier one still unacked.
  void ack(Subscriber& c, const client::Delivery& d) {
    if (auto r = d.ack({.multiple = args_->multi_ack > 1}); !r.ok()) return fail("ack", r.error());
    c.unacked = 0;
  }

  // Everything expected is in: producers settled (or, with no consumers and no confirms, the
  // broker holds what was sent), consumers have their counts (or all that was sent).
  void check_done() {
    if (finished_ || pending_setup_ > 0) return;
    for (const auto& p : producers_)
      if (!p.done) return;
    std::uint64_t sent = 0;
    for (const auto& p : producers_) sent += p.sent;
    if (consumers_.empty()) {
      if (args_->confirm_window == 0) return wait_until_held(sent);
      return end();
    }
    if (args_->consumer_count > 0) {
      for (const auto& c : consumers_)
        for (const auto& s : c.subscribers)
          if (!s.done) return;
      return end();
    }
    // Consumers alone with -z: they read what comes until the time is up.
    if (producers_.empty() && args_->seconds > 0) return;
    const std::uint64_t expected = producers_.empty() ? initial_messages_ : sent;
    if (received_total_ >= expected) end();
  }

  // Without confirms "sent" means written to the socket; the run ends when the broker says
  // the queue holds the messages.
  void wait_until_held(std::uint64_t sent) {
    if (holding_check_) return;
    holding_check_ = true;
    channel_.queue_declare({.name = queue_, .passive = true}, [this, sent](Result<client::QueueDeclared> q) {
      if (!q) return fail("queue.declare " + queue_, q.error());
      holding_check_ = false;
      if (q->message_count >= initial_messages_ + sent) return end();
      if (!poll_timer_) poll_timer_ = driver().timer([this] { check_done(); });
      poll_timer_->arm(driver().now() + std::chrono::milliseconds(5));
    });
  }

  // Each second, on standard error, PerfTest's line: the rates over that second and the
  // consumer latency of the messages received in it.
  void progress() {
    std::uint64_t sent = 0, confirmed = 0;
    for (const auto& p : producers_) {
      sent += p.sent;
      confirmed += settled_count(p);
    }
    const double s = std::chrono::duration<double>(Clock::now() - started_).count();
    const double span = s - last_progress_s_;
    const auto per_second = [span](std::uint64_t n) { return span > 0 ? static_cast<double>(n) / span : 0.0; };
    const auto us = [this](double q) { return static_cast<double>(second_latency_.quantile_ns(q)) / 1000.0; };
    std::string line = "time: " + fixed(s, 3) + " s, sent: " + fixed(per_second(sent - last_sent_), 0) + " msg/s";
    if (args_->confirm_window > 0) line += ", confirmed: " + fixed(per_second(confirmed - last_confirmed_), 0) + " msg/s";
    line += ", received: " + fixed(per_second(received_total_ - last_received_), 0) + " msg/s";
    if (second_latency_.total() > 0)
      line += ", min/median/75th/95th/99th consumer latency: " + fixed(us(0), 0) + "/" + fixed(us(0.5), 0) + "/" +
              fixed(us(0.75), 0) + "/" + fixed(us(0.95), 0) + "/" + fixed(us(0.99), 0) + " us";
    std::fprintf(stderr, "%s\n", line.c_str());
    second_latency_.reset();
    last_sent_ = sent;
    last_confirmed_ = confirmed;
    last_received_ = received_total_;
    last_progress_s_ = s;
    progress_at_ += std::chrono::seconds(1);
    progress_timer_->arm(progress_at_);
  }

  static std::string fixed(double v, int decimals) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
    return text;
  }

  // SIGTERM or SIGINT: the run so far is the run. Its summary is printed as -z would print it
  // and a queue it made is deleted; then it ends by the signal (Job::finish() during a stop).
  void on_stop_signal(int signal) override {
    if (!begin_stop(signal)) return stopped_now();
    if (finished_ || pending_setup_ > 0 || idling_) return close_then_die();
    end();
  }

  void end() {
    if (finished_) return;
    finished_ = true;
    const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    const double cpu = cpu_seconds() - cpu_start_;
    if (progress_timer_) progress_timer_->cancel();
    if (stop_timer_) stop_timer_->cancel();
    for (auto& p : producers_)
      if (p.pace) p.pace->cancel();
    std::uint64_t sent = 0, confirmed = 0;
    for (const auto& p : producers_) {
      sent += p.sent;
      if (args_->confirm_window > 0) confirmed += settled_count(p);
    }
    const double per = static_cast<double>(std::max<std::uint64_t>({sent, received_total_, 1}));
    Json out;
    out["sent"] = sent;
    out["confirmed"] = confirmed;
    out["received"] = received_total_;
    out["seconds"] = seconds;
    out["send_rate"] = seconds > 0 ? static_cast<double>(sent) / seconds : 0.0;
    out["receive_rate"] = seconds > 0 ? static_cast<double>(received_total_) / seconds : 0.0;
    out["cpu_seconds"] = cpu;
    out["cpu_us_per_msg"] = cpu * 1e6 / per;
    out["latency_us"] = {{"p50", static_cast<double>(latency_.quantile_ns(0.5)) / 1000.0},
                         {"p99", static_cast<double>(latency_.quantile_ns(0.99)) / 1000.0}};
    out["peak_rss_kb"] = peak_rss_kb();
    out["rss_kb"] = current_rss_kb();
    out["connections"] = connections();
    if (!idle_.is_null()) out["idle"] = idle_;
    if (args_->json) {
      std::cout << out.dump() << std::endl;
    } else {
      std::printf("sent %llu (%.0f msg/s), confirmed %llu, received %llu (%.0f msg/s) in %.3f s\n",
                  static_cast<unsigned long long>(sent), out["send_rate"].get<double>(),
                  static_cast<unsigned long long>(confirmed), static_cast<unsigned long long>(received_total_),
                  out["receive_rate"].get<double>(), seconds);
      std::printf("cpu %.3f s, %.3f us/msg; latency p50 %.0f us, p99 %.0f us; peak RSS %ld KiB\n", cpu,
                  out["cpu_us_per_msg"].get<double>(), out["latency_us"]["p50"].get<double>(),
                  out["latency_us"]["p99"].get<double>(), peak_rss_kb());
    }
    if (delete_queue_) {
      channel_.queue_delete({.queue = queue_}, [this](Result<std::uint32_t>) { finish(); });
    } else {
      finish();
    }
  }

  std::shared_ptr<PerfArgs> args_;
  std::string queue_;
  bool delete_queue_ = false;
  std::uint32_t initial_messages_ = 0;
  std::string body_;
  client::Publish publish_;  // to queue_ through the default exchange, the same every time
  std::vector<Producer> producers_;
  std::vector<Consumer> consumers_;
  int pending_setup_ = 0;
  std::size_t next_worker_ = 0;  // the next to dial: producers_, then consumers_
  bool idling_ = false;
  long rss_before_kb_ = 0;  // before the workers' connections
  Json idle_;               // --idle-seconds: what the idle phase measured
  std::uint64_t received_total_ = 0;
  Clock::time_point started_;
  double cpu_start_ = 0;
  Histogram latency_;
  Histogram second_latency_;  // this second's, for the progress line
  std::unique_ptr<client::Timer> stop_timer_, progress_timer_, poll_timer_, idle_timer_;
  Clock::time_point progress_at_;
  std::uint64_t last_sent_ = 0, last_confirmed_ = 0, last_received_ = 0;
  double last_progress_s_ = 0;
  bool holding_check_ = false;
  bool finished_ = false;
};

}  // namespace

void add_perf(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PerfArgs>();
  auto* cmd = app.add_subcommand("perf", "a load test with RabbitMQ PerfTest's flags");
  add_common_options(*cmd, args->common);
  cmd->add_option("-x,--producers", args->producers, "producers, each on its own connection (default 1)");
  cmd->add_option("-y,--consumers", args->consumers, "consumers, each on its own connection (default 1)");
  cmd->add_option("-s,--size", args->size, "body size in bytes (default 12)");
  cmd->add_option("-C,--pmessages", args->producer_count, "messages per producer (default: until -z)");
  cmd->add_option("-D,--cmessages", args->consumer_count, "messages per consumer (default: all that were sent)");
  cmd->add_option("-c,--confirm", args->confirm_window, "confirm window: unconfirmed messages in flight at most (0: no confirms)");
  cmd->add_option("-q,--qos", args->prefetch, "consumer prefetch (default 250)");
  cmd->add_flag("-a,--autoack", args->auto_ack, "consume without acks");
  cmd->add_option("-A,--multi-ack-every", args->multi_ack, "ack with multiple every N messages (default: each)");
  cmd->add_option("-u,--queue", args->queue, "the queue (declared non-durable if missing; default: a new one, deleted after)");
  cmd->add_option("-z,--time", args->seconds, "stop after this many seconds");
  cmd->add_option("-r,--rate", args->rate, "messages per second per producer (default: as fast as it can)");
  cmd->add_option("-Y,--consumer-channel-count", args->consumer_channels,
                  "channels per consumer connection, each with a consumer of its own (default 1)");
  cmd->add_option("--read-min-bytes", args->read_min_bytes,
                  "consumers' throughput mode: while messages keep coming, read once this many bytes are there...");
  cmd->add_option("--read-max-wait", args->read_max_wait_us,
                  "... or this many microseconds after the last read (default 1000)");
  cmd->add_option("--read-burst-bytes", args->read_burst_bytes,
                  "... and only after a read of this many bytes or more (default 0: after any read)");
  cmd->add_option("--read-owed-confirms", args->read_owed_confirms,
                  "producers: read confirms in batches from this many publishes awaiting them until fewer than half do "
                  "(default 256; 0: never)");
  cmd->add_option("--idle-seconds", args->idle_seconds,
                  "first hold every connection idle this long, and report its CPU, wake-ups and RSS (\"idle\" in --json)");
  cmd->add_flag("--json", args->json, "one summary line of JSON");
  cmd->callback([&run, args] { run = [args] { return PerfJob(args).run(); }; });
}

}  // namespace warren::cli

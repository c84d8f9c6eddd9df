// The layer simulation's world: two Sessions with a Messaging layer each, the work queue and
// the log on them, the callback ledger and the invariants (see layers.hpp).
#include "sim/layers.hpp"

#include "sim/direct_sim.hpp"
#include "sim/ledger.hpp"
#include "sim/pipe_sim.hpp"
#include "sim/traces.hpp"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <sstream>

#include "warren/client/session.hpp"
#include "warren/client/url.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/work_queue.hpp"

namespace warren::layersim {

using namespace std::chrono_literals;
using namespace warren::messaging;
using test::BrokerWorld;

namespace {

constexpr std::uint16_t ports[] = {5001, 5002};
constexpr engine::Duration advances[] = {0ms, 10ms, 100ms, 1000ms, 3000ms, 11000ms};
constexpr std::uint32_t attempts = 3;
const std::string jobs_queue = "warren.jobs";
const std::string dead_letter_queue = "warren.jobs.dlq";
const std::string stream_queue = "warren.log.events";

enum Mode { done_mode, retry_mode, release_mode, dead_letter_mode, hold_mode };
// A worker in release mode gives a message back this often, then takes it: a release
// forever is the application's choice, and would only bounce it.
constexpr int max_releases = 3;

}  // namespace

const char* name(Op op) {
  switch (op) {
#define X(n) \
  case Op::n: \
    return #n;
    X(put) X(foreign) X(worker) X(mode) X(settle_held) X(stop_worker) X(append) X(read) X(tail) X(close_tail)
    X(advance) X(cut) X(close_channel) X(hold_confirms) X(truncate) X(pipe_start) X(pipe_put) X(pipe_release)
    X(pipe_drain) X(pipe_cut) X(pipe_hold) X(member) X(inbox) X(backplane) X(send) X(app_mode) X(settle_taken)
    X(rpc_serve) X(rpc_call) X(hang) X(levels_down)
#undef X
  }
  return "?";
}

void showValue(const Cmd& c, std::ostream& os) { os << "{Op::" << name(c.op) << ", " << c.a << ", " << c.b << "}"; }
std::ostream& operator<<(std::ostream& os, const Cmd& c) {
  showValue(c, os);
  return os;
}

struct LayerSim::Impl {
  test::FakeDriver& driver;
  BrokerWorld& world;

  // ---- the ledger (declared first: destroyed last, after every object that may call back)
  Ledger ledger;
  std::vector<std::string>& violations = ledger.violations;
  bool finishing = false;
  Traces traces;
  // With spans on, every connection's observer wants them (and drops them): what a traced
  // application's exporter does, as far as the client can tell.
  struct SpansWanted : client::Observer {
    void on_record(const client::Record&) override {}
    [[nodiscard]] bool wants_spans() const noexcept override { return true; }
    void on_span(const client::SpanRecord&) override {}
  };
  std::shared_ptr<client::Observer> observer;
  int reg(std::string what, bool owed = true) { return ledger.reg(std::move(what), owed); }
  void hit(int id) { ledger.hit(id); }
  void violation(std::string text) { ledger.violation(std::move(text)); }

  // ---- the work queue: copies made and seen, by message id and attempt
  std::map<std::string, std::map<std::uint32_t, int>> made, fresh;
  std::map<std::string, int> releases;
  // Redeliveries by message id at the current instant: a message handed back and delivered
  // again with no time passing, over and over, is a loop nothing will end. (Bouncing as
  // time passes is a worker's choice or a broker that will not confirm: the model's own
  // put-aside count is raised out of the way.)
  static constexpr int hot_loop = 12;
  engine::Instant deliveries_at{};
  std::map<std::string, int> deliveries_now;
  std::set<std::string> confirmed_puts, foreign_puts, done_ids;
  int next_put = 0, next_foreign = 0;
  struct Worker {
    std::shared_ptr<Subscription> sub;
    int mode = done_mode;
    bool live = true;
  };
  // ---- the log
  int next_entry = 0;
  std::uint64_t truncated = 0;  // entries retention dropped so far
  struct Tail {
    std::shared_ptr<Log> log;
    std::shared_ptr<LogTail> tail;
    std::string from;
    std::optional<std::uint64_t> start;  // every offset from here on is owed, bar gaps
    std::vector<std::uint64_t> offsets;
    std::vector<Gap> gaps;
    std::size_t gaps_used = 0;
    bool closed = false, ended = false;
    bool acks = false;  // its on_entry acks the delivery too
  };

  // ---- the objects under test (declared last: destroyed first)
  struct Side {
    std::shared_ptr<client::Session> session;
    std::shared_ptr<Messaging> layer;
    std::shared_ptr<WorkQueue> jobs;
    std::shared_ptr<Log> log;
  };
  Side sides[2];
  std::vector<std::shared_ptr<Worker>> workers;
  std::deque<WorkItem> held;
  std::vector<std::shared_ptr<Tail>> tails;
  std::unique_ptr<PipeSim> pipe;
  std::unique_ptr<DirectSim> direct;

  Impl(LayerSim& s, bool spans)
      : driver(s.driver), world(s.world), traces(ledger, spans),
        observer(spans ? std::make_shared<SpansWanted>() : nullptr) {
    driver.run_world_clock(world);
    world.max_deliveries = 100000;
    for (int i = 0; i < 2; ++i) {
      driver.hosts[ports[i]] = test::FakeDriver::Host::broker;
      // Heartbeats of 1 s: a hung broker (Op::hang) is given up after 2 s, as `?heartbeat=1` does.
      driver.broker_configs[ports[i]] = test::FakeBroker::Config{.world = &world, .heartbeat_s = 1};
      client::SessionOptions o;
      o.client.connect_timeout = 3000ms;
      o.client.engine.handshake_timeout = 3000ms;
      o.client.engine.request_timeout = 2000ms;
      o.client.engine.close_timeout = 2000ms;
      o.backoff = client::Backoff{100ms, 2.0, 1000ms};
      o.jitter_seed = 7 + static_cast<std::uint64_t>(i);
      o.client.observer = observer;
      auto url = client::parse_url("amqp://guest:guest@fake:" + std::to_string(ports[i]) + "?heartbeat=1");
      auto& side = sides[i];
      side.session = client::Session::start(driver, *url, o);
      side.layer = *Messaging::create(side.session, {.queue_type = "quorum", .random_seed = 11 + static_cast<std::uint64_t>(i)});
      side.jobs = *WorkQueue::create(side.layer, {.name = "jobs", .attempts = attempts, .backoff = {.base = 100ms, .max = 400ms}});
      side.log = *Log::create(side.layer, {.name = "events"});
    }
    pipe = std::make_unique<PipeSim>(driver, world, ledger, traces, observer);
    direct = std::make_unique<DirectSim>(driver, world, ledger, traces, [this](int a) { return side(a).layer; }, observer);
    driver.run();
  }
  ~Impl() {
    direct.reset();
    pipe.reset();
    held.clear();
    tails.clear();
    workers.clear();
    for (auto& side : sides) side = Side{};
    driver.run();
  }

  Side& side(int a) { return sides[static_cast<std::size_t>(a) % 2]; }
  test::FakeBroker* broker(int a) { return driver.broker_on(ports[static_cast<std::size_t>(a) % 2]); }

  // ---- the work queue
  void put(int a) {
    const std::string id = "p" + std::to_string(++next_put);
    ++made[id][1];
    const int cb = reg("put " + id);
    const auto context = maybe_trace(a / 2);
    traces.sent(id, context);
    wire::FieldTable headers;
    if (context) add_trace(headers, *context);
    side(a).jobs->put({.body = "job:" + id, .headers = headers, .message_id = id, .timeout = 5000ms}, [this, cb, id](Result<void> r) {
      hit(cb);
      if (r) confirmed_puts.insert(id);
    });
  }
  // Another user's message in the work queue: its user_id is not ours to publish.
  void foreign() {
    if (!world.queues.contains(jobs_queue)) return;
    const std::string id = "f" + std::to_string(++next_foreign);
    BrokerWorld::Message m;
    m.body = "foreign:" + id;
    m.message_id = id;
    m.user_id = "mallory";
    m.delivery_mode = 2;
    m.routing_key = jobs_queue;
    // Traced or not (an untraced one's retry copies each start a trace of their own, with spans).
    if (const auto context = maybe_trace(next_foreign)) {
      traces.sent(id, context);
      add_trace(m.table.emplace(), *context);
    }
    ++made[id][1];
    foreign_puts.insert(id);
    world.enqueue(jobs_queue, std::move(m));
    world.dispatch();
  }
  void start_worker(int a, int b) {
    if (std::count_if(workers.begin(), workers.end(), [](const auto& w) { return w->live; }) >= 4) return;
    auto w = std::make_shared<Worker>();
    workers.push_back(w);
    std::weak_ptr<Worker> weak = w;
    const int cb = reg("worker " + std::to_string(workers.size() - 1) + " ready");
    side(a).jobs->consume(
        {.prefetch = static_cast<std::uint16_t>(1 + b % 3)}, [this, weak](WorkItem item) { on_item(weak, std::move(item)); },
        [this, cb, w](Result<std::shared_ptr<Subscription>> r) {
          hit(cb);
          if (r) w->sub = *r;
          else w->live = false;
        });
  }
  void on_item(const std::weak_ptr<Worker>& weak, WorkItem item) {
    const std::string id(item.message_id());
    const auto attempt = item.attempt();
    traces.seen("a worker (attempt " + std::to_string(attempt) + ")", id, item.message().trace());
    if (driver.now() != deliveries_at) {
      deliveries_at = driver.now();
      deliveries_now.clear();
    }
    if (item.message().redelivered()) ++deliveries_now[id];  // fresh copies at once are duplicates, not a loop
    if (!item.message().redelivered() && ++fresh[id][attempt] > made[id][attempt])
      violation("attempts: " + id + " delivered fresh at attempt " + std::to_string(attempt) + " " +
                std::to_string(fresh[id][attempt]) + " times, made " + std::to_string(made[id][attempt]));
    auto w = weak.lock();
    int mode = w && !finishing ? w->mode : done_mode;
    if (mode == release_mode && ++releases[id] > max_releases) mode = done_mode;
    if (std::getenv("LAYER_SIM_TRACE"))
      std::fprintf(stderr, "%lld ms: %s attempt %u%s to a worker in mode %d\n",
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(driver.now().time_since_epoch()).count()),
                   id.c_str(), attempt, item.message().redelivered() ? " (redelivered)" : "", mode);
    switch (mode) {
      case done_mode:
        if (item.done()) done_ids.insert(id);
        break;
      case retry_mode:
        retry(std::move(item));
        break;
      case release_mode:
        (void)item.release();
        break;
      case dead_letter_mode: {
        const int cb = reg("dead_letter " + id);
        item.dead_letter("sim", {}, [this, cb](Result<void>) { hit(cb); });
        break;
      }
      default:
        held.push_back(std::move(item));
    }
  }
  void retry(WorkItem item) {
    const std::string id(item.message_id());
    if (item.attempt() < attempts) ++made[id][item.attempt() + 1];
    const int cb = reg("retry " + id + " attempt " + std::to_string(item.attempt()));
    item.retry({.error = "sim"}, [this, cb](Result<Retried>) { hit(cb); });
  }
  void settle_held(int b) {
    if (held.empty()) return;
    auto item = std::move(held.front());
    held.pop_front();
    if (b % 2 == 0) {
      const std::string id(item.message_id());
      if (item.done()) done_ids.insert(id);
    } else {
      retry(std::move(item));
    }
  }
  void stop_worker(int a) {
    if (!workers.empty()) cancel(*workers[static_cast<std::size_t>(a) % workers.size()]);
  }
  void cancel(Worker& w) {
    if (!w.live || !w.sub) return;
    w.live = false;
    const int cb = reg("worker cancel");
    w.sub->cancel([this, cb](Result<void>) { hit(cb); });
  }

  // ---- the log
  const BrokerWorld::Stream& stream() { return world.streams[stream_queue]; }
  // The entry the stream holds at `offset` is `body` (unless retention dropped it).
  void check_entry(const std::string& who, std::uint64_t offset, std::string_view body) {
    const auto& s = stream();
    if (offset >= s.end()) return violation(who + ": offset " + std::to_string(offset) + " past the stream's end " + std::to_string(s.end()));
    if (offset < s.first) return;
    const auto& held_there = s.entries[static_cast<std::size_t>(offset - s.first)].body;
    if (held_there != body)
      violation(who + ": offset " + std::to_string(offset) + " holds '" + held_there + "', not '" + std::string(body) + "'");
  }
  static From from_of(int a, int b) {
    switch (b % 4) {
      case 0: return {.position = "first"};
      case 1: return {.position = "last"};
      case 2: return {.position = "next"};
      default: return {.offset = static_cast<std::uint64_t>(a)};
    }
  }
  static std::string text(const From& f) { return f.offset ? std::to_string(*f.offset) : std::string(f.position); }

  void append(int a) {
    const std::string body = "e" + std::to_string(++next_entry);
    const int cb = reg("append " + body);
    side(a).log->append(body, [this, cb, body](Result<std::uint64_t> r) {
      hit(cb);
      if (r) check_entry("append " + body, *r, body);
    });
  }
  void read(int a, int b) {
    if (!world.streams.contains(stream_queue)) return;
    const From from = from_of(a, b);
    const std::size_t max = 1 + static_cast<std::size_t>(a % 4);
    const std::uint64_t first_then = stream().first, truncated_then = truncated;
    const std::string who = "read from " + text(from) + " max " + std::to_string(max);
    const int cb = reg(who);
    side(a + b).log->read({.from = from, .max_entries = max}, [=, this](Result<Page> r) {
      hit(cb);
      if (!r) return;
      const auto& e = r->entries;
      if (e.size() > max) violation("reads: " + who + " gave " + std::to_string(e.size()) + " entries");
      for (std::size_t i = 0; i < e.size(); ++i) {
        check_entry(who, e[i].offset, e[i].message.body_text());
        if (i && e[i].offset != e[i - 1].offset + 1)
          violation("reads: " + who + " gave " + std::to_string(e[i - 1].offset) + " then " + std::to_string(e[i].offset));
        if (r->tip && e[i].offset > *r->tip) violation("reads: " + who + " gave " + std::to_string(e[i].offset) + " past its tip");
      }
      if (e.empty()) return;
      const bool untouched = truncated == truncated_then;  // retention did not move meanwhile
      if (from.offset && e.front().offset < *from.offset) violation("reads: " + who + " began at " + std::to_string(e.front().offset));
      if (untouched && from.offset && *from.offset >= first_then && e.front().offset != *from.offset)
        violation("reads: " + who + " began at " + std::to_string(e.front().offset));
      if (untouched && from.position == "first" && !from.offset && e.front().offset != first_then)
        violation("reads: " + who + " began at " + std::to_string(e.front().offset) + ", the oldest is " + std::to_string(first_then));
      if (r->complete && r->tip && e.back().offset != *r->tip)
        violation("reads: " + who + " complete at " + std::to_string(e.back().offset) + ", its tip " + std::to_string(*r->tip));
    });
  }
  void tail(int a, int b) {
    if (tails.size() >= 6) return;
    auto t = std::make_shared<Tail>();
    tails.push_back(t);
    const From from = from_of(a, b);
    t->from = text(from);
    t->acks = a % 2 == 1;
    std::weak_ptr<Tail> weak = t;
    t->log = *Log::create(side(a).layer, {.name = "events", .on_gap = [weak](const Gap& g) {
                                             if (auto t = weak.lock()) t->gaps.push_back(g);
                                           }});
    const int cb = reg("tail " + std::to_string(tails.size() - 1) + " from " + t->from);
    const int end_cb = reg("tail " + std::to_string(tails.size() - 1) + " on_end", false);
    // Declared first, as `warren log read --follow` does: a tail may start on an empty stream.
    t->log->declare([this, t, weak, from, cb, end_cb](Result<void> declared) {
      if (!declared) {
        hit(cb);
        t->ended = true;
        return;
      }
      follow(t, weak, from, cb, end_cb);
    });
  }
  void follow(const std::shared_ptr<Tail>& t, const std::weak_ptr<Tail>& weak, const From& from, int cb, int end_cb) {
    t->log->follow(
        from, [this, weak](const client::Delivery& d, std::uint64_t offset) { on_entry(weak, d, offset); },
        [this, weak, end_cb](const Error&) {
          hit(end_cb);
          if (auto t = weak.lock()) t->ended = true;
        },
        [this, cb, t, from](Result<std::shared_ptr<LogTail>> r) {
          hit(cb);
          if (!r) {
            t->ended = true;
            return;
          }
          t->tail = *r;
          if (!world.streams.contains(stream_queue)) return;
          // Owed from here: the oldest entry ("first"), the offset asked for, or whatever came
          // after the tail was ready ("next", "last": resolved against an earlier tip).
          t->start = from.offset ? *from.offset : from.position == "first" ? stream().first : stream().end();
        });
  }
  void on_entry(const std::weak_ptr<Tail>& weak, const client::Delivery& d, std::uint64_t offset) {
    auto t = weak.lock();
    if (!t) return;
    // Some applications ack what they were handed, as they would any delivery: the tail
    // acked it already, and the view must not settle it again.
    if (t->acks) (void)d.ack();
    const std::string who = "tail from " + t->from;
    check_entry(who, offset, d.body_text());
    std::optional<std::uint64_t> expected = t->offsets.empty() ? t->start : std::optional(t->offsets.back() + 1);
    if (!t->offsets.empty() && offset <= t->offsets.back())
      violation("tails: " + who + " handed on " + std::to_string(offset) + " after " + std::to_string(t->offsets.back()));
    else if (expected && offset > *expected) {
      // A skip: only where the log reported a gap that ends at this offset.
      bool reported = false;
      while (t->gaps_used < t->gaps.size())
        if (t->gaps[t->gaps_used++].oldest == offset) {
          reported = true;
          break;
        }
      if (!reported)
        violation("tails: " + who + " skipped " + std::to_string(*expected) + ".." + std::to_string(offset - 1) + " with no gap reported");
    }
    t->offsets.push_back(offset);
  }
  void close_tail(int a) {
    if (!tails.empty()) close(*tails[static_cast<std::size_t>(a) % tails.size()]);
  }
  void close(Tail& t) {
    if (t.closed || !t.tail) return;
    t.closed = true;
    const int cb = reg("tail close");
    t.tail->close([this, cb](Result<void>) { hit(cb); });
  }

  // ---- steps
  void step(const Cmd& c) {
    switch (c.op) {
      case Op::put: put(c.a); break;
      case Op::foreign: foreign(); break;
      case Op::worker: start_worker(c.a, c.b); break;
      case Op::mode:
        if (!workers.empty()) workers[static_cast<std::size_t>(c.a) % workers.size()]->mode = c.b % 5;
        break;
      case Op::settle_held: settle_held(c.b); break;
      case Op::stop_worker: stop_worker(c.a); break;
      case Op::append: append(c.a); break;
      case Op::read: read(c.a, c.b); break;
      case Op::tail: tail(c.a, c.b); break;
      case Op::close_tail: close_tail(c.a); break;
      case Op::advance: driver.advance(advances[static_cast<std::size_t>(c.b) % 6]); break;
      case Op::cut: driver.cut(ports[static_cast<std::size_t>(c.a) % 2]); break;
      case Op::hang:
        if (auto* b = broker(c.a)) b->go_silent();
        break;
      case Op::levels_down:
        if (c.b % 2 == 1) world.bring_up_all();
        else
          for (auto level : delay_levels(sides[0].jobs->options().backoff)) world.take_down(sides[0].jobs->retry_queue(level));
        break;
      case Op::close_channel:
        if (auto* b = broker(c.a)) {
          auto open = b->open_channels();
          if (!open.empty()) b->close_channel(open[static_cast<std::size_t>(c.b) % open.size()], 406, "PRECONDITION_FAILED - sim");
        }
        break;
      case Op::hold_confirms:
        if (auto* b = broker(c.a)) b->hold_confirms(c.b % 2 == 1);
        break;
      case Op::truncate: truncated += world.truncate(stream_queue, 1 + static_cast<std::size_t>(c.b) % 3); break;
      case Op::pipe_start: pipe->start(1 + c.a % 2, 1 + c.b % 5); break;
      case Op::pipe_put: pipe->put(c.b % 6, c.a % 2 == 1); break;
      case Op::pipe_release: pipe->release(); break;
      case Op::pipe_drain: pipe->drain(); break;
      case Op::pipe_cut: pipe->cut(); break;
      case Op::pipe_hold: pipe->hold(c.b % 2 == 1); break;
      case Op::member: direct->member(c.a, 1 + c.b % 3); break;
      case Op::inbox: direct->inbox(c.a); break;
      case Op::backplane: direct->backplane(c.a); break;
      case Op::send: direct->send(c.a, c.b); break;
      case Op::app_mode: direct->mode(c.a, c.b); break;
      case Op::settle_taken: direct->settle_taken(c.b); break;
      case Op::rpc_serve: direct->rpc_serve(); break;
      case Op::rpc_call: direct->rpc_call(c.a); break;
    }
    driver.run();
    check();
  }

  // What must hold after every step.
  void check() {
    for (const auto& t : world.user_id_refused) violation("user_id: the broker refused a publish: " + t);
    world.user_id_refused.clear();
    for (const auto& t : world.unknown_tags) violation("settles: a delivery was settled twice: " + t);
    // Nothing the layers declare may be what RabbitMQ 4.3 refuses by default (issue 38).
    for (const auto& t : world.denied_in_4_3) violation("4.3: the layers asked for what RabbitMQ 4.3 refuses: " + t);
    world.denied_in_4_3.clear();
    world.unknown_tags.clear();
    for (const auto& k : world.stream_rejected) violation("stream acks: a stream delivery was rejected or nacked: " + k);
    world.stream_rejected.clear();
    for (const auto& k : world.bounced) violation("puts: a message bounced between broker and client " + std::to_string(world.max_deliveries) + " times: " + k);
    world.bounced.clear();
    pipe->check();
    direct->check();
    for (const auto& [id, n] : deliveries_now)
      if (n > hot_loop) violation("puts: " + id + " was redelivered " + std::to_string(n) + " times at one instant (a hot loop)");
    throw_if_broken();
  }
  void throw_if_broken() {
    if (violations.empty()) return;
    std::ostringstream os;
    for (const auto& v : violations) os << v << "\n";
    throw Violation(os.str());
  }

  void finish() {
    finishing = true;
    driver.heal();
    world.bring_up_all();
    driver.run();
    while (!held.empty()) settle_held(0);
    if (std::none_of(workers.begin(), workers.end(), [](const auto& w) { return w->live; })) start_worker(1, 0);
    for (int i = 0; i < 40; ++i) driver.advance(1000ms);
    check();

    // Every put that was confirmed, and every message another user put, ended done or in the
    // dead-letter queue.
    std::set<std::string> dead;
    for (const auto& m : world.queues[dead_letter_queue]) {
      dead.insert(m.message_id);
      traces.seen("the dead-letter queue", m.message_id, m);
    }
    std::set<std::string> owed = confirmed_puts;
    owed.insert(foreign_puts.begin(), foreign_puts.end());
    for (const auto& id : owed)
      if (!done_ids.contains(id) && !dead.contains(id)) {
        std::string where;
        for (const auto& [name, q] : world.queues)
          for (const auto& m : q)
            if (m.message_id == id) where += " " + name;
        violation("puts: " + id + " is neither done nor dead-lettered (queued in:" + (where.empty() ? " nothing" : where) + ")");
      }
    // Every live tail had every retained offset from where it started, bar reported gaps (one
    // retention dropped before the tail reached it is a skip only once a later entry comes,
    // and on_entry checks that).
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const auto& t = *tails[i];
      if (t.closed || t.ended || !t.start) continue;
      std::set<std::uint64_t> had(t.offsets.begin(), t.offsets.end());
      for (std::uint64_t o = std::max(*t.start, stream().first); o < stream().end(); ++o) {
        if (had.contains(o)) continue;
        const bool in_gap = std::any_of(t.gaps.begin(), t.gaps.end(), [o](const Gap& g) { return g.asked <= o && o < g.oldest; });
        if (!in_gap) {
          violation("tails: tail " + std::to_string(i) + " from " + t.from + " never had offset " + std::to_string(o) + " (the stream ends at " +
                    std::to_string(stream().end()) + ")");
          break;
        }
      }
    }
    pipe->finish();
    direct->finish();
    throw_if_broken();

    // Close everything; every callback then ran exactly once and the loop is quiet.
    for (auto& t : tails) close(*t);
    for (auto& w : workers) cancel(*w);
    driver.advance(5000ms);
    for (auto& s : sides) {
      const int cb = reg("layer close");
      s.layer->close([this, cb](Result<void>) { hit(cb); });
    }
    pipe->close();
    direct->close();
    driver.advance(5000ms);
    for (auto& s : sides) {
      const int cb = reg("session close");
      s.session->close([this, cb](Result<void>) { hit(cb); });
    }
    driver.advance(60000ms);
    ledger.check_all_ran();
    if (driver.armed_timers() != 0) violation("quiet loop: " + std::to_string(driver.armed_timers()) + " timers armed after everything closed");
    if (driver.open_streams() != 0) violation("quiet loop: " + std::to_string(driver.open_streams()) + " streams open after everything closed");
    if (std::getenv("LAYER_SIM_STATS"))
      std::fprintf(stderr, "puts %zu confirmed, %zu foreign, %zu done, %zu dead-lettered; stream %llu..%llu; %zu tails; %zu callbacks\n",
                   confirmed_puts.size(), foreign_puts.size(), done_ids.size(), world.queues[dead_letter_queue].size(),
                   static_cast<unsigned long long>(stream().first), static_cast<unsigned long long>(stream().end()), tails.size(),
                   ledger.callbacks.size());
    if (std::getenv("LAYER_SIM_STATS"))
      for (const auto& t : tails) {
        std::fprintf(stderr, "  tail from %s start %lld ended %d closed %d gaps %zu offsets", t->from.c_str(),
                     t->start ? static_cast<long long>(*t->start) : -1LL, t->ended, t->closed, t->gaps.size());
        for (auto o : t->offsets) std::fprintf(stderr, " %llu", static_cast<unsigned long long>(o));
        std::fprintf(stderr, "\n");
      }
    throw_if_broken();
  }
};

LayerSim::LayerSim(bool spans) : impl_(std::make_unique<Impl>(*this, spans)) {}
LayerSim::~LayerSim() = default;

void LayerSim::step(const Cmd& c) { impl_->step(c); }
void LayerSim::finish() { impl_->finish(); }
void LayerSim::run(const std::vector<Cmd>& cmds) {
  for (const auto& c : cmds) step(c);
  finish();
}

}  // namespace warren::layersim

// The layer simulation's pipeline (see pipe_sim.hpp).
#include "sim/pipe_sim.hpp"

#include <set>

#include "support/nested_headers.hpp"
#include "warren/client/url.hpp"

namespace warren::layersim {

using namespace std::chrono_literals;
using test::BrokerWorld;

namespace {

const std::string source = "pipe.src", output = "pipe.out", dead_letters = "pipe.dlq";
constexpr engine::Duration publish_deadline = 30s;
constexpr engine::Duration drain_deadline = 5s;

}  // namespace

PipeSim::PipeSim(test::FakeDriver& driver, test::BrokerWorld& world, Ledger& ledger, Traces& traces,
                 std::shared_ptr<client::Observer> observer)
    : driver_(driver), world_(world), ledger_(ledger), traces_(traces), observer_(std::move(observer)) {
  driver_.hosts[port] = test::FakeDriver::Host::broker;
  driver_.broker_configs[port] = test::FakeBroker::Config{.world = &world_};
  for (const auto& q : {source, output, dead_letters}) world_.queues[q];
}

PipeSim::~PipeSim() = default;

void PipeSim::start(int concurrency, int prefetch) {
  if (running_) return;
  running_ = true;
  auto url = client::parse_url("amqp://guest:guest@fake:" + std::to_string(port));
  const int ready = ledger_.reg("pipeline start");
  client::ClientOptions o;
  o.connect_timeout = 3000ms;
  o.engine.handshake_timeout = 3000ms;
  o.engine.request_timeout = 2000ms;
  o.engine.close_timeout = 2000ms;
  o.observer = observer_;
  // Found by its index when it is ready (a handle captured here would keep it alive forever).
  const std::size_t index = connections_.size();
  auto c = client::Connection::connect(driver_, *url, o, [this, ready, index, concurrency, prefetch](Result<void> r) {
    if (!r) {
      ledger_.hit(ready);
      running_ = false;
      return;
    }
    const int stopped = ledger_.reg("pipeline on_stopped");
    pipe_ = pipeline::QueuePipeline::start(
        connections_.at(index),
        {.core = {.name = "sim",
                  .concurrency = static_cast<std::size_t>(concurrency),
                  .on_error = [](const pipeline::Record&, const pipeline::RecordError& e) {
                    return e.message == "once" ? pipeline::Outcome::requeued : pipeline::Outcome::dead_lettered;
                  }},
         .source = {.queue = source, .prefetch = static_cast<std::uint16_t>(prefetch)},
         .destination = pipeline::DestinationOptions{.routing_key = output, .timeout = publish_deadline},
         .dead_letter = pipeline::DeadLetterOptions{.exchange = "", .routing_key = dead_letters, .timeout = publish_deadline},
         .on_outcome = [this](const pipeline::Record& r, const pipeline::Finished& f) { on_outcome(r, f); },
         .on_stopped = [this, stopped](const std::optional<std::string>&) {
           ledger_.hit(stopped);
           running_ = false;
         }},
        {pipeline::Stage::async([this](pipeline::Record& r, pipeline::StageDone done) {
          switch (kind_of_.count(r.body) ? kind_of_[r.body] : completes) {
            case fails: return done({.error = pipeline::RecordError{"sim", "fails"}});
            case skipped: return done({.verdict = pipeline::Verdict::skip});
            case held: return held_.push_back(std::move(done));
            case fails_once:
              if (failures_[r.body]++ == 0) return done({.error = pipeline::RecordError{"sim", "once"}});
              return done({});
            default: return done({});
          }
        })},
        [this, ready](Result<void> r) {
          ledger_.hit(ready);
          if (!r) running_ = false;  // on_stopped is not told: it never started
        });
  });
  connections_.push_back(std::move(c));
}

void PipeSim::put(int kind, bool foreign) {
  BrokerWorld::Message m;
  m.body = "r" + std::to_string(++next_record_);
  m.routing_key = source;
  if (foreign) m.user_id = "mallory";
  // Nested 100 deep: the client's decoder stops at 64, so the record cannot be built and the
  // pipeline dead-letters the delivery outside its core.
  if (kind == undecodable) {
    m.headers = test::nested_headers(100);
  } else {
    // Traced or not (an untraced one's outputs each start a trace of their own, with spans).
    if (const auto context = maybe_trace(next_record_)) {
      traces_.sent(m.body, context);
      add_trace(m.table.emplace(), *context);
    }
  }
  kind_of_[m.body] = kind;
  world_.enqueue(source, std::move(m));
  world_.dispatch();
}

void PipeSim::release() {
  if (held_.empty()) return;
  auto done = std::move(held_.front());
  held_.erase(held_.begin());
  done({});
}

void PipeSim::drain() {
  if (!pipe_ || !running_) return;
  const int cb = ledger_.reg("pipeline drain");
  const auto asked = driver_.now();
  const int cuts = cuts_;
  pipe_->drain(drain_deadline, [this, cb, asked, cuts](Result<void>) {
    ledger_.hit(cb);
    if (driver_.now() - asked < drain_deadline) return;
    // Past its deadline the drain closes the channels with records in flight: the broker
    // requeues one whose output was published but not confirmed yet, to be done again.
    duplicates_possible_ = true;
    // Something must have been in flight to wait for: a record its stage holds, a confirm the
    // broker holds, a connection that went away. Otherwise the drain waited for nothing.
    if (held_.empty() && !held_since_ && cuts == cuts_)
      ledger_.violation("pipeline: a drain waited out its deadline with nothing in flight to wait for");
  });
}

void PipeSim::cut() {
  if (driver_.cut(port)) {
    duplicates_possible_ = true;
    ++cuts_;
  }
}

void PipeSim::hold(bool on) {
  auto* b = driver_.broker_on(port);
  if (!b) return;
  faulted_by_time();
  b->hold_confirms(on);
  if (on && !held_since_) held_since_ = driver_.now();
  if (!on) held_since_.reset();
}

void PipeSim::faulted_by_time() {
  // Confirms held past a publish's deadline: the record is tried again, and may be twice.
  if (held_since_ && driver_.now() - *held_since_ >= publish_deadline) duplicates_possible_ = true;
}

void PipeSim::on_outcome(const pipeline::Record& record, const pipeline::Finished& finished) {
  using pipeline::Outcome;
  auto it = kind_of_.find(record.body);
  if (it == kind_of_.end()) {
    // The undecodable one's record has no body to go by: its outcome must be a dead-letter.
    if (finished.outcome != Outcome::dead_lettered)
      ledger_.violation(std::string("pipeline: a record it could not decode ended ") + pipeline::to_string(finished.outcome));
    return;
  }
  std::set<Outcome> allowed;
  switch (it->second) {
    case completes: case held: allowed = {Outcome::completed}; break;
    case fails: allowed = {Outcome::dead_lettered}; break;
    case skipped: allowed = {Outcome::skipped}; break;
    case undecodable: allowed = {Outcome::dead_lettered}; break;
    case fails_once: allowed = {Outcome::requeued, Outcome::completed}; break;
    default: break;
  }
  // A failed publish (a nack, a confirm past its deadline, a lost channel) is the record's
  // error: dead-lettered by the policy, whatever the stage said.
  allowed.insert(Outcome::dead_lettered);
  if (!allowed.contains(finished.outcome))
    ledger_.violation("pipeline: " + record.body + " (kind " + std::to_string(it->second) + ") ended " +
                      pipeline::to_string(finished.outcome));
}

void PipeSim::check() {
  faulted_by_time();
  if (auto* b = driver_.broker_on(port)) {
    for (const auto& s : b->settles)
      if (s.multiple) ledger_.violation("pipeline: a multiple " + s.method + " up to tag " + std::to_string(s.delivery_tag));
    b->settles.clear();
  }
}

void PipeSim::finish() {
  hold(false);
  while (!held_.empty()) release();
  driver_.advance(1000ms);
  if (!running_ && !world_.queues[source].empty()) start(1, 5);
  for (int i = 0; i < 40 && running_; ++i) {
    driver_.advance(1000ms);
    while (!held_.empty()) release();
    if (world_.queues[source].empty() && pipe_ && pipe_->status().in_flight == 0) break;
  }
  check();
  drain();
  driver_.advance(10000ms);
  check();
  // Every record is where its outcome puts it.
  std::map<std::string, int> in_output, in_dead, in_source;
  for (const auto& m : world_.queues[output]) {
    ++in_output[m.body];
    traces_.seen("the pipeline's output", m.body, m);
  }
  for (const auto& m : world_.queues[dead_letters]) {
    ++in_dead[m.body];
    traces_.seen("the pipeline's dead-letter queue", m.body, m);
  }
  for (const auto& m : world_.queues[source]) ++in_source[m.body];
  for (const auto& [body, kind] : kind_of_) {
    if (in_source[body]) {
      ledger_.violation("pipeline: " + body + " still in its source after the pipeline ran 40 s");
      continue;
    }
    const int out = in_output[body], dead = in_dead[body];
    const bool goes_out = kind == completes || kind == held || kind == fails_once;
    const bool goes_dead = kind == fails || kind == undecodable;
    std::string where = " (in the output " + std::to_string(out) + " times, dead-lettered " + std::to_string(dead) + ")";
    if (goes_out && out == 0 && dead == 0) ledger_.violation("pipeline: " + body + " was lost" + where);
    if (goes_dead && dead == 0) ledger_.violation("pipeline: " + body + " was never dead-lettered" + where);
    if (kind == skipped && (out || dead)) ledger_.violation("pipeline: skipped " + body + " was published" + where);
    if (!duplicates_possible_ && out + dead > 1)
      ledger_.violation("pipeline: " + body + " was published more than once with no fault to explain it" + where);
  }
}

void PipeSim::close() {
  for (auto& c : connections_) {
    const int cb = ledger_.reg("pipeline connection close");
    c->close([this, cb](Result<void>) { ledger_.hit(cb); });
  }
}

}  // namespace warren::layersim

#include "warren/pipeline/status_board.hpp"

#include <string_view>
#include <variant>

namespace warren::pipeline {
namespace {

State state_from(std::string_view s) {
  if (s == "running") return State::running;
  if (s == "draining") return State::draining;
  if (s == "stopped") return State::stopped;
  return State::starting;
}

std::string text(const wire::FieldTable& t, std::string_view key) {
  const wire::FieldValue* v = t.find(key);
  if (!v) return {};
  if (auto s = std::get_if<std::string>(&v->value)) return *s;
  return {};
}

std::uint64_t number(const wire::FieldTable& t, std::string_view key) {
  const wire::FieldValue* v = t.find(key);
  if (!v) return 0;
  if (auto n = std::get_if<std::int64_t>(&v->value)) return *n < 0 ? 0 : static_cast<std::uint64_t>(*n);
  return 0;
}

wire::FieldTable encode(const std::string& worker, const Status& s) {
  auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  return {{"worker", worker},
          {"pipeline", s.pipeline},
          {"queue", s.queue},
          {"state", std::string(to_string(s.state))},
          {"in_flight", n(s.in_flight)},
          {"completed", n(s.completed)},
          {"skipped", n(s.skipped)},
          {"dead_lettered", n(s.dead_lettered)},
          {"failed", n(s.failed)},
          {"dropped", n(s.dropped)},
          {"slow", n(s.slow)}};
}

}  // namespace

StatusBoard::StatusBoard(std::shared_ptr<client::Connection> connection, StatusBoardOptions options,
                         std::function<Status()> own)
    : conn_(std::move(connection)), options_(std::move(options)), own_(std::move(own)) {}

StatusBoard::~StatusBoard() {
  if (timer_) timer_->cancel();
}

std::shared_ptr<StatusBoard> StatusBoard::start(std::shared_ptr<client::Connection> connection,
                                                StatusBoardOptions options, std::function<Status()> own,
                                                client::Callback<void> ready) {
  std::shared_ptr<StatusBoard> b(new StatusBoard(std::move(connection), std::move(options), std::move(own)));
  auto self = b;
  b->conn_->open_channel([self, ready](Result<client::Channel> ch) {
    if (!ch) return ready(ch.error());
    self->channel_ = *ch;
    self->channel_.exchange_declare({.name = self->options_.exchange, .type = "topic"}, [self, ready](Result<void> ex) {
      if (!ex) return ready(ex.error());
      self->channel_.queue_declare({.exclusive = true, .auto_delete = true}, [self, ready](Result<client::QueueDeclared> q) {
        if (!q) return ready(q.error());
        const Status own = self->own_();
        const std::string key = own.pipeline + "/" + own.queue;
        self->channel_.queue_bind({.queue = q->name, .exchange = self->options_.exchange, .routing_key = key},
                                  [self, ready, name = q->name](Result<void> bound) {
                                    if (!bound) return ready(bound.error());
                                    std::weak_ptr<StatusBoard> weak = self;
                                    self->channel_.consume(
                                        {.queue = name, .auto_ack = true},
                                        [weak](const client::Delivery& d) {
                                          if (auto s = weak.lock()) s->receive(d);
                                        },
                                        [self, ready](Result<client::Consumer> c) {
                                          if (!c) return ready(c.error());
                                          self->consumer_ = std::move(*c);
                                          self->publish();
                                          ready({});
                                        });
                                  });
      });
    });
  });
  return b;
}

void StatusBoard::publish() {
  if (!channel_.is_open()) return;
  const Status s = own_();
  const auto now = conn_->driver().now();
  std::erase_if(seen_, [&](const auto& entry) { return now - entry.second.at > options_.interval * 3; });
  seen_[options_.worker] = {s, now};
  const wire::FieldTable headers = encode(options_.worker, s);
  const auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.interval * 3).count();
  const std::string expiration = std::to_string(ttl_ms);
  const std::string key = s.pipeline + "/" + s.queue;
  (void)channel_.publish({.exchange = options_.exchange,
                          .routing_key = key,
                          .properties = {.headers = headers, .expiration = expiration}},
                         {});
  if (stopped_) return;
  if (!timer_) {
    std::weak_ptr<StatusBoard> weak = weak_from_this();
    timer_ = conn_->driver().timer([weak] {
      if (auto s = weak.lock()) s->publish();
    });
  }
  timer_->arm(conn_->driver().now() + options_.interval);
}

void StatusBoard::receive(const client::Delivery& d) {
  const auto& p = d.properties();
  if (!p.headers) return;
  auto table = p.headers->to_table();
  if (!table) return;  // not one of ours: ignored
  const std::string worker = text(*table, "worker");
  if (worker.empty() || worker == options_.worker) return;
  Status s;
  s.pipeline = text(*table, "pipeline");
  s.queue = text(*table, "queue");
  s.state = state_from(text(*table, "state"));
  s.in_flight = number(*table, "in_flight");
  s.completed = number(*table, "completed");
  s.skipped = number(*table, "skipped");
  s.dead_lettered = number(*table, "dead_lettered");
  s.failed = number(*table, "failed");
  s.dropped = number(*table, "dropped");
  s.slow = number(*table, "slow");
  seen_[worker] = {s, conn_->driver().now()};
}

std::vector<WorkerStatus> StatusBoard::workers() const {
  std::vector<WorkerStatus> out;
  const auto now = conn_->driver().now();
  for (const auto& [name, seen] : seen_)
    if (name == options_.worker || now - seen.at <= options_.interval * 3) out.push_back({name, seen.status});
  return out;
}

void StatusBoard::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (timer_) timer_->cancel();
  publish();  // the last report: this worker's final state
}

}  // namespace warren::pipeline

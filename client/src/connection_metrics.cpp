#include "connection_metrics.hpp"

#include <algorithm>

#include "error_type.hpp"
#include "warren/engine/describe.hpp"

namespace warren::client::detail {

namespace {

// OpenTelemetry's messaging attributes: every messaging.* series names its system.
const MetricLabel rabbitmq{"messaging.system", "rabbitmq"};

// The labels of a queue's series for `operation`. A queue the broker named (amq.gen-…; no
// client may declare a name under amq.) is one of many that come and go: exclusive, one per
// connection, a new one at every recovery. Its name as a label would make a series per queue
// that outlives it, without bound in a long-running service. OpenTelemetry keeps
// messaging.destination.name to names of low cardinality and offers the template and the
// anonymous flag for the rest, so every such queue shares one series.
MetricLabels queue_labels(std::string_view queue, std::string_view operation) {
  if (queue.starts_with("amq.gen-"))
    return {rabbitmq,
            {"messaging.destination.anonymous", "true"},
            {"messaging.destination.template", "amq.gen-*"},
            {"messaging.operation.name", std::string(operation)}};
  return {rabbitmq, {"messaging.destination.name", std::string(queue)}, {"messaging.operation.name", std::string(operation)}};
}

// Every series a connection writes (docs/observability.md has them in a table).
namespace described {
constexpr MetricDescription sent_messages{"messaging.client.sent.messages", "{message}",
                                          "Messages a producer handed to the connection (publish), by exchange"};
constexpr MetricDescription consumed_messages{"messaging.client.consumed.messages", "{message}",
                                              "Messages delivered to a consumer or fetched by basic.get, by queue"};
constexpr MetricDescription operation_duration{
    "messaging.client.operation.duration", "s",
    "A publish's time from the call to its outcome: the broker's confirm in confirm mode, the write otherwise"};
constexpr MetricDescription process_duration{"messaging.process.duration", "s",
                                             "Time a push consumer's callback took per delivery, by queue"};
constexpr MetricDescription connections{"warren.connections", "{connection}", "Connections open"};
constexpr MetricDescription channels{"warren.channels", "{channel}", "Channels open"};
constexpr MetricDescription blocked{"warren.connection.blocked", "{connection}",
                                    "Connections the broker has blocked (a resource alarm)"};
constexpr MetricDescription blocked_time{"warren.connection.blocked.duration", "s",
                                         "How long each block lasted, from connection.blocked to connection.unblocked"};
constexpr MetricDescription in_flight{"warren.publish.in_flight", "{message}",
                                      "Publishes made whose outcome is not known yet (confirms in flight)"};
constexpr MetricDescription outcomes{"warren.publish.settled", "{message}",
                                     "Publishes by outcome: confirmed, nacked, returned (unroutable), timed_out, failed, written"};
constexpr MetricDescription io{"warren.connection.io", "By", "Bytes read from and written to the broker"};
constexpr MetricDescription settles{"warren.delivery.settled", "{call}",
                                    "ack, nack and reject calls (a multiple ack counts once), and whether they requeued"};
}  // namespace described

}  // namespace

ConnectionMetrics::ConnectionMetrics(std::shared_ptr<Metrics> metrics) : metrics_(std::move(metrics)) {
  Metrics& m = *metrics_;
  connections_ = &m.gauge(described::connections);
  channels_ = &m.gauge(described::channels);
  blocked_ = &m.gauge(described::blocked);
  blocked_time_ = &m.histogram(described::blocked_time);
  in_flight_ = &m.gauge(described::in_flight);
  received_bytes_ = &m.counter(described::io, {{"network.io.direction", "receive"}});
  sent_bytes_ = &m.counter(described::io, {{"network.io.direction", "transmit"}});
  for (auto o : {engine::PublishOutcome::written, engine::PublishOutcome::confirmed, engine::PublishOutcome::nacked,
                 engine::PublishOutcome::returned, engine::PublishOutcome::timed_out, engine::PublishOutcome::failed})
    outcomes_[static_cast<int>(o)] = &m.counter(described::outcomes, {{"outcome", std::string(engine::to_string(o))}});
  publish_duration_ = &m.histogram(described::operation_duration, {rabbitmq, {"messaging.operation.name", "publish"}});
  const char* names[] = {"ack", "nack", "reject"};
  for (int how = 0; how < 3; ++how)
    for (int requeue = 0; requeue < 2; ++requeue)
      settles_[how][requeue] = &m.counter(
          described::settles, {{"messaging.operation.name", names[how]}, {"requeue", requeue ? "true" : "false"}});
}

ConnectionMetrics::~ConnectionMetrics() { ended(); }

void ConnectionMetrics::connected() {
  if (connected_) return;
  connected_ = true;
  connections_->add(1);
}

void ConnectionMetrics::ended() {
  if (connected_) connections_->add(-1);
  connected_ = false;
  channels_->add(-channels_open_);
  channels_open_ = 0;
  in_flight_->add(-publishes_in_flight_);
  publishes_in_flight_ = 0;
  if (blocked_since_) blocked_->add(-1);
  blocked_since_.reset();
}

void ConnectionMetrics::channel_opened() {
  ++channels_open_;
  channels_->add(1);
}

void ConnectionMetrics::channel_closed() {
  if (channels_open_ == 0) return;
  --channels_open_;
  channels_->add(-1);
}

void ConnectionMetrics::blocked(engine::Instant now) {
  if (blocked_since_) return;
  blocked_since_ = now;
  blocked_->add(1);
}

void ConnectionMetrics::unblocked(engine::Instant now) {
  if (!blocked_since_) return;
  blocked_time_->record(now - *blocked_since_);
  blocked_since_.reset();
  blocked_->add(-1);
}

Counter& ConnectionMetrics::sent_to(std::string_view exchange) {
  if (last_sent_ && exchange == last_exchange_) return *last_sent_;
  last_exchange_.assign(exchange);
  last_sent_ = &metrics_->counter(described::sent_messages, {rabbitmq,
                                                  {"messaging.destination.name", last_exchange_},
                                                  {"messaging.operation.name", "publish"}});
  return *last_sent_;
}

void ConnectionMetrics::published(std::string_view exchange) {
  sent_to(exchange).add();
  ++publishes_in_flight_;
  in_flight_->add(1);
}

void ConnectionMetrics::publish_refused(std::string_view exchange, const Error& why) {
  metrics_->counter(described::sent_messages, {rabbitmq,
                                    {"messaging.destination.name", std::string(exchange)},
                                    {"messaging.operation.name", "publish"},
                                    {"error.type", std::string(error_type(why))}})
      .add();
}

void ConnectionMetrics::settled(const engine::PublishDone& done, engine::Instant now) {
  const std::uint64_t n = done.count;
  outcomes_[static_cast<int>(done.outcome)]->add(n);
  const auto taken = std::min<std::int64_t>(static_cast<std::int64_t>(n), publishes_in_flight_);
  publishes_in_flight_ -= taken;
  in_flight_->add(-taken);
  // A range settled by one multiple ack counts each of its publishes at the first one's
  // time: an upper bound for the others (RabbitMQ acks one by one when it is not busy).
  if (done.published_at != engine::Instant{}) publish_duration_->record(now - done.published_at, n);
}

SubscriptionMetrics ConnectionMetrics::subscription(std::string_view queue) {
  return {&metrics_->counter(described::consumed_messages, queue_labels(queue, "deliver")),
          &metrics_->histogram(described::process_duration, queue_labels(queue, "process"))};
}

void ConnectionMetrics::got(std::string_view queue) {
  metrics_->counter(described::consumed_messages, queue_labels(queue, "get")).add();
}

void ConnectionMetrics::settled_delivery(Settle how, bool requeue) {
  settles_[static_cast<int>(how)][requeue ? 1 : 0]->add();
}

}  // namespace warren::client::detail

// Distributed status: the workers of one pipeline see each other. Each worker publishes its
// status (typed headers, no body) every interval to a topic exchange (default
// "warren.pipeline.status", declared non-durable) with "<pipeline name>/<queue>" as the
// routing key (one pipeline: one name on one queue), and reads everyone's through an exclusive server-named queue bound to that key. A
// worker not heard from for three intervals is forgotten; each status message expires after
// three intervals too, so nothing piles up. The lease a worker reports (the queue it
// consumes) is observational: RabbitMQ still decides which consumer gets which message.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/pipeline/queue_pipeline.hpp"

namespace warren::pipeline {

struct StatusBoardOptions {
  std::string exchange = "warren.pipeline.status";
  std::string worker{};  // this worker's name (host:pid, say); must be unique per pipeline
  engine::Duration interval = std::chrono::seconds(1);
};

// One worker's last report.
struct WorkerStatus {
  std::string worker{};
  Status status{};  // status.queue is the worker's lease
};

class StatusBoard : public std::enable_shared_from_this<StatusBoard> {
 public:
  // `own` is asked for this worker's status at each interval. `ready` runs once subscribed.
  [[nodiscard]] static std::shared_ptr<StatusBoard> start(std::shared_ptr<client::Connection> connection,
                                                          StatusBoardOptions options, std::function<Status()> own,
                                                          client::Callback<void> ready);
  ~StatusBoard();

  // Every worker heard from within three intervals, this one included, by name.
  [[nodiscard]] std::vector<WorkerStatus> workers() const;
  // How many workers it holds a report of: the forgotten ones are dropped at each interval,
  // so a long-lived worker among short-lived ones does not grow with every name it heard.
  [[nodiscard]] std::size_t remembered() const noexcept { return seen_.size(); }
  // Publishes a last report now (a stopped worker says so) and stops publishing.
  void stop();

 private:
  StatusBoard(std::shared_ptr<client::Connection> connection, StatusBoardOptions options, std::function<Status()> own);
  void publish();
  void receive(const client::Delivery& d);

  std::shared_ptr<client::Connection> conn_;
  StatusBoardOptions options_;
  std::function<Status()> own_;
  client::Channel channel_;
  client::Consumer consumer_;  // held: dropping it would cancel the subscription
  std::unique_ptr<client::Timer> timer_;
  struct Seen {
    Status status{};
    engine::Instant at{};
  };
  std::map<std::string, Seen> seen_;
  bool stopped_ = false;
};

}  // namespace warren::pipeline

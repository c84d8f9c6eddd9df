// The layer simulation's pipeline (tests/sim/layers.hpp): a QueuePipeline from "pipe.src" to
// "pipe.out" through the default exchange, dead-lettering into "pipe.dlq", on a plain
// connection of its own to the model broker (port 5003), restarted once it stopped as a
// service manager restarts `warren pipe`. Each record says in its body what its stage does;
// the checks are the pipeline invariant of layers.hpp.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "sim/ledger.hpp"
#include "sim/traces.hpp"
#include "warren/pipeline/queue_pipeline.hpp"

namespace warren::layersim {

class PipeSim {
 public:
  static constexpr std::uint16_t port = 5003;
  PipeSim(test::FakeDriver& driver, test::BrokerWorld& world, Ledger& ledger, Traces& traces,
          std::shared_ptr<client::Observer> observer);
  ~PipeSim();

  void start(int concurrency, int prefetch);
  void put(int kind, bool foreign);
  void release();
  void drain();
  void cut();
  void hold(bool on);
  void check();  // after every step
  // At the end: what is still held completes, a pipeline consumes what is left and drains;
  // every record is then where its outcome puts it. Then its connections close.
  void finish();
  void close();

 private:
  enum Kind { completes, fails, skipped, held, undecodable, fails_once, kinds };
  void on_outcome(const pipeline::Record& record, const pipeline::Finished& finished);
  void faulted_by_time();

  test::FakeDriver& driver_;
  test::BrokerWorld& world_;
  Ledger& ledger_;
  Traces& traces_;
  std::shared_ptr<client::Observer> observer_;
  std::vector<std::shared_ptr<client::Connection>> connections_;
  std::shared_ptr<pipeline::QueuePipeline> pipe_;
  bool running_ = false;  // started, and not stopped yet
  std::vector<pipeline::StageDone> held_;
  std::map<std::string, int> kind_of_;  // by body
  std::map<std::string, int> failures_;  // fails_once: how often it failed
  int next_record_ = 0;
  // Whether a fault could have duplicated a record (a cut, a closed channel, confirms held
  // past a publish's deadline): then a record may be published more than once.
  bool duplicates_possible_ = false;
  int cuts_ = 0;
  std::optional<engine::Instant> held_since_;
};

}  // namespace warren::layersim

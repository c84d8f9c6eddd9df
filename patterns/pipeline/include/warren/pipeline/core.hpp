// The pipeline core: a chain of stages (plain C++ callables) run over records, at most
// `concurrency` records in flight, and one terminal outcome per record. Transport-agnostic:
// it knows nothing of queues or channels; the queue transport (queue_pipeline.hpp) feeds it
// deliveries and settles each one by the outcome this core reports.
//
// A stage's exception (or the error an asynchronous stage reports) is the record's error;
// the error policy turns it into the outcome. Everything runs on one thread (the loop's):
// an asynchronous stage completes by calling its `done` there, once; Stage::offload runs a
// blocking callable on a worker thread and hands its result back through a post function.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "warren/pipeline/record.hpp"

namespace warren::pipeline {

// What finally happened to a record.
enum class Outcome : std::uint8_t {
  completed,      // every stage ran
  skipped,        // a stage said skip: the record is done, nothing more runs
  dead_lettered,  // failed, and handed to the dead-letter target
  requeued,       // failed, and handed back to its source to be tried again (or rejected)
  stop,           // failed, and the pipeline stops (drains) after it
  rethrow,        // failed, and the error ends the pipeline (its stop reports the error)
};
[[nodiscard]] const char* to_string(Outcome outcome) noexcept;

// A record's error: a stage's exception (its type and what()) or an asynchronous stage's
// report (a publish that was nacked, returned or timed out, a command that exited non-zero).
struct RecordError {
  std::string type{};
  std::string message{};
};

// A stage's say about the record: go on to the next stage, or end the record as skipped.
enum class Verdict : std::uint8_t { next, skip };

// Either the verdict or the error, once, from an asynchronous stage.
struct StageResult {
  Verdict verdict = Verdict::next;
  std::optional<RecordError> error{};
};
using StageDone = std::function<void(StageResult)>;

// A small fixed pool of worker threads for blocking stages. Joined on destruction.
class WorkerPool {
 public:
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  void run(std::function<void()> job);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The exception in flight as a RecordError (its demangled type and what()).
[[nodiscard]] RecordError current_exception_error();

class Stage {
 public:
  using Sync = std::function<Verdict(Record&)>;
  using Async = std::function<void(Record&, StageDone)>;
  using Post = std::function<void(std::function<void()>)>;  // runs a function on the loop thread

  // A synchronous stage: `fn(record)` returns void (go on) or a Verdict; a throw is the error.
  template <class F>
  [[nodiscard]] static Stage sync(F fn) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Record&>>)
      return Stage(Sync([fn = std::move(fn)](Record& r) mutable {
        fn(r);
        return Verdict::next;
      }));
    else
      return Stage(Sync(std::move(fn)));
  }
  // An asynchronous stage on the loop: `fn(record, done)` calls done once, on the loop thread.
  // The record stays valid until then.
  [[nodiscard]] static Stage async(Async fn) { return Stage(std::move(fn)); }
  // A blocking stage: `fn(record)` runs on a worker of `pool` (the record is the worker's
  // until it returns); the result reaches the pipeline through `post` (Driver::post).
  [[nodiscard]] static Stage offload(WorkerPool& pool, Post post, Sync fn);

  // A typed stage: decode the body into T, run fn on it, encode T back into the body.
  template <class T, class Decode, class Fn, class Encode>
  [[nodiscard]] static Stage typed(Decode decode, Fn fn, Encode encode) {
    return sync([decode = std::move(decode), fn = std::move(fn), encode = std::move(encode)](Record& r) mutable {
      T value = decode(r.body);
      if constexpr (std::is_void_v<std::invoke_result_t<Fn&, T&, Record&>>) {
        fn(value, r);
        r.body = encode(value);
        return Verdict::next;
      } else {
        Verdict v = fn(value, r);
        r.body = encode(value);
        return v;
      }
    });
  }

  void run(Record& record, StageDone done) const;

 private:
  explicit Stage(Sync fn) : sync_(std::move(fn)) {}
  explicit Stage(Async fn) : async_(std::move(fn)) {}
  Sync sync_;
  Async async_;
};

// Decides a failed record's outcome. The default dead-letters every failure.
using ErrorPolicy = std::function<Outcome(const Record& record, const RecordError& error)>;

struct PipelineOptions {
  std::string name = "pipeline";
  std::size_t concurrency = 1;  // records in flight at once (at least 1)
  ErrorPolicy on_error{};       // unset: every failure is dead-lettered
};

// What `options.on_error` makes of a failure: dead_lettered without a policy; skipped when it
// says completed (a failed record never counts as completed); rethrow when it throws.
[[nodiscard]] Outcome outcome_of_failure(const PipelineOptions& options, const Record& record, const RecordError& error);

// The end of one record: its outcome, and the error when it failed.
struct Finished {
  Outcome outcome = Outcome::completed;
  std::optional<RecordError> error{};
};

class Pipeline {
 public:
  using Done = std::function<void(Record& record, const Finished& finished)>;

  Pipeline(PipelineOptions options, std::vector<Stage> stages);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  void add(Stage stage) { stages_->push_back(std::move(stage)); }

  // Starts the record at once if fewer than `concurrency` are in flight, else queues it;
  // `done` runs once with its outcome (possibly inside this call, for synchronous stages).
  // `tag` is the caller's name for it (a source's delivery), handed back by take_waiting.
  void submit(Record record, Done done, std::uint64_t tag = 0);

  // Records queued and not started, taken out (a drain hands them back to their source),
  // each with the tag it was submitted with: the caller never infers which ones they were.
  struct Waiting {
    Record record{};
    Done done{};
    std::uint64_t tag = 0;
  };
  [[nodiscard]] std::vector<Waiting> take_waiting();

  [[nodiscard]] std::size_t in_flight() const noexcept { return state_->in_flight; }
  [[nodiscard]] std::size_t waiting() const noexcept { return state_->waiting.size(); }
  [[nodiscard]] const PipelineOptions& options() const noexcept { return state_->options; }

 private:
  struct Job;
  struct State {
    PipelineOptions options{};
    std::size_t in_flight = 0;
    std::deque<Waiting> waiting{};
    bool pumping = false;
    bool alive = true;
  };
  static void pump(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages);
  static void step(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages,
                   std::shared_ptr<Job> job);
  static void finish(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages,
                     std::shared_ptr<Job> job, Finished finished);

  std::shared_ptr<State> state_;
  std::shared_ptr<std::vector<Stage>> stages_;
};

}  // namespace warren::pipeline

#include "warren/pipeline/core.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <typeinfo>

namespace warren::pipeline {

const char* to_string(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::completed: return "completed";
    case Outcome::skipped: return "skipped";
    case Outcome::dead_lettered: return "dead-lettered";
    case Outcome::requeued: return "requeued";
    case Outcome::stop: return "stop";
    case Outcome::rethrow: return "rethrow";
  }
  return "unknown";
}

namespace {
std::string demangle(const char* name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && text) ? text : name;
  std::free(text);
  return out;
}
}  // namespace

RecordError current_exception_error() {
  try {
    throw;
  } catch (const std::exception& e) {
    return {demangle(typeid(e).name()), e.what()};
  } catch (...) {
    return {"unknown", "an exception that is not a std::exception"};
  }
}

WorkerPool::WorkerPool(std::size_t threads) {
  if (threads == 0) threads = 1;
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock lock(mutex_);
          wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
          if (jobs_.empty()) return;  // stopping, and nothing left
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
        job();
      }
    });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::run(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

Stage Stage::offload(WorkerPool& pool, Post post, Sync fn) {
  auto shared = std::make_shared<Sync>(std::move(fn));
  return async([&pool, post = std::move(post), shared](Record& record, StageDone done) {
    // The record is the worker's alone until the result is posted back.
    pool.run([&record, post, shared, done = std::move(done)]() mutable {
      StageResult result;
      try {
        result.verdict = (*shared)(record);
      } catch (...) {
        result.error = current_exception_error();
      }
      post([done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
    });
  });
}

void Stage::run(Record& record, StageDone done) const {
  if (sync_) {
    StageResult result;
    try {
      result.verdict = sync_(record);
    } catch (...) {
      result.error = current_exception_error();
    }
    return done(std::move(result));
  }
  try {
    async_(record, done);
  } catch (...) {
    done(StageResult{.error = current_exception_error()});  // a second call is ignored (Pipeline)
  }
}

struct Pipeline::Job {
  Record record;
  Done done;
  std::size_t next_stage = 0;
};

Pipeline::Pipeline(PipelineOptions options, std::vector<Stage> stages)
    : state_(std::make_shared<State>()), stages_(std::make_shared<std::vector<Stage>>(std::move(stages))) {
  state_->options = std::move(options);
  if (state_->options.concurrency == 0) state_->options.concurrency = 1;
}

Pipeline::~Pipeline() { state_->alive = false; }

void Pipeline::submit(Record record, Done done, std::uint64_t tag) {
  state_->waiting.push_back({std::move(record), std::move(done), tag});
  pump(state_, stages_);
}

std::vector<Pipeline::Waiting> Pipeline::take_waiting() {
  std::vector<Waiting> out;
  for (auto& w : state_->waiting) out.push_back(std::move(w));
  state_->waiting.clear();
  return out;
}

void Pipeline::pump(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages) {
  // Iterative: a record that finishes synchronously starts the next from this loop, not from
  // inside its own completion, so a long queue of synchronous records never deepens the stack.
  if (state->pumping) return;
  state->pumping = true;
  while (state->alive && state->in_flight < state->options.concurrency && !state->waiting.empty()) {
    auto job = std::make_shared<Job>();
    job->record = std::move(state->waiting.front().record);
    job->done = std::move(state->waiting.front().done);
    state->waiting.pop_front();
    ++state->in_flight;
    step(state, stages, std::move(job));
  }
  state->pumping = false;
}

void Pipeline::step(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages,
                    std::shared_ptr<Job> job) {
  struct Call {
    bool answered = false;
    bool inside = true;  // the stage has not returned yet: a synchronous answer
    StageResult result;
  };
  for (;;) {
    if (job->next_stage >= stages->size()) return finish(state, stages, std::move(job), {Outcome::completed, {}});
    const Stage& stage = (*stages)[job->next_stage++];
    auto call = std::make_shared<Call>();
    stage.run(job->record, [state, stages, job, call](StageResult r) {
      if (call->answered) return;  // a stage that answers twice: the first answer stands
      call->answered = true;
      if (call->inside) {
        call->result = std::move(r);
        return;
      }
      if (!state->alive) return;
      if (r.error || r.verdict == Verdict::skip) {
        Finished f{r.error ? Outcome::dead_lettered : Outcome::skipped, std::move(r.error)};
        return finish(state, stages, job, std::move(f));
      }
      step(state, stages, job);
    });
    call->inside = false;
    if (!call->answered) return;  // asynchronous: it goes on from its `done`
    if (call->result.error || call->result.verdict == Verdict::skip) {
      Finished f{call->result.error ? Outcome::dead_lettered : Outcome::skipped, std::move(call->result.error)};
      return finish(state, stages, std::move(job), std::move(f));
    }
  }
}

Outcome outcome_of_failure(const PipelineOptions& options, const Record& record, const RecordError& error) {
  if (!options.on_error) return Outcome::dead_lettered;
  Outcome outcome;
  try {
    outcome = options.on_error(record, error);
  } catch (...) {
    return Outcome::rethrow;  // a policy that throws cannot be trusted to decide
  }
  // A failed record never counts as completed.
  return outcome == Outcome::completed ? Outcome::skipped : outcome;
}

void Pipeline::finish(const std::shared_ptr<State>& state, const std::shared_ptr<std::vector<Stage>>& stages,
                      std::shared_ptr<Job> job, Finished finished) {
  if (finished.error) finished.outcome = outcome_of_failure(state->options, job->record, *finished.error);
  --state->in_flight;
  job->done(job->record, finished);
  pump(state, stages);
}

}  // namespace warren::pipeline

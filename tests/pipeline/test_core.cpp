// The pipeline core without a broker: stage order, verdicts, a stage's exception as the
// record's error and the policy's outcome, the concurrency bound, asynchronous and offloaded
// stages, typed stages, and the dead-letter envelope's frame budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "warren/pipeline/core.hpp"
#include "warren/pipeline/dead_letter.hpp"

namespace warren::pipeline {
namespace {

Record text_record(std::string body) {
  Record r;
  r.body = std::move(body);
  return r;
}

struct Seen {
  std::vector<std::string> bodies;
  std::vector<Finished> finished;
  Pipeline::Done done() {
    return [this](Record& r, const Finished& f) {
      bodies.push_back(r.body);
      finished.push_back(f);
    };
  }
};

TEST(PipelineCore, SyncStagesRunInOrderAndComplete) {
  Pipeline p({}, {Stage::sync([](Record& r) { r.body += "a"; }), Stage::sync([](Record& r) { r.body += "b"; })});
  Seen seen;
  p.submit(text_record("x"), seen.done());
  ASSERT_EQ(seen.finished.size(), 1u);
  EXPECT_EQ(seen.bodies[0], "xab");
  EXPECT_EQ(seen.finished[0].outcome, Outcome::completed);
  EXPECT_FALSE(seen.finished[0].error);
  EXPECT_EQ(p.in_flight(), 0u);
}

TEST(PipelineCore, SkipEndsTheRecordAndLaterStagesDoNotRun) {
  int later = 0;
  Pipeline p({}, {Stage::sync([](Record& r) { return r.body == "drop" ? Verdict::skip : Verdict::next; }),
                  Stage::sync([&](Record&) { ++later; })});
  Seen seen;
  p.submit(text_record("drop"), seen.done());
  p.submit(text_record("keep"), seen.done());
  ASSERT_EQ(seen.finished.size(), 2u);
  EXPECT_EQ(seen.finished[0].outcome, Outcome::skipped);
  EXPECT_EQ(seen.finished[1].outcome, Outcome::completed);
  EXPECT_EQ(later, 1);
}

TEST(PipelineCore, AnExceptionIsTheRecordsErrorAndIsDeadLetteredByDefault) {
  int later = 0;
  Pipeline p({}, {Stage::sync([](Record&) { throw std::invalid_argument("bad amount"); }),
                  Stage::sync([&](Record&) { ++later; })});
  Seen seen;
  p.submit(text_record("x"), seen.done());
  ASSERT_EQ(seen.finished.size(), 1u);
  EXPECT_EQ(seen.finished[0].outcome, Outcome::dead_lettered);
  ASSERT_TRUE(seen.finished[0].error);
  EXPECT_EQ(seen.finished[0].error->type, "std::invalid_argument");
  EXPECT_EQ(seen.finished[0].error->message, "bad amount");
  EXPECT_EQ(later, 0);
}

TEST(PipelineCore, ThePolicyDecidesEachFailuresOutcome) {
  PipelineOptions o;
  o.on_error = [](const Record& r, const RecordError&) {
    if (r.body == "requeue") return Outcome::requeued;
    if (r.body == "stop") return Outcome::stop;
    if (r.body == "rethrow") return Outcome::rethrow;
    if (r.body == "skip") return Outcome::skipped;
    return Outcome::completed;  // a failure never counts as completed: it becomes skipped
  };
  Pipeline p(o, {Stage::sync([](Record&) { throw std::runtime_error("no"); })});
  Seen seen;
  for (const char* b : {"requeue", "stop", "rethrow", "skip", "completed"}) p.submit(text_record(b), seen.done());
  ASSERT_EQ(seen.finished.size(), 5u);
  EXPECT_EQ(seen.finished[0].outcome, Outcome::requeued);
  EXPECT_EQ(seen.finished[1].outcome, Outcome::stop);
  EXPECT_EQ(seen.finished[2].outcome, Outcome::rethrow);
  EXPECT_EQ(seen.finished[3].outcome, Outcome::skipped);
  EXPECT_EQ(seen.finished[4].outcome, Outcome::skipped);
  for (const auto& f : seen.finished) EXPECT_EQ(f.error->type, "std::runtime_error");
}

// The same decision the core makes is open to the transport, for a record that failed before
// any stage could run (a delivery whose headers cannot be decoded).
TEST(PipelineCore, AFailureOutsideTheStagesIsDecidedByTheSamePolicy) {
  const Record r;
  const RecordError e{"warren::pipeline::headers", "the headers could not be decoded"};
  EXPECT_EQ(outcome_of_failure({}, r, e), Outcome::dead_lettered);
  PipelineOptions o;
  o.on_error = [](const Record&, const RecordError& err) {
    return err.type == "warren::pipeline::headers" ? Outcome::stop : Outcome::requeued;
  };
  EXPECT_EQ(outcome_of_failure(o, r, e), Outcome::stop);
  o.on_error = [](const Record&, const RecordError&) { return Outcome::completed; };
  EXPECT_EQ(outcome_of_failure(o, r, e), Outcome::skipped);
  o.on_error = [](const Record&, const RecordError&) -> Outcome { throw std::runtime_error("no"); };
  EXPECT_EQ(outcome_of_failure(o, r, e), Outcome::rethrow);
}

TEST(PipelineCore, ANonStandardExceptionIsStillAnError) {
  Pipeline p({}, {Stage::sync([](Record&) { throw 42; })});
  Seen seen;
  p.submit(text_record("x"), seen.done());
  ASSERT_EQ(seen.finished.size(), 1u);
  EXPECT_EQ(seen.finished[0].error->type, "unknown");
}

TEST(PipelineCore, ConcurrencyBoundsTheRecordsInFlight) {
  std::vector<StageDone> held;
  Pipeline p({.concurrency = 2}, {Stage::async([&](Record&, StageDone done) { held.push_back(std::move(done)); })});
  Seen seen;
  for (int i = 0; i < 5; ++i) p.submit(text_record(std::to_string(i)), seen.done());
  EXPECT_EQ(p.in_flight(), 2u);
  EXPECT_EQ(p.waiting(), 3u);
  ASSERT_EQ(held.size(), 2u);
  held[1]({});  // the second finishes first: the third starts
  EXPECT_EQ(seen.bodies, std::vector<std::string>{"1"});
  EXPECT_EQ(p.in_flight(), 2u);
  EXPECT_EQ(p.waiting(), 2u);
  ASSERT_EQ(held.size(), 3u);
  held[1]({});  // a second answer from the same stage is ignored
  EXPECT_EQ(seen.finished.size(), 1u);
  auto waiting = p.take_waiting();
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting[0].record.body, "3");
  EXPECT_EQ(waiting[1].record.body, "4");
  held[0]({.error = RecordError{"io", "late"}});
  held[2]({.verdict = Verdict::skip});
  ASSERT_EQ(seen.finished.size(), 3u);
  EXPECT_EQ(seen.finished[1].outcome, Outcome::dead_lettered);
  EXPECT_EQ(seen.finished[2].outcome, Outcome::skipped);
  EXPECT_EQ(p.in_flight(), 0u);
  EXPECT_EQ(held.size(), 3u);  // the taken records never started
}

TEST(PipelineCore, ManySynchronousRecordsDoNotDeepenTheStack) {
  Pipeline p({.concurrency = 1}, {Stage::sync([](Record&) {})});
  std::size_t completed = 0;
  for (int i = 0; i < 200000; ++i) p.submit(text_record("x"), [&](Record&, const Finished&) { ++completed; });
  EXPECT_EQ(completed, 200000u);
}

TEST(PipelineCore, AnOffloadedStageRunsOnAWorkerAndFinishesOnTheLoop) {
  std::mutex m;
  std::vector<std::function<void()>> posted;
  auto post = [&](std::function<void()> fn) {
    std::lock_guard lock(m);
    posted.push_back(std::move(fn));
  };
  const auto loop_thread = std::this_thread::get_id();
  std::thread::id worker_thread;
  WorkerPool pool(2);
  Pipeline p({.concurrency = 2}, {Stage::offload(pool, post, [&](Record& r) {
                                    worker_thread = std::this_thread::get_id();
                                    if (r.body == "fail") throw std::runtime_error("exit 3");
                                    r.body = "done " + r.body;
                                    return Verdict::next;
                                  })});
  Seen seen;
  p.submit(text_record("one"), seen.done());
  p.submit(text_record("fail"), seen.done());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (seen.finished.size() < 2 && std::chrono::steady_clock::now() < give_up) {
    std::vector<std::function<void()>> now;
    {
      std::lock_guard lock(m);
      now.swap(posted);
    }
    for (auto& fn : now) fn();  // "the loop": the results are handed over here
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(seen.finished.size(), 2u);
  EXPECT_NE(worker_thread, loop_thread);
  std::sort(seen.bodies.begin(), seen.bodies.end());
  EXPECT_EQ(seen.bodies[0], "done one");
  bool failed = false;
  for (const auto& f : seen.finished)
    if (f.error) failed = f.error->message == "exit 3" && f.outcome == Outcome::dead_lettered;
  EXPECT_TRUE(failed);
}

TEST(PipelineCore, ATypedStageDecodesRunsAndEncodes) {
  auto decode = [](const std::string& b) { return std::stoi(b); };
  auto encode = [](const int& v) { return std::to_string(v); };
  Pipeline p({}, {Stage::typed<int>(decode, [](int& v, Record&) { v *= 2; }, encode),
                  Stage::typed<int>(decode, [](int& v, Record&) { return v > 10 ? Verdict::skip : Verdict::next; }, encode)});
  Seen seen;
  p.submit(text_record("21"), seen.done());
  p.submit(text_record("4"), seen.done());
  p.submit(text_record("x"), seen.done());  // std::stoi throws: the record's error
  ASSERT_EQ(seen.finished.size(), 3u);
  EXPECT_EQ(seen.finished[0].outcome, Outcome::skipped);
  EXPECT_EQ(seen.bodies[1], "8");
  EXPECT_EQ(seen.finished[1].outcome, Outcome::completed);
  EXPECT_EQ(seen.finished[2].error->type, "std::invalid_argument");
}

TEST(DeadLetterEnvelope, CarriesTheOriginalAndTheError) {
  wire::FieldTable original{{"tenant", 7}, {"trace", "abc"}};
  RecordError e{"std::runtime_error", "boom"};
  auto h = envelope_headers({.pipeline = "billing", .exchange = "in", .routing_key = "eu", .headers = &original,
                             .error = &e, .attempt = 2, .failed_at_s = 1700000000},
                            {}, 131072);
  ASSERT_TRUE(h) << h.error().to_string();
  EXPECT_EQ(*h->find("tenant"), wire::FieldValue(std::int32_t{7}));  // typed value kept
  EXPECT_EQ(*h->find("trace"), wire::FieldValue("abc"));
  EXPECT_EQ(*h->find(std::string(envelope::original_exchange)), wire::FieldValue("in"));
  EXPECT_EQ(*h->find(std::string(envelope::original_routing_key)), wire::FieldValue("eu"));
  EXPECT_EQ(*h->find(std::string(envelope::error_type)), wire::FieldValue("std::runtime_error"));
  EXPECT_EQ(*h->find(std::string(envelope::error_message)), wire::FieldValue("boom"));
  EXPECT_EQ(*h->find(std::string(envelope::attempt)), wire::FieldValue(std::int64_t{2}));
  EXPECT_EQ(*h->find(std::string(envelope::failed_at)), wire::FieldValue(wire::Timestamp{1700000000}));
  EXPECT_EQ(*h->find(std::string(envelope::pipeline)), wire::FieldValue("billing"));
}

TEST(DeadLetterEnvelope, ALongErrorIsCutToFitTheFrame) {
  RecordError e{"std::runtime_error", std::string(10000, 'e') + "\xC3\xA9"};
  client::Properties base{.content_type = "text/plain"};
  for (std::uint32_t frame_max : {4096u, 8192u, 10100u}) {
    auto h = envelope_headers({.pipeline = "p", .exchange = "x", .routing_key = "k", .error = &e}, base, frame_max);
    ASSERT_TRUE(h) << h.error().to_string();
    client::Properties p = base;
    p.headers = wire::TableRef(*h);
    auto size = wire::content_header_size(p);
    ASSERT_TRUE(size);
    EXPECT_LE(*size, frame_max - 8) << frame_max;
    EXPECT_GE(*size, frame_max - 8 - 2) << "the cut keeps as much as fits";
    const auto& text = std::get<std::string>(h->find(std::string(envelope::error_message))->value);
    EXPECT_TRUE(text.ends_with("...")) << frame_max;
  }
  auto whole = envelope_headers({.pipeline = "p", .error = &e}, base, 131072);
  ASSERT_TRUE(whole);
  EXPECT_EQ(std::get<std::string>(whole->find(std::string(envelope::error_message))->value), e.message);
}

TEST(DeadLetterEnvelope, HeadersThatCannotFitAreRefused) {
  wire::FieldTable original{{"big", std::string(5000, 'x')}};
  RecordError e{"t", "m"};
  auto h = envelope_headers({.pipeline = "p", .headers = &original, .error = &e}, {}, 4096);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, make_error_code(errc::frame_too_large));
}

TEST(DeadLetterEnvelope, AttemptCountsFromTheQueue) {
  Metadata m;
  EXPECT_EQ(attempt_of(m), 1u);
  m.redelivered = true;
  EXPECT_EQ(attempt_of(m), 2u);
  m.delivery_count = 4;  // a quorum queue's count of earlier returns
  EXPECT_EQ(attempt_of(m), 5u);
}

}  // namespace
}  // namespace warren::pipeline

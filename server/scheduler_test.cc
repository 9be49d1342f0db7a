#include "server/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload.h"
#include "schema/measurement.h"
#include "schema/vocab.h"
#include "search/stopping.h"
#include "server/store.h"
#include "tests/testing/temp_dir.h"

namespace tessel::server {
namespace {

using ::testing::HasSubstr;

v1::Workload Gemm(int64_t m, int64_t n, int64_t k, const std::string& target = "snc2") {
  v1::Workload w;
  w.set_kernel("matmul");
  w.set_target(target);
  for (auto [name, value] : {std::pair{"M", m}, {"N", n}, {"K", k}}) {
    v1::Dim* d = w.add_dims();
    d->set_name(name);
    d->set_value(value);
  }
  return w;
}

// new_job: these tests run several jobs of one workload at once (single-flight has its own test).
v1::SubmitJobRequest Job(const v1::Workload& w, int budget, uint64_t seed = 1) {
  v1::SubmitJobRequest r;
  *r.mutable_workload() = w;
  r.set_budget(budget);
  r.set_seed(seed);
  r.set_new_job(true);
  return r;
}

// Fake measurements are at least this slow: well above the roofline of every workload these
// tests tune (1024^3 bf16 on snc2: ~23 us), which the server checks reports against.
constexpr double kFastNs = 1e6;

// A deterministic stand-in for a measurement: a time derived from the config text.
double FakeTime(const std::string& config) {
  return kFastNs + static_cast<double>(std::hash<std::string>{}(config) % 100000);
}

// Sets a fake measurement's time and its one sample, as an honest worker reports them.
void SetTime(v1::TrialResult& result, double time_ns) {
  result.set_time_ns(time_ns);
  result.clear_samples_ns();
  result.add_samples_ns(time_ns);
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(SchedulerOptions options = {}) {
    scheduler_.reset();
    if (!store_) {
      db_ = tmp_.File("t.db");
      auto store = Store::Open(db_);
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
    }
    options.housekeeping_ms = 10;
    auto scheduler = Scheduler::Create(store_.get(), options);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::move(*scheduler);
  }

  // 8 slots by default: a job keeps 2 x slots trials in flight, enough for the batches these
  // tests lease at once.
  std::string RegisterWorker(int slots = 8, const std::string& credential = "") {
    v1::RegisterRequest r;
    r.set_name("test");
    r.set_slots(slots);
    auto response = scheduler_->Register(r, credential);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->worker_id() : "";
  }

  std::vector<v1::TrialSpec> Lease(const std::string& worker, int n) {
    v1::LeaseRequest r;
    r.set_worker_id(worker);
    r.set_max_trials(n);
    std::promise<absl::StatusOr<v1::LeaseResponse>> done;
    scheduler_->Lease(r, [&](absl::StatusOr<v1::LeaseResponse> response) {
      done.set_value(std::move(response));
    });
    auto response = done.get_future().get();
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    return {response->trials().begin(), response->trials().end()};
  }

  v1::ReportResponse Report(const std::string& worker,
                            const std::vector<v1::TrialResult>& results) {
    v1::ReportRequest r;
    r.set_worker_id(worker);
    for (const auto& result : results) *r.add_results() = result;
    std::promise<absl::StatusOr<v1::ReportResponse>> done;
    scheduler_->Report(r, [&](absl::StatusOr<v1::ReportResponse> response) {
      done.set_value(std::move(response));
    });
    auto response = done.get_future().get();
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::ReportResponse();
  }

  // Measures a spec the fake way; `wrong` configs fail verification.
  static v1::TrialResult Measure(const v1::TrialSpec& spec,
                                 const std::set<std::string>& wrong = {}) {
    v1::TrialResult result;
    result.set_trial_id(spec.trial_id());
    result.set_status(v1::TRIAL_OK);
    SetTime(result, FakeTime(spec.config()));
    if (spec.protocol().verify() == "always") {
      if (wrong.count(spec.config())) {
        result.set_status(v1::TRIAL_WRONG_ANSWER);
        result.set_message("max abs error 3.5");
      } else {
        result.set_verified(true);
      }
    }
    return result;
  }

  // Leases and answers trials until the job is final.
  v1::Job RunToEnd(int64_t job_id, const std::string& worker,
                   const std::set<std::string>& wrong = {}) {
    return DriveToEnd(job_id, [&] {
      std::vector<v1::TrialResult> results;
      for (const auto& spec : Lease(worker, 8)) results.push_back(Measure(spec, wrong));
      if (!results.empty()) Report(worker, results);
      return !results.empty();
    });
  }

  // RunToEnd, expecting (not asserting) that the job completed.
  v1::Job RunToCompletion(int64_t job_id, const std::string& worker,
                          const std::set<std::string>& wrong = {}) {
    v1::Job done = RunToEnd(job_id, worker, wrong);
    EXPECT_EQ(done.state(), v1::JOB_COMPLETED);
    return done;
  }

  // The scheduler's answer to a lookup of `workload`.
  absl::StatusOr<v1::LookupResponse> LookupWorkload(const v1::Workload& workload) {
    v1::LookupRequest lookup;
    *lookup.mutable_workload() = workload;
    return scheduler_->Lookup(lookup);
  }

  // Submits `request` and runs it to the end on `worker`, setting `tuned` to the final job; a
  // fatal failure (use ASSERT_NO_FATAL_FAILURE) unless it was accepted and completed.
  void TuneToCompletion(const v1::SubmitJobRequest& request, const std::string& worker,
                        v1::Job& tuned) {
    auto job = scheduler_->Submit(request);
    ASSERT_TRUE(job.ok());
    tuned = RunToEnd(job->id(), worker);
    ASSERT_EQ(tuned.state(), v1::JOB_COMPLETED);
  }

  // Sets `out` to the job's trials as the store holds them; a fatal failure (use
  // ASSERT_NO_FATAL_FAILURE) when the store cannot read them.
  void StoredTrials(int64_t job_id, std::vector<TrialRecord>& out) {
    auto trials = store_->TrialsForJob(job_id);
    ASSERT_TRUE(trials.ok());
    out = *std::move(trials);
  }

  // Calls `step` (false: nothing was ready) until the job is final.
  v1::Job DriveToEnd(int64_t job_id, const std::function<bool()>& step) {
    for (int round = 0; round < 10000; ++round) {
      auto job = scheduler_->GetJob(job_id);
      EXPECT_TRUE(job.ok());
      if (!job.ok()) return {};
      if (job->state() == v1::JOB_COMPLETED || job->state() == v1::JOB_FAILED ||
          job->state() == v1::JOB_CANCELLED) {
        return *job;
      }
      if (!step()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "job " << job_id << " never finished";
    return {};
  }

  // Drives the job to its end with one worker whose results have `spec.protocol().repeats()`
  // samples spread +-2% around `center(spec)`, and their median as the time.
  v1::Job DriveWithSpreadSamples(int64_t job_id, const std::string& worker,
                                 const std::function<double(const v1::TrialSpec&)>& center) {
    return DriveToEnd(job_id, [&] {
      std::vector<v1::TrialResult> results;
      for (const auto& spec : Lease(worker, 8)) {
        v1::TrialResult result = Measure(spec);
        const int repeats = spec.protocol().repeats();
        const double c = center(spec);
        result.clear_samples_ns();
        for (int i = 0; i < repeats; ++i) result.add_samples_ns(c * (0.98 + 0.04 * i / repeats));
        result.set_time_ns(Median({result.samples_ns().begin(), result.samples_ns().end()}));
        results.push_back(result);
      }
      if (!results.empty()) Report(worker, results);
      return !results.empty();
    });
  }

  testing::TempDir tmp_{"tessel-scheduler-test-"};
  std::string db_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, SubmitRejectsBadWorkloadsWithActionableMessages) {
  struct Case {
    std::function<void(v1::SubmitJobRequest&)> mutate;
    const char* message;
  };
  const Case cases[] = {
      {[](auto& r) { r.mutable_workload()->set_kernel("nope"); }, "unknown kernel 'nope'"},
      {[](auto& r) { r.mutable_workload()->set_target("tpu9"); }, "tpu9"},
      {[](auto& r) { r.mutable_workload()->mutable_dims()->RemoveLast(); }, "missing dim K"},
      {[](auto& r) { r.mutable_workload()->mutable_dims(0)->set_value(0); }, "must be positive"},
      {[](auto& r) { r.mutable_workload()->mutable_dims(1)->set_value(-3); },
       "must not be negative"},
      {[](auto& r) { r.mutable_workload()->mutable_dims(0)->set_name("Q"); }, "no dim 'Q'"},
      {[](auto& r) { r.set_budget(0); }, "budget must be between 1"},
      {[](auto& r) { r.set_strategy("psychic"); }, "unknown strategy 'psychic'"},
      {[](auto& r) { r.mutable_workload()->set_dtype("int3"); }, "int3"},
      {[](auto& r) { r.set_effort("fastest"); }, "effort must be one of quick, default, full"},
      {[](auto& r) { r.set_time_limit_s(-5); }, "time_limit_s must be >= 0 (0 = none), got -5"},
      {[](auto& r) { r.set_stop_after_no_improvement(-1); }, "stop_after_no_improvement must"},
      {[](auto& r) { r.set_target_time_ns(-1); }, "target_time_ns must be >= 0"},
      {[](auto& r) {
         r.set_effort("quick");
         r.set_budget(-2);
       },
       "budget must be between 1 and 1000000 (or 0 for the effort's), got -2"},
  };
  for (const Case& c : cases) {
    v1::SubmitJobRequest request = Job(Gemm(512, 512, 512), 8);
    c.mutate(request);
    auto job = scheduler_->Submit(request);
    ASSERT_FALSE(job.ok()) << c.message;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.message));
  }
  auto jobs = scheduler_->ListJobs(10);
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty()) << "a rejected job must not be stored";
}

// Single flight is per workload: while one workload's job is being built (auto ranks a sample of
// a large attention space by its estimate, over a second here), a submission of another workload
// does not wait for it.
TEST_F(SchedulerTest, ASubmissionDoesNotWaitForAnotherWorkloadsJobToBeBuilt) {
  v1::Workload attention;
  attention.set_kernel("attention");
  attention.set_target("snc3");
  for (auto [name, value] : {std::pair{"batch", 1},
                             {"heads", 16},
                             {"seq_q", 4096},
                             {"seq_k", 4096},
                             {"head_dim", 128},
                             {"causal", 1}}) {
    v1::Dim* d = attention.add_dims();
    d->set_name(name);
    d->set_value(value);
  }
  std::atomic<bool> slow_done{false};
  absl::StatusOr<v1::Job> slow;
  const auto start = std::chrono::steady_clock::now();
  std::thread a([&] {
    slow = scheduler_->Submit(Job(attention, 20));
    slow_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  absl::StatusOr<v1::Job> quick = scheduler_->Submit(Job(Gemm(512, 512, 512), 20));
  const bool quick_first = !slow_done;
  a.join();
  const double slow_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(quick.ok() && slow.ok()) << quick.status() << slow.status();
  if (slow_s < 0.6) GTEST_SKIP() << "the attention job was built in " << slow_s << " s: too fast";
  EXPECT_TRUE(quick_first) << "the matmul submission waited for the attention job (" << slow_s
                           << " s)";
}

// Issue 17, single-flight: a submission of a workload that has a queued or running job returns
// that job (attached) unless new_job; two submissions from different threads make one job.
TEST_F(SchedulerTest, ASubmissionOfAWorkloadWithARunningJobAttachesToIt) {
  v1::SubmitJobRequest request = Job(Gemm(512, 512, 512), 20);
  request.set_new_job(false);
  absl::StatusOr<v1::Job> first, second;
  std::thread a([&] { first = scheduler_->Submit(request); });
  std::thread b([&] { second = scheduler_->Submit(request); });
  a.join();
  b.join();
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(first->id(), second->id());
  EXPECT_NE(first->attached(), second->attached());  // exactly one of them started it

  request.set_new_job(true);
  absl::StatusOr<v1::Job> another = scheduler_->Submit(request);
  ASSERT_TRUE(another.ok()) << another.status();
  EXPECT_NE(another->id(), first->id());
  EXPECT_FALSE(another->attached());
  // Another shape is another workload.
  v1::SubmitJobRequest other = Job(Gemm(512, 512, 256), 20);
  other.set_new_job(false);
  absl::StatusOr<v1::Job> third = scheduler_->Submit(other);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->attached());
  // A cancelled job is not joined.
  ASSERT_TRUE(scheduler_->Cancel(third->id()).ok());
  absl::StatusOr<v1::Job> after_cancel = scheduler_->Submit(other);
  ASSERT_TRUE(after_cancel.ok()) << after_cancel.status();
  EXPECT_NE(after_cancel->id(), third->id());
}

// Issue 17: equal priorities share the workers (within 20% of each other's progress); a higher
// priority submitted later is served first and finishes first.
TEST_F(SchedulerTest, EqualPrioritiesShareFairlyAndAHigherPriorityGoesFirst) {
  const std::string worker = RegisterWorker(4);
  auto a = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 60, 1));
  auto b = scheduler_->Submit(Job(Gemm(1024, 1024, 512), 60, 2));
  ASSERT_TRUE(a.ok() && b.ok());
  std::map<int64_t, int> done;  // results reported, by job
  auto step = [&](int n) {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(worker, n)) {
      results.push_back(Measure(spec));
      ++done[spec.job_id()];
    }
    if (!results.empty()) Report(worker, results);
  };
  for (int round = 0; round < 8; ++round) step(3);  // an odd lease size, so order matters
  ASSERT_GT(done[a->id()] + done[b->id()], 20);
  EXPECT_LE(std::abs(done[a->id()] - done[b->id()]), 0.2 * std::max(done[a->id()], done[b->id()]))
      << done[a->id()] << " vs " << done[b->id()];

  v1::SubmitJobRequest urgent_request = Job(Gemm(512, 512, 512), 30, 3);
  urgent_request.set_priority(5);
  auto urgent = scheduler_->Submit(urgent_request);
  ASSERT_TRUE(urgent.ok());
  EXPECT_EQ(urgent->priority(), 5);
  const v1::Job finished = DriveToEnd(urgent->id(), [&] {
    step(3);
    return true;
  });
  EXPECT_EQ(finished.state(), v1::JOB_COMPLETED);
  for (int64_t other : {a->id(), b->id()}) {
    auto job = scheduler_->GetJob(other);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state(), v1::JOB_RUNNING)
        << "job " << other << " finished before the urgent one";
  }
}

TEST_F(SchedulerTest, TheDefaultConfigIsMeasuredFirst) {
  auto job = scheduler_->Submit(Job(Gemm(512, 512, 512), 8));
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string worker = RegisterWorker();
  auto specs = Lease(worker, 1);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].config(), job->default_config().config());
}

TEST_F(SchedulerTest, AJobSpendsExactlyItsBudgetAndPublishesTheFastestVerifiedConfig) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 20));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  v1::Job done = RunToCompletion(job->id(), worker);
  EXPECT_EQ(done.trials().total(), 20);
  EXPECT_EQ(done.trials().ok(), 20);

  auto trials = scheduler_->ListTrials(job->id());
  ASSERT_TRUE(trials.ok());
  double fastest = 1e300;
  std::set<std::string> configs;
  int charged = 0;
  for (const auto& t : *trials) {
    if (t.status() != v1::TRIAL_OK) continue;
    if (!configs.insert(t.config()).second) continue;  // the verification re-measure
    ++charged;
    fastest = std::min(fastest, t.time_ns());
  }
  EXPECT_EQ(charged, 20) << "20 distinct configs measured";
  EXPECT_DOUBLE_EQ(done.best().time_ns(), fastest);

  auto found = LookupWorkload(Gemm(1024, 1024, 1024));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->match(), "exact");
  EXPECT_EQ(found->config(), done.best().config());
  EXPECT_GT(found->snapshot_id(), 0);
}

TEST_F(SchedulerTest, AConfigThatFailsVerificationIsNeverPublished) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 12, /*seed=*/5));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  // First learn which config would win, then run the same job again with it broken.
  v1::Job honest = RunToEnd(job->id(), worker);
  ASSERT_EQ(honest.state(), v1::JOB_COMPLETED);
  const std::string winner = honest.best().config();

  // Cold, so that the second job repeats the first one's search (same seed, same times) and
  // measures the winner as its fastest; warm-started from the first job it would search elsewhere.
  v1::SubmitJobRequest repeat = Job(Gemm(1024, 1024, 1024), 12, /*seed=*/5);
  repeat.set_cold_start(true);
  auto again = scheduler_->Submit(repeat);
  ASSERT_TRUE(again.ok());
  v1::Job done = RunToCompletion(again->id(), worker, {winner});
  EXPECT_NE(done.best().config(), winner);
  EXPECT_GT(done.best().time_ns(), honest.best().time_ns());
  EXPECT_THAT(done.message(), HasSubstr("failed verification"));
  auto found = LookupWorkload(Gemm(1024, 1024, 1024));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->config(), done.best().config()) << "the newest publication wins";
}

// The worker's entry in ListWorkers (a failure when absent).
v1::WorkerInfo WorkerNamed(Scheduler& scheduler, const std::string& id) {
  for (const v1::WorkerInfo& w : scheduler.ListWorkers()) {
    if (w.worker_id() == id) return w;
  }
  ADD_FAILURE() << "no worker " << id;
  return v1::WorkerInfo();
}

TEST_F(SchedulerTest, ImplausibleReportsAreRuntimeErrorsWithTheirReasonAndQuarantineTheirWorker) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 8));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  // The first batch lies in every way a report can: a time below the roofline, an impossible
  // number, a time that is not its samples' median, and a claim of verification without samples.
  // Its worker is quarantined; an honest one measures everything again.
  std::vector<v1::TrialSpec> specs = Lease(worker, 4);
  ASSERT_EQ(specs.size(), 4u);
  std::vector<v1::TrialResult> lies;
  for (const v1::TrialSpec& spec : specs) lies.push_back(Measure(spec));
  SetTime(lies[0], 1.0);
  SetTime(lies[1], -100.0);
  lies[2].set_time_ns(FakeTime(specs[2].config()) / 2);
  lies[3].clear_samples_ns();
  lies[3].set_verified(true);
  EXPECT_EQ(Report(worker, lies).accepted(), 4);
  EXPECT_EQ(WorkerNamed(*scheduler_, worker).state(), "quarantined");
  EXPECT_THAT(WorkerNamed(*scheduler_, worker).quarantine_reason(), HasSubstr("report rejected"));
  const std::string honest = RegisterWorker();
  v1::Job done = RunToCompletion(job->id(), honest);

  std::vector<TrialRecord> stored;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), stored));
  std::map<int64_t, TrialRecord> by_id;
  for (const TrialRecord& t : stored) by_id[t.id] = t;
  const char* const reasons[] = {"beats the workload's roofline", "not a finite positive number",
                                 "is not the median of its samples", "without samples"};
  for (int i = 0; i < 4; ++i) {
    const TrialRecord& t = by_id.at(specs[i].trial_id());
    EXPECT_EQ(t.status, TrialStatus::kRuntimeError) << i;
    EXPECT_THAT(t.message, HasSubstr("report rejected: ")) << i;
    EXPECT_THAT(t.message, HasSubstr(reasons[i])) << i;
    EXPECT_FALSE(t.time_ns.has_value()) << i;
    EXPECT_FALSE(t.verified) << i;
  }
  EXPECT_EQ(done.trials().total(), 8);
  EXPECT_EQ(done.trials().failed(), 0) << "the lies are not charged: their configs are re-measured";
  std::set<std::string> remeasured;
  for (const TrialRecord& t : stored) {
    if (t.worker_id == honest && t.status == TrialStatus::kOk) remeasured.insert(t.config);
  }
  for (const v1::TrialSpec& spec : specs) EXPECT_EQ(remeasured.count(spec.config()), 1u);
  EXPECT_GE(done.best().time_ns(), kFastNs);
  auto found = LookupWorkload(Gemm(1024, 1024, 1024));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->config(), done.best().config());
  EXPECT_GE(found->time_ns(), kFastNs);
}

TEST_F(SchedulerTest, AWorkersClaimOfVerificationDoesNotSkipTheFinalReMeasure) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 6));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  v1::Job done = DriveToEnd(job->id(), [&] {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(worker, 8)) {
      results.push_back(Measure(spec));
      results.back().set_verified(true);  // claimed, whatever the protocol asked
    }
    if (!results.empty()) Report(worker, results);
    return !results.empty();
  });
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED);
  std::vector<TrialRecord> stored;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), stored));
  int verifications = 0;
  for (const TrialRecord& t : stored) {
    if (t.is_verify && t.config == done.best().config()) ++verifications;
  }
  EXPECT_EQ(verifications, 1) << "the published best was re-measured by the server's request";
}

TEST_F(SchedulerTest, TheBestIsVerifiedByAnotherWorkerThanTheOneThatMeasuredIt) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 4));
  ASSERT_TRUE(job.ok());
  const std::string measurer = RegisterWorker();
  const std::string checker = RegisterWorker();
  // The measurer runs the whole search; the verification is then not offered to it.
  int measured = 0;
  while (measured < 4) {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(measurer, 8)) {
      EXPECT_NE(spec.protocol().verify(), "always") << "a verification went to its measurer";
      results.push_back(Measure(spec));
    }
    ASSERT_FALSE(results.empty());
    measured += static_cast<int>(results.size());
    Report(measurer, results);
  }
  EXPECT_TRUE(Lease(measurer, 8).empty());
  std::vector<v1::TrialSpec> verify = Lease(checker, 8);
  ASSERT_EQ(verify.size(), 1u);
  EXPECT_EQ(verify[0].protocol().verify(), "always");
  Report(checker, {Measure(verify[0])});
  v1::Job done = RunToCompletion(job->id(), checker);
  EXPECT_EQ(done.best().config(), verify[0].config());
}

TEST_F(SchedulerTest, ABestWhoseReMeasureDisagreesWithItsTimeIsNotPublished) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 8));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  // Every search result is honest but one, reported 30% too fast: plausible, above the
  // roofline, and the fastest of all. Its re-measure tells the truth.
  std::string flattered;
  v1::Job done = DriveToEnd(job->id(), [&] {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(worker, 8)) {
      results.push_back(Measure(spec));
      if (spec.protocol().verify() != "always" && flattered.empty() && !spec.config().empty()) {
        flattered = spec.config();
        SetTime(results.back(), 0.7 * kFastNs);
      }
    }
    if (!results.empty()) Report(worker, results);
    return !results.empty();
  });
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED);
  EXPECT_NE(done.best().config(), flattered);
  EXPECT_GE(done.best().time_ns(), kFastNs);
  EXPECT_THAT(done.message(), HasSubstr("failed verification"));
}

TEST_F(SchedulerTest, AWorkerAnotherContradictsIsQuarantinedAndItsResultsAreMeasuredAgain) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 6));
  ASSERT_TRUE(job.ok());
  const std::string liar = RegisterWorker();
  const std::string honest = RegisterWorker();
  // The liar runs the whole search, every time 30% too fast: plausible, above the roofline.
  std::set<std::string> lied;
  while (static_cast<int>(lied.size()) < 6) {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(liar, 8)) {
      results.push_back(Measure(spec));
      SetTime(results.back(), 0.7 * results.back().time_ns());
      lied.insert(spec.config());
    }
    ASSERT_FALSE(results.empty());
    Report(liar, results);
  }
  // The honest worker's verification contradicts the liar's fastest time; with no third worker
  // the faster report is the suspect.
  v1::Job done = RunToCompletion(job->id(), honest);
  const v1::WorkerInfo quarantined = WorkerNamed(*scheduler_, liar);
  EXPECT_EQ(quarantined.state(), "quarantined");
  EXPECT_THAT(quarantined.quarantine_reason(), HasSubstr("re-measured"));
  EXPECT_EQ(WorkerNamed(*scheduler_, honest).state(), "alive");
  v1::LeaseRequest request;
  request.set_worker_id(liar);
  request.set_max_trials(1);
  std::promise<absl::StatusOr<v1::LeaseResponse>> refused;
  scheduler_->Lease(request,
                    [&](absl::StatusOr<v1::LeaseResponse> r) { refused.set_value(std::move(r)); });
  EXPECT_EQ(refused.get_future().get().status().code(), absl::StatusCode::kPermissionDenied);
  // Every config the liar measured was measured again by the honest worker (its fastest by the
  // verification that caught the lie), and the published best is the honest measurements' best.
  std::vector<TrialRecord> stored;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), stored));
  std::set<std::string> remeasured;
  double honest_best = std::numeric_limits<double>::infinity();
  for (const TrialRecord& t : stored) {
    if (t.worker_id != honest || t.status != TrialStatus::kOk) continue;
    remeasured.insert(t.config);
    honest_best = std::min(honest_best, *t.time_ns);
  }
  EXPECT_EQ(remeasured, lied);
  EXPECT_EQ(done.best().time_ns(), honest_best);
  EXPECT_EQ(done.best().time_ns(), FakeTime(done.best().config()));
  EXPECT_EQ(done.trials().total(), 6) << "the budget is charged for the 6 honest measurements";
  EXPECT_GE(done.trials().retried(), 5) << "the lies measured again were not charged twice";
}

TEST_F(SchedulerTest, WithAThirdWorkerATieBreakQuarantinesAVerifierThatSlandersAnHonestTime) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 4));
  ASSERT_TRUE(job.ok());
  const std::string measurer = RegisterWorker();
  const std::string slanderer = RegisterWorker();
  const std::string third = RegisterWorker();
  int measured = 0;
  while (measured < 4) {
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(measurer, 8)) results.push_back(Measure(spec));
    ASSERT_FALSE(results.empty());
    measured += static_cast<int>(results.size());
    Report(measurer, results);
  }
  // The slanderer takes the verification and reports the best 50% slower than it is.
  std::vector<v1::TrialSpec> verify = Lease(slanderer, 8);
  ASSERT_EQ(verify.size(), 1u);
  v1::TrialResult slander = Measure(verify[0]);
  SetTime(slander, 1.5 * slander.time_ns());
  Report(slanderer, {slander});
  EXPECT_TRUE(Lease(slanderer, 8).empty()) << "the tie-break is not the slanderer's";
  EXPECT_TRUE(Lease(measurer, 8).empty()) << "nor the measurer's";
  std::vector<v1::TrialSpec> tie_break = Lease(third, 8);
  ASSERT_EQ(tie_break.size(), 1u);
  EXPECT_EQ(tie_break[0].config(), verify[0].config());
  Report(third, {Measure(tie_break[0])});
  v1::Job done = RunToCompletion(job->id(), third);
  EXPECT_EQ(done.best().config(), verify[0].config()) << "the honest best is published";
  EXPECT_EQ(WorkerNamed(*scheduler_, slanderer).state(), "quarantined");
  EXPECT_EQ(WorkerNamed(*scheduler_, measurer).state(), "alive");
}

// A quarantined worker does not come back under a new id: the token it registered with
// registers no other worker, also after a restart; other tokens still do.
TEST_F(SchedulerTest, AQuarantinedWorkersTokenRegistersNoOtherWorkerAlsoAfterARestart) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 8));
  ASSERT_TRUE(job.ok());
  const std::string liar = RegisterWorker(8, "fingerprint-of-the-liars-token");
  // A second worker registered with the same token before the lie keeps its own standing.
  const std::string sibling = RegisterWorker(8, "fingerprint-of-the-liars-token");
  std::vector<v1::TrialSpec> specs = Lease(liar, 1);
  ASSERT_EQ(specs.size(), 1u);
  v1::TrialResult lie = Measure(specs[0]);
  SetTime(lie, 1.0);  // below the roofline: rejected, and its worker quarantined
  Report(liar, {lie});
  ASSERT_EQ(WorkerNamed(*scheduler_, liar).state(), "quarantined");
  EXPECT_EQ(WorkerNamed(*scheduler_, sibling).state(), "alive");

  v1::RegisterRequest again;
  again.set_name("innocent-looking");
  again.set_slots(1);
  absl::StatusOr<v1::RegisterResponse> refused =
      scheduler_->Register(again, "fingerprint-of-the-liars-token");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("token is quarantined"));
  EXPECT_TRUE(scheduler_->Register(again, "fingerprint-of-another-token").ok());
  EXPECT_TRUE(scheduler_->Register(again, "").ok());  // no tokens: judged per worker id only

  Open();  // a new scheduler on the same store, as after a restart
  refused = scheduler_->Register(again, "fingerprint-of-the-liars-token");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_TRUE(scheduler_->Register(again, "fingerprint-of-another-token").ok());
}

// A restarted server does not trust a quarantined worker's stored results: it measures them
// again.
TEST_F(SchedulerTest, AfterARestartAQuarantinedWorkersResultsAreMeasuredAgain) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 8));
  ASSERT_TRUE(job.ok());
  const std::string liar = RegisterWorker();
  std::set<std::string> lied;
  for (const auto& spec : Lease(liar, 3)) {
    v1::TrialResult r = Measure(spec);
    SetTime(r, 0.7 * r.time_ns());
    lied.insert(spec.config());
    Report(liar, {r});
  }
  ASSERT_TRUE(store_->QuarantineWorker(liar, "test").ok());
  Open();  // a new scheduler on the same store, as after a crash
  v1::Job done = RunToCompletion(job->id(), RegisterWorker());
  EXPECT_EQ(done.best().time_ns(), FakeTime(done.best().config()));
  std::vector<TrialRecord> stored;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), stored));
  std::set<std::string> remeasured;
  for (const TrialRecord& t : stored) {
    if (t.worker_id != liar && !t.is_verify && lied.count(t.config)) remeasured.insert(t.config);
  }
  EXPECT_EQ(remeasured, lied);
}

// With noise, a config whose search measurement was a lucky fluke does not win: the top
// candidates are re-measured with more repeats (not charged; one round here), and the winner is
// the lowest trimmed mean of those re-measures, published with its interval.
TEST_F(SchedulerTest, WithNoiseTheTopCandidatesAreReMeasuredAndALuckyFlukeDoesNotWin) {
  SchedulerOptions options;
  options.noise_sigma = 0.05;
  options.repeats = 5;
  options.promote_top = 3;
  options.promote_repeats = 20;
  options.promote_rounds = 1;
  Open(options);
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 6));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  std::string fluke;
  std::map<std::string, int> promoted;  // config -> repeats asked
  // Samples around the config's true time, +-2%; the fluke's search samples are 20% fast.
  v1::Job done = DriveWithSpreadSamples(job->id(), worker, [&](const v1::TrialSpec& spec) {
    const int repeats = spec.protocol().repeats();
    double center = FakeTime(spec.config());
    if (repeats == 20) {
      promoted[spec.config()] = repeats;
    } else if (spec.protocol().verify() != "always" && fluke.empty() && !spec.config().empty() &&
               spec.trial_id() > 1) {
      fluke = spec.config();
    }
    if (spec.config() == fluke && repeats != 20 && spec.protocol().verify() != "always") {
      center *= 0.8;
    }
    return center;
  });
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED);
  EXPECT_EQ(promoted.size(), 3u) << "the top 3 were re-measured with 20 repeats";
  EXPECT_EQ(promoted.count(fluke), 1u) << "the fluke was among the top";
  EXPECT_NE(done.best().config(), fluke);
  EXPECT_EQ(done.trials().total(), 6) << "re-measures are not charged";
  EXPECT_EQ(done.best().samples(), 20);
  EXPECT_GT(done.best().time_ci_ns(), 0);
  EXPECT_NEAR(done.best().time_ns(), FakeTime(done.best().config()),
              0.03 * FakeTime(done.best().config()));
  auto found = LookupWorkload(Gemm(1024, 1024, 1024));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->config(), done.best().config());
  EXPECT_EQ(found->samples(), 20);
  EXPECT_DOUBLE_EQ(found->noise_sigma(), 0.05);
  EXPECT_EQ(found->time_ci_ns(), done.best().time_ci_ns());

  // After a restart the stored job shows the same winner (not the fastest search result), in
  // GetJob and in ListJobs.
  Open(options);
  absl::StatusOr<v1::Job> stored = scheduler_->GetJob(job->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  absl::StatusOr<std::vector<v1::Job>> listed = scheduler_->ListJobs(10, 0);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  for (const v1::Job& view : {*stored, listed->front()}) {
    EXPECT_EQ(view.best().config(), done.best().config());
    EXPECT_EQ(view.best().time_ns(), done.best().time_ns());
    EXPECT_EQ(view.best().time_ci_ns(), done.best().time_ci_ns());
    EXPECT_EQ(view.best().samples(), 20);
  }
}

TEST_F(SchedulerTest, PromotionRacesAndDropsAConfigOnceItsIntervalLiesAboveTheLeaders) {
  SchedulerOptions options;
  options.noise_sigma = 0.05;
  options.repeats = 5;
  options.promote_top = 4;
  options.promote_repeats = 10;
  options.promote_rounds = 3;
  Open(options);
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 8));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  // In the race, the first two configs re-measured are 0.1% apart, well inside the noise; the
  // others are 30% slower.
  std::vector<std::string> raced;        // in order of first re-measure
  std::map<std::string, int> race_runs;  // config -> runs asked over all rounds
  v1::Job done = DriveWithSpreadSamples(job->id(), worker, [&](const v1::TrialSpec& spec) {
    const int repeats = spec.protocol().repeats();
    const bool verify = spec.protocol().verify() == "always";
    if (repeats == 10 && !verify) {
      if (race_runs[spec.config()] == 0) raced.push_back(spec.config());
      race_runs[spec.config()] += repeats;
    }
    const auto place = std::find(raced.begin(), raced.end(), spec.config());
    if (place != raced.end() && (repeats == 10 || verify)) {  // the race and the final verify
      const double factor[] = {1.001, 1.0, 1.3, 1.3};
      return kFastNs * factor[place - raced.begin()];
    }
    return FakeTime(spec.config());
  });
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED);
  ASSERT_EQ(raced.size(), 4u) << "the top 4 entered the race";
  EXPECT_EQ(race_runs[raced[0]], 30) << "close to the leader: raced all 3 rounds";
  EXPECT_EQ(race_runs[raced[1]], 30);
  EXPECT_EQ(race_runs[raced[2]], 10) << "clearly slower: out after the first round";
  EXPECT_EQ(race_runs[raced[3]], 10);
  EXPECT_EQ(done.best().config(), raced[1]) << "the lower trimmed mean wins";
  EXPECT_EQ(done.best().samples(), 30);
  EXPECT_EQ(done.trials().total(), 8) << "re-measures are not charged";
}

TEST_F(SchedulerTest, EveryLookupAnswerIsValidForTheAskedWorkloadAdaptedWhenItHadToBe) {
  v1::Job tuned;
  const std::string worker = RegisterWorker();
  ASSERT_NO_FATAL_FAILURE(TuneToCompletion(Job(Gemm(1024, 1024, 1024), 12), worker, tuned));
  int adapted = 0;
  for (const v1::Workload& asked :
       {Gemm(512, 512, 512), Gemm(256, 256, 256), Gemm(128, 128, 128), Gemm(4096, 1024, 256),
        Gemm(1024, 1024, 1024, "snc3"), Gemm(64, 64, 64, "snc3")}) {
    auto found = LookupWorkload(asked);
    ASSERT_TRUE(found.ok()) << found.status();
    auto resolved = kernels::Resolve(asked);
    ASSERT_TRUE(resolved.ok());
    auto space = resolved->kernel->SpaceFor(resolved->problem, resolved->target);
    ASSERT_TRUE(space.ok());
    auto config = Config::Parse(found->config());
    ASSERT_TRUE(config.ok()) << found->config();
    EXPECT_TRUE(space->Validate(*config).ok())
        << found->match() << " answer for " << asked.ShortDebugString() << ": "
        << space->Validate(*config).message();
    if (found->match() != "default" && found->config() != tuned.best().config()) {
      EXPECT_TRUE(found->adapted()) << asked.ShortDebugString();
      EXPECT_FALSE(found->adaptation().empty());
    }
    adapted += found->adapted();
  }
  EXPECT_GT(adapted, 0) << "a 1024^3 config needs adapting for some of these shapes";
}

TEST_F(SchedulerTest, AnExpiredLeaseIsRecordedAsWorkerLostAndRetriedWithoutCharge) {
  SchedulerOptions options;
  options.lease_ms = 30;
  Open(options);
  auto job = scheduler_->Submit(Job(Gemm(512, 512, 512), 6));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  auto abandoned = Lease(worker, 2);
  ASSERT_EQ(abandoned.size(), 2u);
  // Keep the worker alive (heartbeat) but never report: the leases expire.
  for (int i = 0; i < 20; ++i) {
    v1::HeartbeatRequest beat;
    beat.set_worker_id(worker);
    ASSERT_TRUE(scheduler_->Heartbeat(beat).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // A late report for an expired lease is ignored, not double counted.
  v1::ReportResponse late = Report(worker, {Measure(abandoned[0])});
  EXPECT_EQ(late.accepted(), 0);
  EXPECT_EQ(late.ignored(), 1);

  v1::Job done = RunToCompletion(job->id(), worker);
  EXPECT_EQ(done.trials().total(), 6);
  EXPECT_GE(done.trials().retried(), 2);
  std::vector<TrialRecord> trials;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), trials));
  int lost = 0;
  std::set<std::string> measured;
  for (const auto& t : trials) {
    if (t.status == TrialStatus::kWorkerLost) ++lost;
    if (t.status == TrialStatus::kOk) measured.insert(t.config);
  }
  EXPECT_GE(lost, 2);
  EXPECT_TRUE(measured.count(abandoned[0].config())) << "the lost config is measured again";
}

// A lease whose reply never reached the worker (a link cut while the reply was in flight): the
// worker's heartbeats do not list it, so it is released at once instead of after lease_ms, and
// the trial it does list keeps its lease.
TEST_F(SchedulerTest, ALeaseTheWorkerDoesNotHoldIsReleasedByItsHeartbeats) {
  SchedulerOptions options;
  options.lease_ms = 600'000;  // only the heartbeat rule can release it within this test
  options.heartbeat_interval_ms = 60'000;
  options.housekeeping_ms = 5;
  Open(options);
  auto job = scheduler_->Submit(Job(Gemm(512, 512, 512), 6));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  auto leased = Lease(worker, 2);
  ASSERT_EQ(leased.size(), 2u);
  auto beat_holding_first = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    v1::HeartbeatRequest beat;
    beat.set_worker_id(worker);
    beat.add_running_trial_ids(leased[0].trial_id());
    ASSERT_TRUE(scheduler_->Heartbeat(beat).ok());
  };
  // Two answers must have gone out after the grant before an unlisted lease counts as lost.
  ASSERT_NO_FATAL_FAILURE(beat_holding_first());
  ASSERT_NO_FATAL_FAILURE(beat_holding_first());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler_->OutstandingLeases(), 2u) << "released before two answers went out";
  ASSERT_NO_FATAL_FAILURE(beat_holding_first());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(scheduler_->OutstandingLeases(), 1u);
  EXPECT_EQ(Report(worker, {Measure(leased[0])}).accepted(), 1) << "a listed lease is kept";
  EXPECT_EQ(Report(worker, {Measure(leased[1])}).ignored(), 1) << "the released one was re-queued";
  std::vector<TrialRecord> trials;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), trials));
  int lost = 0;
  for (const TrialRecord& t : trials) {
    if (t.status != TrialStatus::kWorkerLost) continue;
    ++lost;
    EXPECT_EQ(t.config, leased[1].config());
    EXPECT_THAT(t.message, ::testing::HasSubstr("never received it"));
  }
  EXPECT_EQ(lost, 1);
}

TEST_F(SchedulerTest, CancellingStopsTheJobAndTellsTheWorkerByHeartbeat) {
  auto job = scheduler_->Submit(Job(Gemm(512, 512, 512), 50));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker();
  auto leased = Lease(worker, 1);
  ASSERT_EQ(leased.size(), 1u);
  auto cancelled = scheduler_->Cancel(job->id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::JOB_CANCELLED);
  v1::HeartbeatRequest beat;
  beat.set_worker_id(worker);
  beat.add_running_trial_ids(leased[0].trial_id());
  auto answer = scheduler_->Heartbeat(beat);
  ASSERT_TRUE(answer.ok());
  ASSERT_EQ(answer->cancelled_trial_ids_size(), 1);
  EXPECT_EQ(answer->cancelled_trial_ids(0), leased[0].trial_id());
  auto again = scheduler_->Cancel(job->id());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->Cancel(999).status().code(), absl::StatusCode::kNotFound);
  auto stored = store_->GetJob(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, JobState::kCancelled);
}

TEST_F(SchedulerTest, LookupFallsBackFromExactToNearestToOtherTargetToDefault) {
  const std::string worker = RegisterWorker();
  v1::Job tuned;
  ASSERT_NO_FATAL_FAILURE(TuneToCompletion(Job(Gemm(1024, 1024, 1024), 6), worker, tuned));

  auto lookup = [&](const v1::Workload& w) {
    auto found = LookupWorkload(w);
    EXPECT_TRUE(found.ok()) << found.status();
    return found.ok() ? *found : v1::LookupResponse();
  };
  EXPECT_EQ(lookup(Gemm(1024, 1024, 1024)).match(), "exact");
  v1::LookupResponse near = lookup(Gemm(2048, 1024, 1024));
  EXPECT_EQ(near.match(), "nearest");
  EXPECT_EQ(near.config(), tuned.best().config());
  v1::LookupResponse other = lookup(Gemm(1024, 1024, 1024, "snc3"));
  EXPECT_EQ(other.match(), "other_target");
  EXPECT_EQ(other.tuned_target(), "snc2");
  v1::LookupResponse fallback = lookup(Gemm(64, 64, 64, "snc3"));
  EXPECT_EQ(fallback.match(), "default");
  EXPECT_FALSE(fallback.config().empty());
}

TEST_F(SchedulerTest, NoWorkerHoldsMoreTrialsThanItsSlotsAllow) {
  // A budget large enough (2,048 / 32) for max_in_flight_per_job to be the job's limit.
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 2048));
  ASSERT_TRUE(job.ok());
  // One slot: at most kMaxLeaseDepthPerSlot trials held, however many the worker asks for.
  const std::string small = RegisterWorker(1);
  std::vector<v1::TrialSpec> first = Lease(small, 100);
  EXPECT_EQ(first.size(), size_t{kMaxLeaseDepthPerSlot});
  EXPECT_TRUE(Lease(small, 100).empty()) << "it holds all it may";
  // A result frees its place as it arrives.
  ASSERT_EQ(Report(small, {Measure(first[0])}).accepted(), 1);
  EXPECT_EQ(Lease(small, 100).size(), 1u);
  // Four slots may hold 64, but the job has at most max_in_flight_per_job (64) in flight in all.
  const std::string big = RegisterWorker(4);
  EXPECT_EQ(Lease(big, 100).size(), size_t{64 - kMaxLeaseDepthPerSlot});
  EXPECT_TRUE(Lease(big, 100).empty()) << "the job's in-flight limit";
  EXPECT_EQ(scheduler_->GetJob(job->id())->trials().total(), 1) << "reported so far";
}

TEST_F(SchedulerTest, ASmallBudgetIsProposedTwoPerSlotAhead) {
  // 200 / 32 is less than two per slot: one running and one ready, however deep workers lease.
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 200));
  ASSERT_TRUE(job.ok());
  const std::string worker = RegisterWorker(3);
  std::vector<v1::TrialSpec> first = Lease(worker, 100);
  EXPECT_EQ(first.size(), 6u);
  // Results free places: the next proposals are made after the strategy has seen them.
  std::vector<v1::TrialResult> results;
  for (const auto& spec : first) results.push_back(Measure(spec));
  ASSERT_EQ(Report(worker, results).accepted(), 6);
  EXPECT_EQ(Lease(worker, 100).size(), 6u);
}

// Lockstep: the configs a job proposes depend on its seed only, not on the order or grouping in
// which its results come back, and no more than a batch is out at once.
TEST_F(SchedulerTest, ALockstepJobProposesTheSameWhateverOrderItsResultsArriveIn) {
  const std::string worker = RegisterWorker(4);
  auto run = [&](bool reversed) {
    v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), 40);
    request.set_lockstep(4);
    request.set_cold_start(true);  // the first run is not a neighbour of the second
    auto job = scheduler_->Submit(request);
    EXPECT_TRUE(job.ok()) << job.status();
    std::vector<std::string> proposed;
    if (!job.ok()) return proposed;
    v1::Job done = DriveToEnd(job->id(), [&] {
      std::vector<v1::TrialSpec> batch = Lease(worker, 100);
      EXPECT_LE(batch.size(), 4u);
      EXPECT_TRUE(Lease(worker, 100).empty()) << "the next batch waits for this one";
      for (const auto& spec : batch) proposed.push_back(spec.config());
      if (reversed) {  // one at a time, the last proposed first
        for (auto it = batch.rbegin(); it != batch.rend(); ++it) Report(worker, {Measure(*it)});
      } else if (!batch.empty()) {
        std::vector<v1::TrialResult> results;
        for (const auto& spec : batch) results.push_back(Measure(spec));
        Report(worker, results);
      }
      return !batch.empty();
    });
    EXPECT_EQ(done.state(), v1::JOB_COMPLETED);
    EXPECT_EQ(done.trials().total(), 40);
    return proposed;
  };
  const std::vector<std::string> in_order = run(false);
  const std::vector<std::string> reversed = run(true);
  EXPECT_GE(in_order.size(), 40u);
  EXPECT_EQ(in_order, reversed);
}

// The lockstep batch is stored with the job: resumed after a restart, it still proposes in
// batches (pipelined, a 40-trial job on a 4-slot worker would have 8 in flight).
TEST_F(SchedulerTest, ARestartedSchedulerKeepsALockstepJobInLockstep) {
  v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), 40);
  request.set_lockstep(3);
  auto job = scheduler_->Submit(request);
  ASSERT_TRUE(job.ok()) << job.status();
  std::string worker = RegisterWorker(4);
  for (size_t batch : {1u, 3u}) {  // the default config first, queued with the job; then 3
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(worker, 100)) results.push_back(Measure(spec));
    ASSERT_EQ(results.size(), batch);
    ASSERT_EQ(Report(worker, results).accepted(), static_cast<int>(batch));
  }

  Open();  // a new scheduler on the same store, as after a crash
  worker = RegisterWorker(4);
  EXPECT_EQ(Lease(worker, 100).size(), 3u);
  EXPECT_TRUE(Lease(worker, 100).empty()) << "the next batch waits for this one";
}

TEST_F(SchedulerTest, ALockstepOutsideItsRangeIsRejectedNamingTheField) {
  for (int lockstep : {-1, 65}) {
    v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), 16);
    request.set_lockstep(lockstep);
    auto job = scheduler_->Submit(request);
    ASSERT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(job.status().message()), HasSubstr("lockstep"));
  }
}

TEST_F(SchedulerTest, ARestartedSchedulerResumesAJobWithoutRepeatingConfigs) {
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 16));
  ASSERT_TRUE(job.ok());
  std::string worker = RegisterWorker();
  std::vector<v1::TrialResult> results;
  for (const auto& spec : Lease(worker, 5)) results.push_back(Measure(spec));
  ASSERT_EQ(Report(worker, results).accepted(), 5);

  Open();  // a new scheduler on the same store, as after a crash
  auto resumed = scheduler_->GetJob(job->id());
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->trials().total(), 5);
  worker = RegisterWorker();
  v1::Job done = RunToCompletion(job->id(), worker);
  EXPECT_EQ(done.trials().total(), 16);
  std::vector<TrialRecord> trials;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(job->id(), trials));
  std::set<std::string> configs;
  for (const auto& t : trials) {
    if (t.is_verify) continue;
    EXPECT_TRUE(configs.insert(t.config).second) << "measured twice: " << t.config;
  }
}

// ListJobs answers stored jobs from one batched read of their trials, live ones from memory; both
// must read as GetJob answers them.
TEST_F(SchedulerTest, ListJobsShowsStoredAndLiveJobsAsGetJobDoes) {
  std::vector<int64_t> ids;
  for (int64_t size : {256, 512}) {
    auto job = scheduler_->Submit(Job(Gemm(size, size, size), 6));
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
    EXPECT_EQ(RunToEnd(job->id(), RegisterWorker()).state(), v1::JOB_COMPLETED);
  }
  Open();  // a new scheduler: the finished jobs are only in the store now
  auto live = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 6));
  ASSERT_TRUE(live.ok()) << live.status();
  ids.push_back(live->id());

  auto jobs = scheduler_->ListJobs(10);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const v1::Job& listed = (*jobs)[i];
    EXPECT_EQ(listed.id(), ids[2 - i]) << "newest first";
    auto got = scheduler_->GetJob(listed.id());
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(listed.SerializeAsString(), got->SerializeAsString()) << "job " << listed.id();
  }
  EXPECT_EQ((*jobs)[1].trials().total(), 6);
  EXPECT_TRUE((*jobs)[1].has_best());
  EXPECT_EQ((*jobs)[0].state(), v1::JOB_QUEUED);
}

TEST_F(SchedulerTest, WorkerCallsFromUnknownWorkersAreRejected) {
  v1::LeaseRequest r;
  r.set_worker_id("ghost");
  r.set_max_trials(1);
  std::promise<absl::StatusOr<v1::LeaseResponse>> done;
  scheduler_->Lease(r, [&](auto response) { done.set_value(std::move(response)); });
  auto response = done.get_future().get();
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("register again"));
  v1::HeartbeatRequest beat;
  beat.set_worker_id("ghost");
  EXPECT_FALSE(scheduler_->Heartbeat(beat)->known());
  r.set_worker_id(RegisterWorker());
  r.set_max_trials(0);
  std::promise<absl::StatusOr<v1::LeaseResponse>> bad;
  scheduler_->Lease(r, [&](auto response) { bad.set_value(std::move(response)); });
  EXPECT_EQ(bad.get_future().get().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, ANewJobIsWarmStartedFromCompletedNeighboursUnlessAskedNotTo) {
  const std::string worker = RegisterWorker();
  auto first_proposals = [&](bool cold) {
    v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), 40, /*seed=*/9);
    request.set_cold_start(cold);
    auto job = scheduler_->Submit(request);
    EXPECT_TRUE(job.ok());
    std::set<std::string> configs;
    for (const auto& spec : Lease(worker, 6)) configs.insert(spec.config());
    EXPECT_TRUE(scheduler_->Cancel(job->id()).ok());  // cancelled: no warm start for others
    return configs;
  };
  const std::set<std::string> cold_before = first_proposals(/*cold=*/true);
  v1::Job tuned;
  ASSERT_NO_FATAL_FAILURE(TuneToCompletion(Job(Gemm(1024, 1024, 1024), 12), worker, tuned));
  // The earlier job's best config is among the first proposals of a warm job. (A neighbour's best
  // need not be valid for another shape, e.g. 1024^3's best can overflow SBUF at 2048.) A cold job
  // proposes what it would have proposed without the earlier job. (The earlier best may be among
  // those too: every job of a workload starts from the same configs ranked best by the estimate.)
  const std::set<std::string> warm = first_proposals(/*cold=*/false);
  EXPECT_TRUE(warm.count(tuned.best().config()));
  const std::set<std::string> cold_after = first_proposals(/*cold=*/true);
  EXPECT_EQ(cold_after, cold_before);
  EXPECT_NE(warm, cold_after);
}

// A neighbouring workload's best config is offered whichever of its jobs found it: later jobs of
// other workloads (here four, as many as the neighbours used) do not push it out.
TEST_F(SchedulerTest, ANeighboursBestIsOfferedWhicheverOfItsJobsFoundIt) {
  const std::string worker = RegisterWorker();
  v1::Job tuned;
  ASSERT_NO_FATAL_FAILURE(TuneToCompletion(Job(Gemm(1024, 1024, 1024), 12), worker, tuned));
  for (int k = 0; k < 4; ++k) {
    v1::Job other;
    ASSERT_NO_FATAL_FAILURE(
        TuneToCompletion(Job(Gemm(512, 512, 512), 4, /*seed=*/20 + k), worker, other));
  }
  auto job = scheduler_->Submit(Job(Gemm(1024, 1024, 1024), 40, /*seed=*/9));
  ASSERT_TRUE(job.ok());
  std::set<std::string> first;
  for (const auto& spec : Lease(worker, 8)) first.insert(spec.config());
  EXPECT_TRUE(first.count(tuned.best().config())) << tuned.best().config();
  EXPECT_TRUE(scheduler_->Cancel(job->id()).ok());
}

// tune-model's rounds: a job that continues the search of its workload measures no config that
// an earlier job of the workload measured (the default excepted: every job measures it), and it
// still spends its budget.
TEST_F(SchedulerTest, AContinuedSearchMeasuresNoConfigOfTheWorkloadsEarlierJobsAgain) {
  const std::string worker = RegisterWorker();
  std::set<std::string> measured;
  std::string default_config;
  for (int round = 0; round < 3; ++round) {
    v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), 12, /*seed=*/7);  // same seed
    request.set_continue_search(true);
    request.set_new_job(true);
    v1::Job done;
    ASSERT_NO_FATAL_FAILURE(TuneToCompletion(request, worker, done));
    EXPECT_EQ(done.trials().total(), 12) << "round " << round;
    std::vector<TrialRecord> trials;
    ASSERT_NO_FATAL_FAILURE(StoredTrials(done.id(), trials));
    for (const TrialRecord& t : trials) {
      if (t.is_verify) continue;
      if (t.is_default) {
        default_config = t.config;
        continue;
      }
      EXPECT_TRUE(measured.insert(t.config).second)
          << "round " << round << " measured " << t.config << " again";
    }
  }
  EXPECT_EQ(measured.size(), 3u * 11);
  // Without it, the same seed proposes what the first job measured.
  v1::SubmitJobRequest plain = Job(Gemm(1024, 1024, 1024), 12, /*seed=*/7);
  plain.set_new_job(true);
  v1::Job again;
  ASSERT_NO_FATAL_FAILURE(TuneToCompletion(plain, worker, again));
  std::vector<TrialRecord> trials;
  ASSERT_NO_FATAL_FAILURE(StoredTrials(again.id(), trials));
  int repeated = 0;
  for (const TrialRecord& t : trials)
    repeated += !t.is_verify && !t.is_default && measured.count(t.config);
  EXPECT_GT(repeated, 0);
}

// tune-model's rounds next to four neighbouring workloads: each round is warm-started from the
// neighbours' best configs, which its own earlier rounds have measured already when the
// neighbours have not moved since. Its strategy must know them as measured (not propose them
// again and again), so every round spends its budget and none ends as if the space were
// exhausted.
TEST_F(SchedulerTest, ContinuedRoundsNextToNeighboursEachSpendTheirBudget) {
  const std::string worker = RegisterWorker(/*slots=*/1);  // tune-model, one worker thread
  std::vector<v1::Workload> rounds = {Gemm(1024, 1024, 1024), Gemm(1024, 1024, 3072),
                                      Gemm(1024, 1024, 4096), Gemm(1024, 1024, 5120)};
  for (int k = 0; k < 3; ++k) rounds.push_back(Gemm(1024, 1024, 2048));  // three in a row
  for (size_t round = 0; round < rounds.size(); ++round) {
    v1::SubmitJobRequest request = Job(rounds[round], 12, /*seed=*/100 + round);
    request.set_continue_search(true);
    auto job = scheduler_->Submit(request);
    ASSERT_TRUE(job.ok()) << job.status();
    // Times that depend on the shape too, so each neighbour has best configs of its own.
    const std::string shape = request.workload().ShortDebugString();
    v1::Job done = DriveToEnd(job->id(), [&] {
      std::vector<v1::TrialResult> results;
      for (const auto& spec : Lease(worker, 8)) {
        results.push_back(Measure(spec));
        SetTime(results.back(), FakeTime(spec.config() + shape));
      }
      if (!results.empty()) Report(worker, results);
      return !results.empty();
    });
    EXPECT_EQ(done.trials().total(), 12) << "round " << round << ": " << done.stopped_by();
  }
}

TEST_F(SchedulerTest, EarlyStopRulesEndTheSearchBeforeTheBudgetAndSaySo) {
  const std::string worker = RegisterWorker();
  v1::SubmitJobRequest patient = Job(Gemm(1024, 1024, 1024), 200);
  patient.set_stop_after_no_improvement(5);
  patient.set_cold_start(true);
  auto job = scheduler_->Submit(patient);
  ASSERT_TRUE(job.ok()) << job.status();
  v1::Job done = RunToCompletion(job->id(), worker);
  EXPECT_LT(done.trials().total(), 200);
  EXPECT_GE(done.trials().total(), 6);
  EXPECT_THAT(done.message(), HasSubstr("stopped early"));

  v1::SubmitJobRequest easy = Job(Gemm(1024, 1024, 1024), 200, /*seed=*/3);
  easy.set_target_time_ns(1e15);  // any result is fast enough
  easy.set_cold_start(true);
  auto second = scheduler_->Submit(easy);
  ASSERT_TRUE(second.ok());
  v1::Job reached = RunToCompletion(second->id(), worker);
  EXPECT_LE(reached.trials().total(), 9) << "stops after the first lease batch";

  v1::SubmitJobRequest bad = Job(Gemm(1024, 1024, 1024), 10);
  bad.set_time_limit_s(-1);
  EXPECT_EQ(scheduler_->Submit(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// Early stops are stored with the job: a scheduler restarted on the same store resumes them.
class SchedulerEarlyStopTest : public SchedulerTest {
 protected:
  // A cold-started job of the given budget whose early stops `set` fills in.
  int64_t SubmitWith(int budget, const std::function<void(v1::SubmitJobRequest&)>& set) {
    v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), budget, /*seed=*/7);
    request.set_cold_start(true);
    set(request);
    auto job = scheduler_->Submit(request);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : 0;
  }

  // Leases one trial and reports it; false when none was ready. A charged trial's time depends
  // only on how many were charged before it (across restarts), not on the config proposed: the
  // first kImproving each set a new best, every later one is slower. A verification re-measure
  // repeats its config's time.
  bool Step(const std::string& worker) {
    std::vector<v1::TrialSpec> specs = Lease(worker, 1);
    if (specs.empty()) return false;
    v1::TrialResult result = Measure(specs[0]);
    if (specs[0].protocol().verify() == "always") {
      ++verifications_;
    } else {
      times_[specs[0].config()] = charged_ < kImproving ? kFastNs - charged_ : 2 * kFastNs;
      ++charged_;
    }
    SetTime(result, times_.at(specs[0].config()));
    EXPECT_EQ(Report(worker, {result}).accepted(), 1);
    return true;
  }

  v1::Job StepToEnd(int64_t job_id, const std::string& worker) {
    return DriveToEnd(job_id, [&] { return Step(worker); });
  }

  static constexpr int kImproving = 4;
  int charged_ = 0;
  int verifications_ = 0;
  std::map<std::string, double> times_;
};

TEST_F(SchedulerEarlyStopTest, ANoImprovementStopInterruptedByARestartStopsAtTheSamePoint) {
  constexpr int kPatience = 5;
  constexpr int kBudget = 100;
  auto patient = [](v1::SubmitJobRequest& r) { r.set_stop_after_no_improvement(kPatience); };

  // Uninterrupted: kImproving new bests, then kPatience charged trials without one.
  const int64_t straight = SubmitWith(kBudget, patient);
  v1::Job reference = StepToEnd(straight, RegisterWorker());
  ASSERT_EQ(reference.state(), v1::JOB_COMPLETED) << reference.message();
  EXPECT_EQ(reference.trials().total(), kImproving + kPatience);
  EXPECT_THAT(reference.message(), HasSubstr("stopped early: no_improvement"));

  // Interrupted three trials into the run without improvement: the restarted scheduler must
  // count those three (a fresh count would stop 3 trials later, no rule would spend the budget).
  charged_ = 0;
  times_.clear();
  const int64_t interrupted = SubmitWith(kBudget, patient);
  std::string worker = RegisterWorker();
  for (int i = 0; i < kImproving + 3; ++i) ASSERT_TRUE(Step(worker));
  Open();
  auto resumed = scheduler_->GetJob(interrupted);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->trials().total(), kImproving + 3);
  EXPECT_EQ(resumed->state(), v1::JOB_RUNNING);
  v1::Job done = StepToEnd(interrupted, RegisterWorker());
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED) << done.message();
  EXPECT_EQ(done.trials().total(), reference.trials().total());
  EXPECT_LT(done.trials().total(), kBudget);
  EXPECT_THAT(done.message(), HasSubstr("stopped early: no_improvement"));
  EXPECT_DOUBLE_EQ(done.best().time_ns(), kFastNs - (kImproving - 1));
}

TEST_F(SchedulerEarlyStopTest, AJobWhoseTargetWasReachedBeforeARestartOnlyVerifiesAfterIt) {
  const int64_t job_id =
      SubmitWith(50, [](v1::SubmitJobRequest& r) { r.set_target_time_ns(1.5 * kFastNs); });
  ASSERT_TRUE(Step(RegisterWorker()));  // the default: kFastNs, the target is reached
  Open();                               // before its verification ran
  const std::string worker = RegisterWorker();
  std::vector<v1::TrialSpec> next = Lease(worker, 8);
  ASSERT_EQ(next.size(), 1u) << "only the best's verification, no new proposals";
  EXPECT_EQ(next[0].protocol().verify(), "always");
  v1::TrialResult verified = Measure(next[0]);
  SetTime(verified, times_.at(next[0].config()));
  Report(worker, {verified});
  v1::Job done = StepToEnd(job_id, worker);
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED) << done.message();
  EXPECT_EQ(done.trials().total(), 1);
  EXPECT_THAT(done.message(), HasSubstr("stopped early: target_reached"));
}

TEST_F(SchedulerEarlyStopTest, ATimeLimitCountsTheDowntimeSinceSubmission) {
  const int64_t job_id = SubmitWith(100, [](v1::SubmitJobRequest& r) { r.set_time_limit_s(1); });
  auto submitted = scheduler_->GetJob(job_id);
  ASSERT_TRUE(submitted.ok());
  std::string worker = RegisterWorker();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Step(worker));
  scheduler_.reset();  // the server is down past the job's one second
  const int64_t wake_ms = submitted->created_unix_ms() + 1100;
  if (NowUnixMs() < wake_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(wake_ms - NowUnixMs()));
  }
  Open();
  auto resumed = scheduler_->GetJob(job_id);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->trials().total(), 3);
  // A clock started at the restart would still have a second to go and propose more trials.
  v1::Job done = StepToEnd(job_id, RegisterWorker());
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED) << done.message();
  EXPECT_EQ(done.trials().total(), 3);
  EXPECT_EQ(verifications_, 1);
  EXPECT_THAT(done.message(), HasSubstr("stopped early: time_limit"));
}

// Effort presets and the time limit as the server applies them.
TEST_F(SchedulerTest, AnEffortFillsTheBudgetAndStopsTheRequestLeftZeroAndNothingElse) {
  for (const search::EffortPreset& preset : search::kEffortPresets) {
    v1::SubmitJobRequest request = Job(Gemm(512, 512, 512), /*budget=*/0);
    request.set_effort(std::string(preset.name));
    auto job = scheduler_->Submit(request);
    ASSERT_TRUE(job.ok()) << preset.name << ": " << job.status();
    EXPECT_EQ(job->effort(), preset.name);
    EXPECT_EQ(job->budget(), preset.budget) << preset.name;
    EXPECT_EQ(job->stop_after_no_improvement(), preset.no_improvement) << preset.name;
    EXPECT_EQ(job->time_limit_s(), 0) << preset.name << ": no preset sets a time limit";
    ASSERT_TRUE(scheduler_->Cancel(job->id()).ok());
  }
  // The request's own budget and stops win over the preset's.
  v1::SubmitJobRequest own = Job(Gemm(512, 512, 512), /*budget=*/7);
  own.set_effort("full");
  own.set_stop_after_no_improvement(3);
  own.set_time_limit_s(9);
  auto job = scheduler_->Submit(own);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->budget(), 7);
  EXPECT_EQ(job->stop_after_no_improvement(), 3);
  EXPECT_EQ(job->time_limit_s(), 9);
  // The stored record says the same after a restart.
  Open();
  auto stored = scheduler_->GetJob(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->effort(), "full");
  EXPECT_EQ(stored->budget(), 7);
  EXPECT_EQ(stored->time_limit_s(), 9);
  // The default preset is what a request without an effort gets: same budget, no early stops.
  const search::EffortPreset* standard = search::FindEffortPreset(search::kDefaultEffort);
  ASSERT_NE(standard, nullptr);
  EXPECT_EQ(standard->no_improvement, 0);
}

TEST_F(SchedulerTest, AJobThatSpentItsBudgetSaysSoAndKeepsSayingItAfterARestart) {
  const std::string worker = RegisterWorker();
  auto job = scheduler_->Submit(Job(Gemm(512, 512, 512), 10));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->stopped_by(), "") << "not stopped while it runs";
  v1::Job done = RunToEnd(job->id(), worker);
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED);
  EXPECT_EQ(done.stopped_by(), "budget");
  EXPECT_EQ(done.trials().total(), 10);
  Open();
  auto stored = scheduler_->GetJob(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->stopped_by(), "budget");

  auto cancelled = scheduler_->Submit(Job(Gemm(512, 512, 512), 10, /*seed=*/2));
  ASSERT_TRUE(cancelled.ok());
  auto after = scheduler_->Cancel(cancelled->id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->stopped_by(), "cancelled");
}

TEST_F(SchedulerTest, ATimeLimitEndsAJobFarFromItsBudgetOnTimeWithItsBestPublished) {
  constexpr int kLimitS = 1;
  constexpr int kBudget = 1'000'000;
  const std::string worker = RegisterWorker();
  v1::SubmitJobRequest request = Job(Gemm(1024, 1024, 1024), kBudget);
  request.set_time_limit_s(kLimitS);
  request.set_cold_start(true);
  const auto start = std::chrono::steady_clock::now();
  auto job = scheduler_->Submit(request);
  ASSERT_TRUE(job.ok()) << job.status();
  // A worker that measures as fast as the fake allows, until the job is final (RunToEnd's round
  // cap could run out first).
  v1::Job done;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    auto now = scheduler_->GetJob(job->id());
    ASSERT_TRUE(now.ok());
    if (now->state() != v1::JOB_QUEUED && now->state() != v1::JOB_RUNNING) {
      done = *now;
      break;
    }
    std::vector<v1::TrialResult> results;
    for (const auto& spec : Lease(worker, 8)) results.push_back(Measure(spec));
    if (!results.empty()) Report(worker, results);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(done.state(), v1::JOB_COMPLETED) << done.message();
  EXPECT_EQ(done.stopped_by(), "time_limit");
  EXPECT_EQ(done.time_limit_s(), kLimitS);
  EXPECT_THAT(done.message(), HasSubstr("stopped early: time_limit"));
  EXPECT_GE(elapsed, std::chrono::seconds(kLimitS));
  // The limit plus the trials in flight, the best's verification and a housekeeping round.
  EXPECT_LT(elapsed, std::chrono::milliseconds(kLimitS * 1000 + 500));
  EXPECT_GT(done.trials().total(), 8) << "it searched until the limit";
  EXPECT_LT(done.trials().total(), kBudget);
  auto found = LookupWorkload(Gemm(1024, 1024, 1024));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->match(), "exact");
  EXPECT_EQ(found->config(), done.best().config());
  EXPECT_EQ(found->job_id(), job->id());
}

}  // namespace
}  // namespace tessel::server

#include "server/store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema/migrations.h"
#include "schema/sqlite.h"
#include "schema/vocab.h"
#include "tests/testing/temp_dir.h"

namespace tessel::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// A fresh directory per test, removed afterwards.
class StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> OpenStore(const StoreOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // A connection to the test database of its own, outside the Store (created when absent).
  std::unique_ptr<sqlite::Database> RawConnection() {
    absl::StatusOr<std::unique_ptr<sqlite::Database>> db =
        sqlite::Database::Open(path_, {.create = true});
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(*db) : nullptr;
  }

  // Runs the script `sql` on a raw connection to the test database, outside the Store.
  void RawExec(const std::string& sql) {
    std::unique_ptr<sqlite::Database> db = RawConnection();
    ASSERT_NE(db, nullptr);
    absl::Status status = db->ExecScript(sql, "test script");
    EXPECT_TRUE(status.ok()) << status;
  }

  // The first column of the first row of `sql`, as an integer (-1 when there is no row).
  int64_t RawInt(const std::string& sql) {
    std::unique_ptr<sqlite::Database> db = RawConnection();
    if (db == nullptr) return -1;
    absl::StatusOr<sqlite::Statement> select = db->Prepare(sql);
    EXPECT_TRUE(select.ok()) << select.status();
    if (!select.ok()) return -1;
    absl::StatusOr<bool> row = select->Step();
    return row.ok() && *row ? select->Int(0) : -1;
  }

  testing::TempDir tmp_{"store_test_"};
  std::filesystem::path dir_ = tmp_.path();
  std::string path_ = tmp_.File("tessel.db");
};

JobRecord MatmulJob() {
  JobRecord job;
  job.workload = {"matmul", "K=512,M=512,N=512", "bf16", "snc2"};
  job.dims_display = "M=512,N=512,K=512";
  job.kernel_version = 3;
  job.target_version = 2;
  job.strategy = "random";
  job.budget = 32;
  job.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: must survive the signed column
  job.default_config = "tile_m=128,tile_n=512,tile_k=128";
  job.roofline_ns = 1234.5;
  job.created_ms = 1700000000123;
  job.time_limit_s = 600;
  job.stop_after_no_improvement = 25;
  job.target_time_ns = 1500.5;
  job.effort = "quick";
  return job;
}

TrialRecord OkTrial(int64_t id, int64_t job_id) {
  TrialRecord trial;
  trial.id = id;
  trial.job_id = job_id;
  trial.config = "tile_m=" + std::to_string(id);
  trial.status = TrialStatus::kOk;
  trial.time_ns = 100.25 + static_cast<double>(id);
  trial.samples_ns = {101.5, 100.25, 0.1 + 0.2};
  trial.bound = "tensor";
  trial.stats_json = R"({"dma_bytes":4096})";
  trial.verified = true;
  trial.is_verify = id % 2 == 1;
  trial.worker_id = "w1";
  trial.created_ms = 1700000000500 + id;
  return trial;
}

// Creates a matmul job in `store` holding the one OK trial `trial_id`; stores the job's id in *job.
void CreateJobWithOkTrial(Store* store, int64_t trial_id, int64_t* job) {
  *job = *store->CreateJob(MatmulJob());
  std::vector<TrialRecord> trials = {OkTrial(trial_id, *job)};
  ASSERT_TRUE(store->InsertTrials(trials).ok());
}

TEST_F(StoreTest, OpenAppliesEveryMigrationOnceAndRecordsIt) {
  std::vector<int> expected;
  for (const Migration& migration : Migrations()) expected.push_back(migration.version);
  int64_t applied_ms = 0;
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    absl::StatusOr<std::vector<int>> applied = store->AppliedMigrations();
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, expected);
    ASSERT_TRUE(store->CreateJob(MatmulJob()).ok());
  }
  applied_ms = RawInt("SELECT applied_ms FROM schema_migrations WHERE version = 1");
  EXPECT_GT(applied_ms, 0);

  // Reopening finds everything recorded and applies nothing again (001 would fail if re-run).
  std::unique_ptr<Store> reopened = OpenStore();
  ASSERT_NE(reopened, nullptr);
  absl::StatusOr<std::vector<int>> applied = reopened->AppliedMigrations();
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(*applied, expected);
  EXPECT_EQ(RawInt("SELECT applied_ms FROM schema_migrations WHERE version = 1"), applied_ms);
  EXPECT_EQ(RawInt("SELECT COUNT(*) FROM schema_migrations"),
            static_cast<int64_t>(expected.size()));
  absl::StatusOr<std::vector<JobRecord>> jobs = reopened->ListJobs(10);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_THAT(*jobs, SizeIs(1));
}

TEST_F(StoreTest, OpenRejectsADatabaseWrittenByANewerTessel) {
  OpenStore().reset();
  RawExec(
      "INSERT INTO schema_migrations (version, name, applied_ms) VALUES (999, '999_future.sql', "
      "1)");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("was written by a newer tessel (migration 999)"));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(StoreTest, OpenErrorNamesThePath) {
  std::string missing = (dir_ / "no" / "such" / "dir" / "t.db").string();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(missing);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(missing));
}

TEST_F(StoreTest, OpenRejectsAnInMemoryDatabase) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, JobRoundTripsThroughCreateAndGet) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  JobRecord job = MatmulJob();
  absl::StatusOr<int64_t> id = store->CreateJob(job);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_GT(*id, 0);

  absl::StatusOr<JobRecord> got = store->GetJob(*id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->id, *id);
  EXPECT_EQ(got->workload.kernel, "matmul");
  EXPECT_EQ(got->workload.dims, "K=512,M=512,N=512");
  EXPECT_EQ(got->workload.dtype, "bf16");
  EXPECT_EQ(got->workload.target, "snc2");
  EXPECT_EQ(got->dims_display, job.dims_display);
  EXPECT_EQ(got->kernel_version, 3);
  EXPECT_EQ(got->target_version, 2);
  EXPECT_EQ(got->strategy, "random");
  EXPECT_EQ(got->budget, 32);
  EXPECT_EQ(got->seed, 0xfedcba9876543210ULL);
  EXPECT_EQ(got->state, JobState::kQueued);
  EXPECT_EQ(got->default_config, job.default_config);
  EXPECT_DOUBLE_EQ(got->roofline_ns, 1234.5);
  EXPECT_EQ(got->created_ms, 1700000000123);
  EXPECT_FALSE(got->finished_ms.has_value());
  EXPECT_EQ(got->time_limit_s, 600);
  EXPECT_EQ(got->stop_after_no_improvement, 25);
  EXPECT_DOUBLE_EQ(got->target_time_ns, 1500.5);
  EXPECT_EQ(got->effort, "quick");
  EXPECT_EQ(got->stopped_by, "");
  absl::StatusOr<std::vector<JobRecord>> queued = store->JobsInState(JobState::kQueued);
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_THAT(*queued, SizeIs(1));
  EXPECT_EQ((*queued)[0].stop_after_no_improvement, 25);
}

TEST_F(StoreTest, CreateJobRejectsNegativeEarlyStops) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  JobRecord job = MatmulJob();
  job.stop_after_no_improvement = -1;
  absl::StatusOr<int64_t> id = store->CreateJob(job);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("stop_after_no_improvement -1"));
  EXPECT_THAT(*store->ListJobs(0), SizeIs(0));
}

TEST_F(StoreTest, ADatabaseOfTheFirstSchemaIsUpgradedInPlaceAndItsJobsHaveNoEarlyStops) {
  // What a tessel from before migration 2 left behind: only 001 applied, a job in progress.
  ASSERT_GE(Migrations().size(), 2u);
  const Migration& first = Migrations().front();
  ASSERT_EQ(first.version, 1);
  RawExec(
      "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
      "applied_ms INTEGER NOT NULL);" +
      std::string(first.sql) + "INSERT INTO schema_migrations VALUES (1, '" +
      std::string(first.name) +
      "', 1);"
      "INSERT INTO workloads (id, kernel, dims, dtype, target) VALUES "
      "(7, 'matmul', 'K=512,M=512,N=512', 'bf16', 'snc2');"
      "INSERT INTO jobs (id, workload_id, dims_display, kernel_version, target_version, "
      "strategy, budget, seed, state, default_config, created_ms) VALUES (3, 7, "
      "'M=512,N=512,K=512', 3, 2, 'random', 32, 11, 'running', 'tile_m=128', 1700000000123);");
  ASSERT_EQ(RawInt("SELECT COUNT(*) FROM schema_migrations"), 1);

  std::vector<int> all;
  for (const Migration& migration : Migrations()) all.push_back(migration.version);
  for (int open = 0; open < 2; ++open) {  // the second open applies nothing again
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    absl::StatusOr<std::vector<int>> applied = store->AppliedMigrations();
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, all);
    absl::StatusOr<std::vector<JobRecord>> running = store->JobsInState(JobState::kRunning);
    ASSERT_TRUE(running.ok()) << running.status();
    ASSERT_THAT(*running, SizeIs(1));
    const JobRecord& old = (*running)[0];
    EXPECT_EQ(old.id, 3);
    EXPECT_EQ(old.workload.dims, "K=512,M=512,N=512");
    EXPECT_EQ(old.budget, 32);
    EXPECT_EQ(old.seed, 11u);
    EXPECT_EQ(old.created_ms, 1700000000123);
    EXPECT_EQ(old.time_limit_s, 0);
    EXPECT_EQ(old.stop_after_no_improvement, 0);
    EXPECT_EQ(old.target_time_ns, 0);
    EXPECT_EQ(old.effort, "") << "jobs from before migration 3 had no effort";
    EXPECT_EQ(old.stopped_by, "");
    if (open == 0) {
      // The upgraded file takes jobs with early stops.
      absl::StatusOr<int64_t> id = store->CreateJob(MatmulJob());
      ASSERT_TRUE(id.ok()) << id.status();
      EXPECT_EQ(store->GetJob(*id)->time_limit_s, 600);
    }
  }
  EXPECT_EQ(RawInt("SELECT COUNT(*) FROM schema_migrations"), static_cast<int64_t>(all.size()));
}

TEST_F(StoreTest, JobsOfTheSameWorkloadShareOneWorkloadRow) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MatmulJob()).ok());
  ASSERT_TRUE(store->CreateJob(MatmulJob()).ok());
  JobRecord other = MatmulJob();
  other.workload.target = "snc3";
  ASSERT_TRUE(store->CreateJob(other).ok());
  store.reset();
  EXPECT_EQ(RawInt("SELECT COUNT(*) FROM workloads"), 2);
  EXPECT_EQ(RawInt("SELECT COUNT(DISTINCT workload_id) FROM jobs"), 2);
}

TEST_F(StoreTest, GetJobOfAnUnknownIdIsNotFound) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<JobRecord> got = store->GetJob(42);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(got.status().message(), HasSubstr("job 42"));
  EXPECT_EQ(store->UpdateJobState(42, JobState::kRunning, "").code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, ListJobsIsNewestFirstAndHonoursTheLimit) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(*store->CreateJob(MatmulJob()));
  absl::StatusOr<std::vector<JobRecord>> jobs = store->ListJobs(3);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_THAT(*jobs, SizeIs(3));
  EXPECT_EQ((*jobs)[0].id, ids[4]);
  EXPECT_EQ((*jobs)[1].id, ids[3]);
  EXPECT_EQ((*jobs)[2].id, ids[2]);
  EXPECT_THAT(*store->ListJobs(0), SizeIs(5));
}

TEST_F(StoreTest, TrialSummariesForJobsReadsTheListedJobsTrialsGroupedByJob) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t a = *store->CreateJob(MatmulJob());
  const int64_t b = *store->CreateJob(MatmulJob());
  const int64_t c = *store->CreateJob(MatmulJob());
  const int64_t empty = *store->CreateJob(MatmulJob());
  std::vector<TrialRecord> trials = {OkTrial(5, a), OkTrial(2, b), OkTrial(3, a), OkTrial(4, c),
                                     OkTrial(1, b)};
  ASSERT_TRUE(store->InsertTrials(trials).ok());

  const std::vector<int64_t> listed = {b, a, empty};  // not c
  auto got = store->TrialSummariesForJobs(listed);
  ASSERT_TRUE(got.ok()) << got.status();
  auto ids = [&](int64_t job) {
    std::vector<int64_t> out;
    for (const TrialSummary& t : got->at(job)) out.push_back(t.id);
    return out;
  };
  EXPECT_THAT(ids(a), ElementsAre(3, 5));
  EXPECT_THAT(ids(b), ElementsAre(1, 2));
  EXPECT_FALSE(got->contains(c));
  EXPECT_FALSE(got->contains(empty));
  // The same fields as the one-job read.
  const TrialRecord full = store->TrialsForJob(a)->front();
  const TrialSummary& summary = got->at(a).front();
  EXPECT_EQ(summary.config, full.config);
  EXPECT_EQ(summary.status, full.status);
  EXPECT_EQ(summary.time_ns, full.time_ns);
  EXPECT_EQ(summary.verified, full.verified);
  EXPECT_EQ(summary.is_default, full.is_default);
  EXPECT_EQ(summary.is_verify, full.is_verify);
  EXPECT_TRUE(store->TrialSummariesForJobs({})->empty());
}

TEST_F(StoreTest, UpdateJobStateSetsFinishedMsOnlyForFinalStates) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t first = *store->CreateJob(MatmulJob());
  int64_t second = *store->CreateJob(MatmulJob());

  ASSERT_TRUE(store->UpdateJobState(first, JobState::kRunning, "leased").ok());
  absl::StatusOr<JobRecord> running = store->GetJob(first);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state, JobState::kRunning);
  EXPECT_EQ(running->message, "leased");
  EXPECT_FALSE(running->finished_ms.has_value());

  int64_t before = NowUnixMs();
  EXPECT_EQ(running->stopped_by, "");
  ASSERT_TRUE(
      store->UpdateJobState(first, JobState::kCompleted, "budget spent", "time_limit").ok());
  absl::StatusOr<JobRecord> done = store->GetJob(first);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->message, "budget spent");
  EXPECT_EQ(done->stopped_by, "time_limit");
  ASSERT_TRUE(done->finished_ms.has_value());
  EXPECT_GE(*done->finished_ms, before);
  EXPECT_LE(*done->finished_ms, NowUnixMs());

  ASSERT_TRUE(store->UpdateJobState(second, JobState::kFailed, "no worker").ok());
  absl::StatusOr<std::vector<JobRecord>> queued = store->JobsInState(JobState::kQueued);
  ASSERT_TRUE(queued.ok());
  EXPECT_THAT(*queued, SizeIs(0));
  absl::StatusOr<std::vector<JobRecord>> failed = store->JobsInState(JobState::kFailed);
  ASSERT_TRUE(failed.ok());
  ASSERT_THAT(*failed, SizeIs(1));
  EXPECT_EQ((*failed)[0].id, second);
  EXPECT_TRUE((*failed)[0].finished_ms.has_value());
}

// States are enums (schema/vocab.h), so an unknown one cannot be written; one that reaches the
// file behind the store's back (schema/sql's CHECK switched off) is rejected when read, by name.
TEST_F(StoreTest, AStoredStateThisBuildDoesNotKnowIsDataLossNamingIt) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t id = *store->CreateJob(MatmulJob());
  RawExec("PRAGMA ignore_check_constraints = ON; UPDATE jobs SET state = 'exploded' WHERE id = " +
          std::to_string(id) + ";");
  absl::StatusOr<JobRecord> got = store->GetJob(id);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("exploded"));
}

TEST_F(StoreTest, TrialsRoundTripWithSamplesAndOptionalTime) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = *store->CreateJob(MatmulJob());
  TrialRecord ok = OkTrial(7, job);
  TrialRecord invalid;
  invalid.id = 3;
  invalid.job_id = job;
  invalid.config = "tile_m=4096";
  invalid.status = TrialStatus::kInvalidConfig;
  invalid.message = "SBUF overflow: 30 MiB > 24 MiB";
  invalid.is_default = true;
  invalid.created_ms = 1700000000001;
  std::vector<TrialRecord> trials = {ok, invalid};
  ASSERT_TRUE(store->InsertTrials(trials).ok());

  absl::StatusOr<std::vector<TrialRecord>> got = store->TrialsForJob(job);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_THAT(*got, SizeIs(2));
  const TrialRecord& first = (*got)[0];  // by id ascending: the invalid one
  EXPECT_EQ(first.id, 3);
  EXPECT_EQ(first.status, TrialStatus::kInvalidConfig);
  EXPECT_FALSE(first.time_ns.has_value());
  EXPECT_TRUE(first.samples_ns.empty());
  EXPECT_EQ(first.message, invalid.message);
  EXPECT_EQ(first.stats_json, "{}");
  EXPECT_TRUE(first.is_default);
  EXPECT_FALSE(first.verified);
  EXPECT_FALSE(first.is_verify);
  EXPECT_EQ(first.created_ms, 1700000000001);

  const TrialRecord& second = (*got)[1];
  EXPECT_EQ(second.id, 7);
  EXPECT_EQ(second.job_id, job);
  EXPECT_EQ(second.config, ok.config);
  EXPECT_EQ(second.status, TrialStatus::kOk);
  ASSERT_TRUE(second.time_ns.has_value());
  EXPECT_EQ(*second.time_ns, *ok.time_ns);
  EXPECT_EQ(second.samples_ns, ok.samples_ns);  // exact, including 0.1 + 0.2
  EXPECT_EQ(second.bound, "tensor");
  EXPECT_EQ(second.stats_json, ok.stats_json);
  EXPECT_TRUE(second.verified);
  EXPECT_FALSE(second.is_default);
  EXPECT_TRUE(second.is_verify);  // odd id
  EXPECT_EQ(second.worker_id, "w1");
  EXPECT_EQ(second.created_ms, ok.created_ms);

  absl::StatusOr<int64_t> max_id = store->MaxTrialId();
  ASSERT_TRUE(max_id.ok());
  EXPECT_EQ(*max_id, 7);
}

TEST_F(StoreTest, MaxTrialIdIsZeroForAnEmptyStore) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->MaxTrialId(), 0);
}

TEST_F(StoreTest, DuplicateTrialIdIsAlreadyExistsAndWritesNothingOfThatCall) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = *store->CreateJob(MatmulJob());
  std::vector<TrialRecord> first = {OkTrial(1, job), OkTrial(2, job)};
  ASSERT_TRUE(store->InsertTrials(first).ok());

  std::vector<TrialRecord> second = {OkTrial(3, job), OkTrial(4, job), OkTrial(2, job),
                                     OkTrial(5, job)};
  absl::Status status = store->InsertTrials(second);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("trial id 2"));

  absl::StatusOr<std::vector<TrialRecord>> got = store->TrialsForJob(job);
  ASSERT_TRUE(got.ok());
  std::vector<int64_t> ids;
  for (const TrialRecord& trial : *got) ids.push_back(trial.id);
  EXPECT_THAT(ids, ElementsAre(1, 2));
}

TEST_F(StoreTest, TrialOfAnUnknownJobIsRejected) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<TrialRecord> trials = {OkTrial(1, 99)};
  absl::Status status = store->InsertTrials(trials);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("job 99"));
  EXPECT_EQ(*store->MaxTrialId(), 0);
}

TEST_F(StoreTest, AFailingWriteDoesNotStopTheOthersInItsBatch) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = 0;
  ASSERT_NO_FATAL_FAILURE(CreateJobWithOkTrial(store.get(), 1000, &job));

  // Hold the write lock from outside so the writes below queue up and share a batch.
  std::unique_ptr<sqlite::Database> blocker = RawConnection();
  ASSERT_NE(blocker, nullptr);
  ASSERT_TRUE(blocker->Exec("BEGIN IMMEDIATE").ok());
  constexpr int kWriters = 8;
  std::vector<absl::Status> results(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      // Writer 5 reuses a taken id.
      std::vector<TrialRecord> trials = {OkTrial(i == 5 ? 1000 : i + 1, job)};
      results[i] = store->InsertTrials(trials);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(blocker->Exec("COMMIT").ok());
  blocker.reset();
  for (std::thread& thread : threads) thread.join();

  for (int i = 0; i < kWriters; ++i) {
    if (i == 5) {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kAlreadyExists) << results[i];
    } else {
      EXPECT_TRUE(results[i].ok()) << "writer " << i << ": " << results[i];
    }
  }
  EXPECT_THAT(*store->TrialsForJob(job), SizeIs(kWriters));  // 7 new + the taken one
}

TEST_F(StoreTest, ConcurrentWritersAreAllCommittedInFewerTransactionsThanWrites) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = *store->CreateJob(MatmulJob());
  const int64_t transactions_before = store->transactions_committed();
  constexpr int kThreads = 8;
  constexpr int kTrialsPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTrialsPerThread; ++i) {
        std::vector<TrialRecord> trial = {OkTrial(t * kTrialsPerThread + i + 1, job)};
        if (!store->InsertTrials(trial).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.load(), 0);
  absl::StatusOr<std::vector<TrialRecord>> got = store->TrialsForJob(job);
  ASSERT_TRUE(got.ok());
  ASSERT_THAT(*got, SizeIs(kThreads * kTrialsPerThread));
  for (int i = 0; i < kThreads * kTrialsPerThread; ++i) EXPECT_EQ((*got)[i].id, i + 1);
  const int64_t transactions = store->transactions_committed() - transactions_before;
  EXPECT_LT(transactions, kThreads * kTrialsPerThread);
  EXPECT_EQ(store->writes_committed(), 1 + kThreads * kTrialsPerThread);
  RecordProperty("transactions", std::to_string(transactions));
}

TEST_F(StoreTest, AWriteIsVisibleToAReadAsSoonAsItReturns) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = *store->CreateJob(MatmulJob());
  for (int i = 1; i <= 50; ++i) {
    std::vector<TrialRecord> trial = {OkTrial(i, job)};
    ASSERT_TRUE(store->InsertTrials(trial).ok());
    ASSERT_EQ(*store->MaxTrialId(), i);
    ASSERT_TRUE(store->UpdateJobState(job, JobState::kRunning, std::to_string(i)).ok());
    ASSERT_EQ(store->GetJob(job)->message, std::to_string(i));
  }
}

// Reads run on connections of their own, in parallel; each still sees every commit in order,
// also when fewer connections than readers are allowed (the rest wait for one).
TEST_F(StoreTest, ConcurrentReadersSeeCommitsInOrderWithAnyNumberOfConnections) {
  for (int max_readers : {1, 2, 8}) {
    StoreOptions options;
    options.max_readers = max_readers;
    std::unique_ptr<Store> store = OpenStore(options);
    ASSERT_NE(store, nullptr);
    int64_t job = *store->CreateJob(MatmulJob());
    const int64_t first = *store->MaxTrialId();
    constexpr int kReaders = 4;
    constexpr int kTrials = 100;
    std::atomic<bool> writing{true};
    std::atomic<int> out_of_order{0};
    std::atomic<int> failures{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
      readers.emplace_back([&] {
        int64_t last = first;
        while (writing.load()) {
          absl::StatusOr<int64_t> max_id = store->MaxTrialId();
          if (!max_id.ok()) {
            failures.fetch_add(1);
            continue;
          }
          if (*max_id < last) out_of_order.fetch_add(1);
          last = *max_id;
        }
      });
    }
    for (int i = 1; i <= kTrials; ++i) {
      std::vector<TrialRecord> trial = {OkTrial(first + i, job)};
      ASSERT_TRUE(store->InsertTrials(trial).ok());
    }
    writing.store(false);
    for (std::thread& reader : readers) reader.join();
    EXPECT_EQ(failures.load(), 0) << "max_readers=" << max_readers;
    EXPECT_EQ(out_of_order.load(), 0) << "max_readers=" << max_readers;
    EXPECT_EQ(*store->MaxTrialId(), first + kTrials);
    store.reset();
    std::filesystem::remove(path_);
  }
}

BestRecord MatmulBest(double time_ns, const std::string& config) {
  BestRecord best;
  best.workload = {"matmul", "K=512,M=512,N=512", "bf16", "snc2"};
  best.kernel_version = 3;
  best.target_version = 2;
  best.config = config;
  best.time_ns = time_ns;
  return best;
}

TEST_F(StoreTest, PublishAssignsIncreasingSnapshotsAndLatestBestCanPinAnOlderOne) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = 0;
  ASSERT_NO_FATAL_FAILURE(CreateJobWithOkTrial(store.get(), 1, &job));

  BestRecord first = MatmulBest(900, "tile_m=128");
  first.job_id = job;
  first.trial_id = 1;
  absl::StatusOr<int64_t> snap1 = store->Publish(first);
  ASSERT_TRUE(snap1.ok()) << snap1.status();
  absl::StatusOr<int64_t> snap2 = store->Publish(MatmulBest(700, "tile_m=256"));
  ASSERT_TRUE(snap2.ok()) << snap2.status();
  EXPECT_GT(*snap2, *snap1);

  const WorkloadRecord workload = first.workload;
  absl::StatusOr<std::optional<BestRecord>> latest = store->LatestBest(workload);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->config, "tile_m=256");
  EXPECT_EQ((*latest)->snapshot_id, *snap2);
  EXPECT_EQ((*latest)->job_id, 0);  // published without a job

  absl::StatusOr<std::optional<BestRecord>> pinned = store->LatestBest(workload, *snap1);
  ASSERT_TRUE(pinned.ok());
  ASSERT_TRUE(pinned->has_value());
  EXPECT_EQ((*pinned)->config, "tile_m=128");
  EXPECT_EQ((*pinned)->snapshot_id, *snap1);
  EXPECT_EQ((*pinned)->job_id, job);
  EXPECT_EQ((*pinned)->trial_id, 1);
  EXPECT_DOUBLE_EQ((*pinned)->time_ns, 900);
  EXPECT_EQ((*pinned)->kernel_version, 3);
  EXPECT_GT((*pinned)->published_ms, 0);

  WorkloadRecord unknown = workload;
  unknown.target = "snc3";
  absl::StatusOr<std::optional<BestRecord>> none = store->LatestBest(unknown);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(StoreTest, BestForKernelReturnsTheNewestOfEachWorkload) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t old_512 = *store->Publish(MatmulBest(900, "old-512"));
  BestRecord other = MatmulBest(5000, "only-1024");
  other.workload.dims = "K=1024,M=1024,N=1024";
  ASSERT_TRUE(store->Publish(other).ok());
  ASSERT_TRUE(store->Publish(MatmulBest(800, "new-512")).ok());
  BestRecord softmax = MatmulBest(10, "softmax");
  softmax.workload.kernel = "softmax";
  ASSERT_TRUE(store->Publish(softmax).ok());

  absl::StatusOr<std::vector<BestRecord>> all = store->BestForKernel("matmul");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_THAT(*all, SizeIs(2));
  EXPECT_EQ((*all)[0].config, "only-1024");  // sorted by dims
  EXPECT_EQ((*all)[1].config, "new-512");

  absl::StatusOr<std::vector<BestRecord>> pinned = store->BestForKernel("matmul", old_512);
  ASSERT_TRUE(pinned.ok());
  ASSERT_THAT(*pinned, SizeIs(1));
  EXPECT_EQ((*pinned)[0].config, "old-512");
}

TEST_F(StoreTest, UpsertWorkerKeepsRegistrationTimeAndUpdatesTheRest) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WorkerRecord worker{"w-1", "host-a", "snc2,snc3", 4, 1000, 1000, 0, ""};
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  worker.registered_ms = 5000;
  worker.last_heartbeat_ms = 6000;
  worker.trials_done = 17;
  ASSERT_TRUE(store->UpsertWorker(worker).ok());
  ASSERT_TRUE(store->UpsertWorker({"w-0", "host-b", "snc2", 1, 2000, 2000, 0, ""}).ok());

  absl::StatusOr<std::vector<WorkerRecord>> workers = store->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_THAT(*workers, SizeIs(2));
  EXPECT_EQ((*workers)[0].id, "w-0");
  const WorkerRecord& got = (*workers)[1];
  EXPECT_EQ(got.id, "w-1");
  EXPECT_EQ(got.name, "host-a");
  EXPECT_EQ(got.targets, "snc2,snc3");
  EXPECT_EQ(got.slots, 4);
  EXPECT_EQ(got.registered_ms, 1000);
  EXPECT_EQ(got.last_heartbeat_ms, 6000);
  EXPECT_EQ(got.trials_done, 17);
}

// Issue 17: a database whose pages are damaged is refused when the store opens, with the file
// named, rather than written to and exported from.
TEST_F(StoreTest, ACorruptDatabaseIsRefusedAtOpen) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(store->CreateJob(MatmulJob()).ok());
  }
  const auto size = std::filesystem::file_size(path_);
  ASSERT_GT(size, 4 * 4096u);
  // `tessel admin check` finds the sound file sound.
  absl::StatusOr<std::vector<std::string>> sound = CheckIntegrity(path_);
  ASSERT_TRUE(sound.ok()) << sound.status();
  EXPECT_TRUE(sound->empty()) << (*sound)[0];
  {
    FILE* f = std::fopen(path_.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    // The headers of pages 2..5 (b-tree pages; page 1 holds the file header and the schema).
    const std::string garbage(64, '\x5a');
    for (long page = 1; page < 5; ++page) {
      std::fseek(f, page * 4096, SEEK_SET);
      std::fwrite(garbage.data(), 1, garbage.size(), f);
    }
    std::fclose(f);
  }
  absl::StatusOr<std::unique_ptr<Store>> reopened = Store::Open(path_);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss) << reopened.status();
  EXPECT_THAT(std::string(reopened.status().message()), ::testing::HasSubstr(path_));
  // And the full check says so too: problems listed, or the file named as unreadable.
  absl::StatusOr<std::vector<std::string>> damaged = CheckIntegrity(path_);
  EXPECT_TRUE(!damaged.ok() || !damaged->empty());
  if (!damaged.ok()) {
    EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss) << damaged.status();
    EXPECT_THAT(std::string(damaged.status().message()), ::testing::HasSubstr(path_));
  }
  EXPECT_EQ(CheckIntegrity(path_ + ".absent").status().code(), absl::StatusCode::kNotFound);
}

// Issue 17: worker rows do not pile up forever; a quarantined worker's row stays.
TEST_F(StoreTest, PurgeWorkersDeletesOldRowsButKeepsQuarantinedOnes) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertWorker({"w-old", "a", "", 1, 1000, 1000, 0, ""}).ok());
  ASSERT_TRUE(store->UpsertWorker({"w-liar", "b", "", 1, 1000, 1000, 0, "cred-liar"}).ok());
  ASSERT_TRUE(store->UpsertWorker({"w-new", "c", "", 1, 9000, 9000, 0, ""}).ok());
  ASSERT_TRUE(store->QuarantineWorker("w-liar", "reported 1 ns").ok());
  absl::StatusOr<int64_t> purged = store->PurgeWorkers(5000);
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(*purged, 1);
  absl::StatusOr<std::vector<WorkerRecord>> workers = store->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_THAT(*workers, SizeIs(2));
  EXPECT_EQ((*workers)[0].id, "w-liar");
  EXPECT_EQ((*workers)[1].id, "w-new");
  // The liar's credential stays quarantined with its row.
  absl::StatusOr<std::map<std::string, std::string>> credentials = store->QuarantinedCredentials();
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(*credentials, (std::map<std::string, std::string>{{"cred-liar", "reported 1 ns"}}));
}

TEST_F(StoreTest, DestructorCommitsEveryQueuedWrite) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  int64_t job = *store->CreateJob(MatmulJob());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<TrialRecord> trial = {OkTrial(t * 50 + i + 1, job)};
        EXPECT_TRUE(store->InsertTrials(trial).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  store.reset();
  EXPECT_EQ(RawInt("SELECT COUNT(*) FROM trials"), 200);
}

// The child process writes trials from 4 threads and reports each acknowledged id through a pipe;
// the parent SIGKILLs it mid-stream. Every acknowledged trial must be in the reopened store.
TEST_F(StoreTest, EveryAcknowledgedTrialSurvivesAKilledProcess) {
  int64_t job = 0;
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    job = *store->CreateJob(MatmulJob());
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    if (!store.ok()) _exit(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t id = t + 1;; id += 4) {
          std::vector<TrialRecord> trial = {OkTrial(id, job)};
          if (!(*store)->InsertTrials(trial).ok()) _exit(3);
          if (write(fds[1], &id, sizeof(id)) != sizeof(id)) _exit(4);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    _exit(0);  // unreachable: the parent kills us
  }
  close(fds[1]);
  std::set<int64_t> acknowledged;
  int64_t id = 0;
  while (acknowledged.size() < 400 && read(fds[0], &id, sizeof(id)) == sizeof(id)) {
    acknowledged.insert(id);
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  while (read(fds[0], &id, sizeof(id)) == sizeof(id)) acknowledged.insert(id);
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited early with " << WEXITSTATUS(wstatus);
  ASSERT_GE(acknowledged.size(), 400u);

  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<TrialRecord>> got = store->TrialsForJob(job);
  ASSERT_TRUE(got.ok()) << got.status();
  std::set<int64_t> stored;
  for (const TrialRecord& trial : *got) stored.insert(trial.id);
  std::vector<int64_t> lost;
  std::set_difference(acknowledged.begin(), acknowledged.end(), stored.begin(), stored.end(),
                      std::back_inserter(lost));
  EXPECT_TRUE(lost.empty()) << lost.size() << " acknowledged trials lost, e.g. " << lost.front();
  EXPECT_EQ(RawInt("SELECT COUNT(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

}  // namespace
}  // namespace tessel::server

#include "server/store_admin.h"

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema/sqlite.h"
#include "server/store.h"
#include "tests/testing/temp_dir.h"

namespace tessel::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kNow = 1'800'000'000'000;

JobRecord Job(const std::string& dims, JobState state) {
  JobRecord job;
  job.workload = {"matmul", dims, "bf16", "snc2"};
  job.dims_display = dims;
  job.kernel_version = 1;
  job.target_version = 1;
  job.strategy = "random";
  job.budget = 1000;
  job.state = state;
  job.default_config = "tile_m=128";
  job.created_ms = kNow - 100 * kDayMs;
  return job;
}

TrialRecord Trial(int64_t id, int64_t job_id, double time_ns, int64_t created_ms) {
  TrialRecord trial;
  trial.id = id;
  trial.job_id = job_id;
  trial.config = "tile_m=" + std::to_string(id);
  trial.status = TrialStatus::kOk;
  trial.time_ns = time_ns;
  trial.samples_ns = {time_ns};
  trial.worker_id = "w1";
  trial.created_ms = created_ms;
  return trial;
}

class StoreAdminTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // The ids of the trials in the database file `path`.
  static std::set<int64_t> TrialIds(const std::string& path) {
    std::set<int64_t> ids;
    auto db = sqlite::Database::Open(path, {.read_only = true});
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return ids;
    auto select = (*db)->Prepare("SELECT id FROM trials");
    EXPECT_TRUE(select.ok()) << select.status();
    while (select.ok()) {
      absl::StatusOr<bool> row = select->Step();
      if (!row.ok() || !*row) break;
      ids.insert(select->Int(0));
    }
    return ids;
  }

  testing::TempDir tmp_{"store_admin_test_"};
  std::string db_ = tmp_.File("tessel.db");
};

// The acceptance: a backup taken while trials are being committed holds every trial that
// was acknowledged (InsertTrials returned) before the backup began, and passes integrity_check.
TEST_F(StoreAdminTest, BackupDuringWritesHoldsEveryTrialAcknowledgedBeforeIt) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t job = *store->CreateJob(Job("K=64,M=64,N=64", JobState::kRunning));
  std::atomic<int64_t> acknowledged{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int64_t id = 1; !stop.load(); ++id) {
      std::vector<TrialRecord> trials = {Trial(id, job, 100.0 + static_cast<double>(id), kNow)};
      ASSERT_TRUE(store->InsertTrials(trials).ok());
      acknowledged.store(id);
    }
  });
  while (acknowledged.load() < 200) std::this_thread::yield();
  std::vector<std::string> backups;
  std::vector<int64_t> acknowledged_before;
  for (int i = 0; i < 3; ++i) {
    acknowledged_before.push_back(acknowledged.load());
    backups.push_back(tmp_.File("backup" + std::to_string(i) + ".db"));
    absl::StatusOr<DatabaseSummary> summary = BackupDatabase(db_, backups.back());
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_GE(summary->max_trial_id, acknowledged_before.back());
  }
  stop = true;
  writer.join();
  EXPECT_GT(acknowledged.load(), acknowledged_before.back()) << "writes went on during backups";
  for (size_t i = 0; i < backups.size(); ++i) {
    EXPECT_FALSE(std::filesystem::exists(backups[i] + "-wal")) << "a backup is one file";
    absl::StatusOr<std::vector<std::string>> problems = CheckIntegrity(backups[i]);
    ASSERT_TRUE(problems.ok()) << problems.status();
    EXPECT_TRUE(problems->empty()) << (*problems)[0];
    const std::set<int64_t> ids = TrialIds(backups[i]);
    for (int64_t id = 1; id <= acknowledged_before[i]; ++id) {
      ASSERT_TRUE(ids.count(id)) << "backup " << i << " lacks acknowledged trial " << id;
    }
  }
}

TEST_F(StoreAdminTest, BackupOfAMissingDatabaseIsNotFound) {
  EXPECT_EQ(BackupDatabase(db_, tmp_.File("out.db")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(tmp_.File("out.db")));
}

TEST_F(StoreAdminTest, RestoreReplacesTheDatabaseKeepsTheOldOneAndRefusesWhileInUse) {
  const std::string backup = tmp_.File("backup.db");
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    const int64_t job = *store->CreateJob(Job("K=64,M=64,N=64", JobState::kCompleted));
    std::vector<TrialRecord> trials = {Trial(1, job, 100, kNow), Trial(2, job, 90, kNow)};
    ASSERT_TRUE(store->InsertTrials(trials).ok());
    ASSERT_TRUE(BackupDatabase(db_, backup).ok());
    std::vector<TrialRecord> later = {Trial(3, job, 80, kNow)};
    ASSERT_TRUE(store->InsertTrials(later).ok());
  }
  {
    // A server holds the shared lock while it has the file open: the restore must not go on.
    absl::StatusOr<DatabaseLock> in_use = DatabaseLock::Shared(db_);
    ASSERT_TRUE(in_use.ok()) << in_use.status();
    absl::StatusOr<std::string> refused = RestoreDatabase(backup, db_);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(refused.status().message(), HasSubstr("in use"));
    EXPECT_EQ(TrialIds(db_), (std::set<int64_t>{1, 2, 3}));
  }
  absl::StatusOr<std::string> kept = RestoreDatabase(backup, db_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(TrialIds(db_), (std::set<int64_t>{1, 2}));
  EXPECT_EQ(TrialIds(*kept), (std::set<int64_t>{1, 2, 3})) << "the replaced database is kept";
  // The restored file opens as a store again (WAL mode, migrations already applied).
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->MaxTrialId(), 2);
}

TEST_F(StoreAdminTest, InspectBackupRefusesWhatCannotBeRestored) {
  const std::string foreign = tmp_.File("foreign.db");
  {
    auto db = sqlite::Database::Open(foreign, {.create = true});
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("CREATE TABLE t (x)").ok());
  }
  EXPECT_THAT(InspectBackup(foreign).status().message(), HasSubstr("not a tessel database"));
  const std::string newer = tmp_.File("newer.db");
  {
    ASSERT_NE(OpenStore(), nullptr);
    ASSERT_TRUE(BackupDatabase(db_, newer).ok());
    auto db = sqlite::Database::Open(newer, {});
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO schema_migrations VALUES (999, 'x', 0)").ok());
  }
  EXPECT_THAT(InspectBackup(newer).status().message(), HasSubstr("newer tessel"));
  const std::string garbage = tmp_.File("garbage.db");
  {
    std::FILE* file = std::fopen(garbage.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs(std::string(8192, 'x').c_str(), file);
    std::fclose(file);
  }
  EXPECT_EQ(InspectBackup(garbage).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RestoreDatabase(garbage, db_).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreAdminTest, ApplyStagedRestoreRunsOnceAndRemovesTheStagedFile) {
  ASSERT_NE(OpenStore(), nullptr);
  EXPECT_EQ(*ApplyStagedRestore(db_), std::nullopt);
  ASSERT_TRUE(BackupDatabase(db_, StagedRestorePath(db_)).ok());
  absl::StatusOr<std::optional<std::string>> applied = ApplyStagedRestore(db_);
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_TRUE(applied->has_value());
  EXPECT_TRUE(std::filesystem::exists(**applied));
  EXPECT_FALSE(std::filesystem::exists(StagedRestorePath(db_)));
}

// Retention deletes old trials of finished jobs, and keeps every published best's trial, the
// keep_top fastest OK trials of each workload, default-config measurements, recent trials and the
// trials of jobs still running.
TEST_F(StoreAdminTest, RetentionKeepsBestsTopKDefaultsRecentAndRunning) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t old_ms = kNow - 40 * kDayMs;
  const int64_t done = *store->CreateJob(Job("K=64,M=64,N=64", JobState::kCompleted));
  const int64_t running = *store->CreateJob(Job("K=64,M=64,N=128", JobState::kRunning));
  std::vector<TrialRecord> trials;
  // Job `done`: ids 1..20, time 1000 - id (so 20 is the fastest); 20..18 are the top 3.
  for (int64_t id = 1; id <= 20; ++id) trials.push_back(Trial(id, done, 1000.0 - id, old_ms));
  trials[4].is_default = true;                     // id 5
  trials[6].created_ms = kNow - 5 * kDayMs;        // id 7: recent
  trials[9].status = TrialStatus::kInvalidConfig;  // id 10: failed, old
  trials[9].time_ns.reset();
  for (int64_t id = 21; id <= 25; ++id) trials.push_back(Trial(id, running, 500, old_ms));
  ASSERT_TRUE(store->InsertTrials(trials).ok());
  BestRecord best;
  best.workload = {"matmul", "K=64,M=64,N=64", "bf16", "snc2"};
  best.kernel_version = 1;
  best.target_version = 1;
  best.config = "tile_m=2";
  best.time_ns = 998;
  best.job_id = done;
  best.trial_id = 2;  // published before faster ones were found: still kept
  ASSERT_TRUE(store->Publish(best).ok());

  EXPECT_EQ(*store->DeleteOldTrials({.keep_trials_days = 0, .keep_top = 3}, kNow), 0);
  absl::StatusOr<int64_t> deleted =
      store->DeleteOldTrials({.keep_trials_days = 30, .keep_top = 3}, kNow);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  const std::set<int64_t> expected = {2, 5, 7, 18, 19, 20, 21, 22, 23, 24, 25};
  EXPECT_EQ(*deleted, 25 - static_cast<int64_t>(expected.size()));
  store.reset();
  EXPECT_EQ(TrialIds(db_), expected);
}

TEST_F(StoreAdminTest, VacuumShrinksTheFileAfterRetentionWhileTheStoreServes) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t job = *store->CreateJob(Job("K=64,M=64,N=64", JobState::kCompleted));
  std::vector<TrialRecord> trials;
  for (int64_t id = 1; id <= 5000; ++id) {
    trials.push_back(Trial(id, job, 100.0 + static_cast<double>(id), kNow - 400 * kDayMs));
    trials.back().stats_json = "{\"padding\":\"" + std::string(400, 'p') + "\"}";
  }
  ASSERT_TRUE(store->InsertTrials(trials).ok());
  ASSERT_TRUE(store->Vacuum().ok());
  const int64_t before = DatabaseBytes(db_);
  ASSERT_EQ(*store->DeleteOldTrials({.keep_trials_days = 365, .keep_top = 10}, kNow), 4990);
  ASSERT_TRUE(store->Vacuum().ok());
  const int64_t after = DatabaseBytes(db_);
  EXPECT_LT(after * 10, before) << before << " -> " << after;
  // The store still writes and reads after VACUUM.
  std::vector<TrialRecord> more = {Trial(6000, job, 1, kNow)};
  ASSERT_TRUE(store->InsertTrials(more).ok());
  EXPECT_EQ(*store->MaxTrialId(), 6000);
}

}  // namespace
}  // namespace tessel::server

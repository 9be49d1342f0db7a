// The SQLite store: every job, every measurement and every published best config.
//
// One connection writes, on a dedicated writer thread that groups queued writes into one
// transaction; each write call returns only after its transaction committed, so a caller that
// acknowledges after the call returns never acknowledges a lost write. Reads use read-only
// connections of their own, one per concurrent read (WAL mode lets them run beside the writer and
// beside each other). All methods are thread-safe.
#ifndef TESSEL_SERVER_STORE_H_
#define TESSEL_SERVER_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/vocab.h"

namespace tessel::server {

// Records hold job states and trial statuses as the enums of schema/vocab.h; the store writes
// and reads their string forms (JobStateName, TrialStatusName), the values schema/sql allows.

struct WorkloadRecord {
  std::string kernel;
  std::string dims;  // canonical (sorted) form, e.g. "K=512,M=512,N=512"
  std::string dtype;
  std::string target;
};

struct JobRecord {
  int64_t id = 0;  // assigned by CreateJob
  WorkloadRecord workload;
  std::string dims_display;  // dims in the kernel's order
  int kernel_version = 0;
  int target_version = 0;
  std::string strategy;
  int budget = 0;
  uint64_t seed = 0;
  JobState state = JobState::kQueued;
  std::string message;
  std::string default_config;
  double roofline_ns = 0;
  int64_t created_ms = 0;
  std::optional<int64_t> finished_ms;
  // Early stops of the request (schema/sql/002_job_stop_rules.sql); 0 = none, never negative.
  int time_limit_s = 0;  // wall time since created_ms
  int stop_after_no_improvement = 0;
  double target_time_ns = 0;
  // schema/sql/003_job_effort.sql: the request's effort preset ("" = none), and why the search
  // stopped (v1::Job.stopped_by; "" until the job is final). Set by CreateJob and UpdateJobState.
  std::string effort;
  std::string stopped_by;
  // schema/sql/006_job_priority.sql: higher first (v1::SubmitJobRequest.priority).
  int priority = 0;
  // schema/sql/008_job_model.sql: the model job it belongs to ("" = none).
  std::string model;
  // schema/sql/009_job_lockstep.sql: v1::SubmitJobRequest.lockstep (0 = pipelined).
  int lockstep = 0;
};

struct TrialRecord {
  int64_t id = 0;  // chosen by the caller (the scheduler); unique
  int64_t job_id = 0;
  std::string config;
  TrialStatus status = TrialStatus::kOk;
  std::optional<double> time_ns;  // set iff status == kOk
  std::vector<double> samples_ns;
  std::string message;
  std::string bound;
  std::string stats_json = "{}";
  bool verified = false;
  bool is_default = false;
  bool is_verify = false;  // re-measure of a best candidate; not charged to the budget
  std::string worker_id;
  int64_t created_ms = 0;
  // Who proposed it: the strategy or auto's arm, "default", "seed", "verify" or "promote"
  // (TrialResult.arm); empty for trials stored before migration 7.
  std::string arm;
};

// What a job's progress is folded from (job_view.h): a trial without its samples, statistics,
// message, worker and arm, which a job list does not show and which cost most of a row's read.
struct TrialSummary {
  int64_t id = 0;
  int64_t job_id = 0;
  std::string config;
  TrialStatus status = TrialStatus::kOk;
  std::optional<double> time_ns;  // set iff status == kOk
  bool verified = false;
  bool is_default = false;
  bool is_verify = false;
};

struct BestRecord {
  int64_t id = 0;
  WorkloadRecord workload;
  int kernel_version = 0;
  int target_version = 0;
  std::string config;
  double time_ns = 0;
  // How time_ns was measured: the half-width of its 95% confidence interval (0 when measured
  // without noise or not promoted), the samples it is the median of, and the simulated noise.
  double time_ci_ns = 0;
  int samples = 0;
  double noise_sigma = 0;
  int64_t job_id = 0;
  int64_t trial_id = 0;
  int64_t snapshot_id = 0;  // assigned by Publish
  int64_t published_ms = 0;
};

struct WorkerRecord {
  std::string id;
  std::string name;
  std::string targets;  // comma-separated
  int slots = 1;
  int64_t registered_ms = 0;
  int64_t last_heartbeat_ms = 0;
  int64_t trials_done = 0;
  // The fingerprint of the token it registered with (server/auth.h); '' without tokens.
  std::string credential;
};

struct StoreOptions {
  int busy_timeout_ms = 5000;
  // The writer commits at most this many queued writes in one transaction.
  int max_batch = 256;
  // PRAGMA synchronous: true = FULL (each commit is fsync'ed, so it survives power loss); false =
  // NORMAL (a committed transaction survives a process crash, but power loss may lose the last
  // ones, since WAL is synced only at checkpoints).
  bool synchronous_full = true;
  // Reads run in parallel on up to this many read-only connections, opened as needed and kept;
  // a read beyond it waits for one to come free.
  int max_readers = 8;
  // Called by the writer thread with each committed transaction's commit time, in seconds.
  std::function<void(double)> on_commit;
};

// Which trials retention keeps (Store::DeleteOldTrials, `tessel admin vacuum`, tessel-server
// --keep-trials-days). A trial is deleted when it was created more than keep_trials_days days ago,
// its job is final (completed, cancelled or failed), and it is none of: a published best's trial,
// one of the keep_top fastest OK trials of its workload (what warm start and top-k views read), a
// job's default-config measurement. Jobs, workloads and published bests are never deleted.
struct RetentionPolicy {
  int keep_trials_days = 0;  // 0: keep every trial
  int keep_top = 10;
};
// Bounds of the policy's fields (request checks and CLI options).
inline constexpr int kMaxKeepTrialsDays = 36'500;
inline constexpr int kMaxKeepTop = 10'000;

// The full check of a database file (`tessel admin check`): PRAGMA integrity_check and
// foreign_key_check on a read-only connection (safe beside a running server). The problems found,
// at most `max_problems`; empty when the file is sound. NotFound when there is no such file,
// DataLoss when it cannot be read as a database at all.
absl::StatusOr<std::vector<std::string>> CheckIntegrity(const std::string& path,
                                                        int max_problems = 100);

class Store {
 public:
  // Opens (creating if needed) the database at `path`, sets WAL, busy_timeout and foreign keys, and
  // applies every migration of schema/sql not yet recorded in schema_migrations, each in its own
  // transaction. Fails with a message naming the path on I/O errors, and with FailedPrecondition
  // when the file was written by a newer tessel (a migration version it does not know).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  ~Store();  // drains the writer queue, then closes
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Migration versions recorded as applied, ascending.
  absl::StatusOr<std::vector<int>> AppliedMigrations();

  // ---- writes: each returns after its transaction committed ----
  // Inserts the job (and its workload row if new); returns the job id.
  absl::StatusOr<int64_t> CreateJob(const JobRecord& job);
  // Sets state, message and stopped_by (why the search stopped; "" = not stopped); sets
  // finished_ms when the state is final.
  absl::Status UpdateJobState(int64_t job_id, JobState state, const std::string& message,
                              const std::string& stopped_by = "");
  // Inserts trials (all in one transaction). AlreadyExists if an id is taken; nothing is written
  // then.
  absl::Status InsertTrials(std::span<const TrialRecord> trials);
  // Publishes a best config as a new immutable row under a new snapshot; returns the snapshot id.
  absl::StatusOr<int64_t> Publish(const BestRecord& best);
  absl::Status UpsertWorker(const WorkerRecord& worker);
  // Marks the worker quarantined (a known worker id; others are ignored), with why.
  absl::Status QuarantineWorker(const std::string& worker_id, const std::string& why);
  // One small write (the newest job's row rewritten unchanged): OK when the database can be
  // written again after a fault (disk full, read-only), the failed write's error otherwise.
  absl::Status ProbeWrite();
  // Deletes the rows of workers last heard from before `before_ms`, except quarantined ones;
  // returns how many.
  absl::StatusOr<int64_t> PurgeWorkers(int64_t before_ms);

  // ---- reads ----
  // A stored state or status this build does not know (schema/sql forbids them) is DataLoss.
  absl::StatusOr<JobRecord> GetJob(int64_t job_id);  // NotFound when absent
  // Newest first, at most `limit` (all when <= 0); with `before_id` > 0, only jobs older than it.
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit, int64_t before_id = 0);
  absl::StatusOr<std::vector<JobRecord>> JobsInState(JobState state);
  absl::StatusOr<std::vector<TrialRecord>> TrialsForJob(int64_t job_id);  // by id ascending
  // One page of them: ids above `after_id`, at most `limit`.
  absl::StatusOr<std::vector<TrialRecord>> TrialsForJobPage(int64_t job_id, int64_t after_id,
                                                            int limit);
  // The best each of `job_ids` published (its latest, if it published more than once); jobs that
  // published nothing are absent.
  absl::StatusOr<std::map<int64_t, BestRecord>> BestsPublishedBy(std::span<const int64_t> job_ids);
  // The trials of every job in `job_ids` as summaries, in one query: job id -> its trials by id
  // ascending (jobs without trials are absent).
  absl::StatusOr<std::map<int64_t, std::vector<TrialSummary>>> TrialSummariesForJobs(
      std::span<const int64_t> job_ids);
  // Largest trial id in the store, 0 when none.
  absl::StatusOr<int64_t> MaxTrialId();
  // Trials per (job's target, status name), and jobs per state name: for metrics. A full scan of
  // the trials table on a reader connection (writers are not blocked).
  absl::StatusOr<std::map<std::pair<std::string, std::string>, int64_t>> TrialCounts();
  absl::StatusOr<std::map<std::string, int64_t>> JobCounts();
  // The newest publication for the workload with snapshot_id <= max_snapshot (0 = no limit), or
  // nullopt when none.
  absl::StatusOr<std::optional<BestRecord>> LatestBest(const WorkloadRecord& workload,
                                                       int64_t max_snapshot = 0);
  // The newest publication of every workload of `kernel` (any dims, dtype, target).
  absl::StatusOr<std::vector<BestRecord>> BestForKernel(const std::string& kernel,
                                                        int64_t max_snapshot = 0);
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers();
  // The ids of the workers ever quarantined.
  absl::StatusOr<std::set<std::string>> QuarantinedWorkers();
  // The credentials (WorkerRecord::credential) of quarantined workers, each with the reason of
  // the first worker quarantined with it.
  absl::StatusOr<std::map<std::string, std::string>> QuarantinedCredentials();

  // ---- administration (server/store_admin.cc) ----
  // Deletes old trials by `policy` (see RetentionPolicy); returns how many. A no-op when
  // policy.keep_trials_days is 0.
  absl::StatusOr<int64_t> DeleteOldTrials(const RetentionPolicy& policy, int64_t now_ms);
  // VACUUM (rebuilds the file without its free pages), then a WAL checkpoint that truncates the
  // WAL, on the writer thread between two batches; writes queue meanwhile.
  absl::Status Vacuum();
  // The database file.
  const std::string& path() const;

  // ---- observability ----
  // Write transactions committed by the writer thread since Open; each holds one or more write
  // calls. Migrations are not counted.
  int64_t transactions_committed() const;
  // Write calls that committed successfully since Open.
  int64_t writes_committed() const;

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Milliseconds since the Unix epoch.
int64_t NowUnixMs();

}  // namespace tessel::server

#endif  // TESSEL_SERVER_STORE_H_

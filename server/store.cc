// The SQLite store: see store.h for the contract. This file holds the records' SQL (jobs, trials,
// published bests, workers); store_impl.{h,cc} the connections, migrations and the writer thread
// every write goes through.
#include "server/store.h"

#include <chrono>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"
#include "server/store_impl.h"

namespace tessel::server {
namespace {

using sqlite::Database;
using sqlite::Statement;

// `parsed` (an enum parsed from the stored string `name`), or DataLoss naming the `kind` of value
// when this build does not know the string.
template <typename Enum>
absl::StatusOr<Enum> KnownOrDataLoss(std::optional<Enum> parsed, std::string_view kind,
                                     const std::string& name) {
  if (!parsed) {
    return absl::DataLossError(
        fmt::format("stored {} '{}' is not one this build of tessel knows", kind, name));
  }
  return *parsed;
}

// The enums of a stored row; DataLoss for a string this build does not know.
absl::StatusOr<JobState> StoredJobState(const std::string& name) {
  return KnownOrDataLoss(ParseJobState(name), "job state", name);
}

absl::StatusOr<TrialStatus> StoredTrialStatus(const std::string& name) {
  return KnownOrDataLoss(ParseTrialStatus(name), "trial status", name);
}

std::string SamplesToJson(const std::vector<double>& samples) {
  nlohmann::json array = nlohmann::json::array();
  for (double sample : samples) array.push_back(sample);  // NaN and infinities become null
  return array.dump();
}

// Parses a samples_json array; elements that are not numbers (null) read back as NaN.
std::vector<double> SamplesFromJson(const std::string& text) {
  std::vector<double> samples;
  nlohmann::json array = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) return samples;
  samples.reserve(array.size());
  for (const auto& item : array) {
    samples.push_back(item.is_number() ? item.get<double>()
                                       : std::numeric_limits<double>::quiet_NaN());
  }
  return samples;
}

// Binds the workload's four key columns (kernel, dims, dtype, target), in that order, to the
// statement's next parameters. Returns `statement` for chaining.
Statement& BindWorkload(Statement& statement, const WorkloadRecord& workload) {
  return statement.BindText(workload.kernel)
      .BindText(workload.dims)
      .BindText(workload.dtype)
      .BindText(workload.target);
}

// Returns the id of the workloads row for `workload`, inserting it when absent.
absl::StatusOr<int64_t> WorkloadId(Database& db, const WorkloadRecord& workload) {
  {
    TESSEL_ASSIGN_OR_RETURN(
        Statement insert,
        db.Prepare("INSERT INTO workloads (kernel, dims, dtype, target) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (kernel, dims, dtype, target) DO NOTHING"));
    BindWorkload(insert, workload);
    TESSEL_RETURN_IF_ERROR(insert.Run());
  }
  TESSEL_ASSIGN_OR_RETURN(
      Statement select,
      db.Prepare("SELECT id FROM workloads WHERE kernel = ? AND dims = ? AND dtype = ? AND "
                 "target = ?"));
  BindWorkload(select, workload);
  absl::StatusOr<bool> row = select.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("workload row vanished right after its insert");
  return select.Int(0);
}

constexpr std::string_view kJobSelect =
    "SELECT j.id, w.kernel, w.dims, w.dtype, w.target, j.dims_display, j.kernel_version, "
    "j.target_version, j.strategy, j.budget, j.seed, j.state, j.message, j.default_config, "
    "j.roofline_ns, j.created_ms, j.finished_ms, j.time_limit_s, j.stop_after_no_improvement, "
    "j.target_time_ns, j.effort, j.stopped_by, j.priority, j.model, j.lockstep "
    "FROM jobs j JOIN workloads w ON w.id = j.workload_id ";

absl::StatusOr<JobRecord> JobFromRow(const Statement& row) {
  JobRecord job;
  job.id = row.Int(0);
  job.workload = {row.Text(1), row.Text(2), row.Text(3), row.Text(4)};
  job.dims_display = row.Text(5);
  job.kernel_version = static_cast<int>(row.Int(6));
  job.target_version = static_cast<int>(row.Int(7));
  job.strategy = row.Text(8);
  job.budget = static_cast<int>(row.Int(9));
  job.seed = static_cast<uint64_t>(row.Int(10));
  TESSEL_ASSIGN_OR_RETURN(job.state, StoredJobState(row.Text(11)));
  job.message = row.Text(12);
  job.default_config = row.Text(13);
  job.roofline_ns = row.Double(14);
  job.created_ms = row.Int(15);
  if (!row.IsNull(16)) job.finished_ms = row.Int(16);
  job.time_limit_s = static_cast<int>(row.Int(17));
  job.stop_after_no_improvement = static_cast<int>(row.Int(18));
  job.target_time_ns = row.Double(19);
  job.effort = row.Text(20);
  job.stopped_by = row.Text(21);
  job.priority = static_cast<int>(row.Int(22));
  job.model = row.Text(23);
  job.lockstep = static_cast<int>(row.Int(24));
  return job;
}

constexpr std::string_view kBestSelect =
    "SELECT b.id, w.kernel, w.dims, w.dtype, w.target, b.kernel_version, b.target_version, "
    "b.config, b.time_ns, b.job_id, b.trial_id, b.snapshot_id, b.published_ms, b.time_ci_ns, "
    "b.samples, b.noise_sigma FROM best b JOIN "
    "workloads w ON w.id = b.workload_id ";

BestRecord BestFromRow(const Statement& row) {
  BestRecord best;
  best.id = row.Int(0);
  best.workload = {row.Text(1), row.Text(2), row.Text(3), row.Text(4)};
  best.kernel_version = static_cast<int>(row.Int(5));
  best.target_version = static_cast<int>(row.Int(6));
  best.config = row.Text(7);
  best.time_ns = row.Double(8);
  best.job_id = row.Int(9);  // NULL reads as 0
  best.trial_id = row.Int(10);
  best.snapshot_id = row.Int(11);
  best.published_ms = row.Int(12);
  best.time_ci_ns = row.Double(13);
  best.samples = static_cast<int>(row.Int(14));
  best.noise_sigma = row.Double(15);
  return best;
}

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() = default;  // Impl's destructor drains the queue and joins the writer

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.starts_with("file::memory:") ||
      path.find("mode=memory") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format(
        "database path '{}' is not a file; the store needs a file (WAL mode, separate reader "
        "and writer connections), e.g. a temporary file",
        path));
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(
        fmt::format("StoreOptions.max_batch must be at least 1, got {}", options.max_batch));
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "StoreOptions.busy_timeout_ms must not be negative, got {}", options.busy_timeout_ms));
  }
  auto impl = std::make_unique<Impl>(path, options);
  TESSEL_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::StatusOr<std::vector<int>> Store::AppliedMigrations() {
  return impl_->Read<std::vector<int>>([](Database& db) -> absl::StatusOr<std::vector<int>> {
    TESSEL_ASSIGN_OR_RETURN(Statement select,
                            db.Prepare("SELECT version FROM schema_migrations ORDER BY version"));
    std::vector<int> versions;
    while (true) {
      absl::StatusOr<bool> row = select.Step();
      if (!row.ok()) return row.status();
      if (!*row) return versions;
      versions.push_back(static_cast<int>(select.Int(0)));
    }
  });
}

absl::StatusOr<int64_t> Store::CreateJob(const JobRecord& job) {
  if (job.budget <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("job budget must be positive, got {}", job.budget));
  }
  if (job.time_limit_s < 0 || job.stop_after_no_improvement < 0 || !(job.target_time_ns >= 0)) {
    return absl::InvalidArgumentError(
        fmt::format("job early stops must be >= 0 (0 = none), got time_limit_s {}, "
                    "stop_after_no_improvement {}, target_time_ns {}",
                    job.time_limit_s, job.stop_after_no_improvement, job.target_time_ns));
  }
  const int64_t created_ms = job.created_ms != 0 ? job.created_ms : NowUnixMs();
  int64_t job_id = 0;
  absl::Status status = impl_->Write([&](Database& db) -> absl::Status {
    absl::StatusOr<int64_t> workload_id = WorkloadId(db, job.workload);
    if (!workload_id.ok()) return workload_id.status();
    TESSEL_ASSIGN_OR_RETURN(
        Statement insert,
        db.Prepare(
            "INSERT INTO jobs (workload_id, dims_display, kernel_version, target_version, "
            "strategy, budget, seed, state, message, default_config, roofline_ns, "
            "created_ms, finished_ms, time_limit_s, stop_after_no_improvement, "
            "target_time_ns, effort, stopped_by, priority, model, lockstep) VALUES (?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.BindInt(*workload_id)
        .BindText(job.dims_display)
        .BindInt(job.kernel_version)
        .BindInt(job.target_version)
        .BindText(job.strategy)
        .BindInt(job.budget)
        .BindInt(static_cast<int64_t>(job.seed))
        .BindText(JobStateName(job.state))
        .BindText(job.message)
        .BindText(job.default_config)
        .BindDouble(job.roofline_ns)
        .BindInt(created_ms)
        .BindOptionalInt(job.finished_ms)
        .BindInt(job.time_limit_s)
        .BindInt(job.stop_after_no_improvement)
        .BindDouble(job.target_time_ns)
        .BindText(job.effort)
        .BindText(job.stopped_by)
        .BindInt(job.priority)
        .BindText(job.model)
        .BindInt(job.lockstep);
    TESSEL_RETURN_IF_ERROR(insert.Run());
    job_id = db.LastInsertRowId();
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return job_id;
}

absl::Status Store::UpdateJobState(int64_t job_id, JobState state, const std::string& message,
                                   const std::string& stopped_by) {
  std::optional<int64_t> finished_ms;
  if (IsFinal(state)) finished_ms = NowUnixMs();
  return impl_->Write([&](Database& db) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(
        Statement update,
        db.Prepare("UPDATE jobs SET state = ?, message = ?, finished_ms = ?, stopped_by = ? "
                   "WHERE id = ?"));
    update.BindText(JobStateName(state))
        .BindText(message)
        .BindOptionalInt(finished_ms)
        .BindText(stopped_by)
        .BindInt(job_id);
    TESSEL_RETURN_IF_ERROR(update.Run());
    if (db.Changes() == 0) return absl::NotFoundError(fmt::format("job {} not found", job_id));
    return absl::OkStatus();
  });
}

absl::Status Store::InsertTrials(std::span<const TrialRecord> trials) {
  if (trials.empty()) return absl::OkStatus();
  std::vector<std::string> samples_json;
  samples_json.reserve(trials.size());
  for (const TrialRecord& trial : trials) samples_json.push_back(SamplesToJson(trial.samples_ns));
  const int64_t now_ms = NowUnixMs();
  return impl_->Write([&](Database& db) -> absl::Status {
    for (size_t i = 0; i < trials.size(); ++i) {
      const TrialRecord& trial = trials[i];
      TESSEL_ASSIGN_OR_RETURN(
          Statement insert,
          db.Prepare("INSERT INTO trials (id, job_id, config, status, time_ns, samples_json, "
                     "message, bound, stats_json, verified, is_default, is_verify, worker_id, "
                     "created_ms, arm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      insert.BindInt(trial.id)
          .BindInt(trial.job_id)
          .BindText(trial.config)
          .BindText(TrialStatusName(trial.status))
          .BindOptionalDouble(trial.time_ns)
          .BindText(samples_json[i])
          .BindText(trial.message)
          .BindText(trial.bound)
          .BindText(trial.stats_json)
          .BindInt(trial.verified ? 1 : 0)
          .BindInt(trial.is_default ? 1 : 0)
          .BindInt(trial.is_verify ? 1 : 0)
          .BindText(trial.worker_id)
          .BindInt(trial.created_ms != 0 ? trial.created_ms : now_ms)
          .BindText(trial.arm);
      absl::Status status = insert.Run();
      if (status.code() == absl::StatusCode::kAlreadyExists) {
        return absl::AlreadyExistsError(
            fmt::format("trial id {} already exists (job {}); no trial of this call was written",
                        trial.id, trial.job_id));
      }
      if (status.code() == absl::StatusCode::kFailedPrecondition) {
        return absl::FailedPreconditionError(fmt::format(
            "trial {} refers to job {}, which does not exist; no trial of this call was written",
            trial.id, trial.job_id));
      }
      TESSEL_RETURN_IF_ERROR(status);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> Store::Publish(const BestRecord& best) {
  const int64_t published_ms = best.published_ms != 0 ? best.published_ms : NowUnixMs();
  int64_t snapshot_id = 0;
  absl::Status status = impl_->Write([&](Database& db) -> absl::Status {
    absl::StatusOr<int64_t> workload_id = WorkloadId(db, best.workload);
    if (!workload_id.ok()) return workload_id.status();
    {
      TESSEL_ASSIGN_OR_RETURN(Statement snapshot,
                              db.Prepare("INSERT INTO snapshots (created_ms) VALUES (?)"));
      snapshot.BindInt(published_ms);
      TESSEL_RETURN_IF_ERROR(snapshot.Run());
      snapshot_id = db.LastInsertRowId();
    }
    TESSEL_ASSIGN_OR_RETURN(
        Statement insert,
        db.Prepare("INSERT INTO best (workload_id, kernel_version, target_version, config, "
                   "time_ns, job_id, trial_id, snapshot_id, published_ms, time_ci_ns, samples, "
                   "noise_sigma) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.BindInt(*workload_id)
        .BindInt(best.kernel_version)
        .BindInt(best.target_version)
        .BindText(best.config)
        .BindDouble(best.time_ns)
        .BindOptionalInt(best.job_id != 0 ? std::optional<int64_t>(best.job_id) : std::nullopt)
        .BindOptionalInt(best.trial_id != 0 ? std::optional<int64_t>(best.trial_id) : std::nullopt)
        .BindInt(snapshot_id)
        .BindInt(published_ms)
        .BindDouble(best.time_ci_ns)
        .BindInt(best.samples)
        .BindDouble(best.noise_sigma);
    absl::Status inserted = insert.Run();
    if (inserted.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(
          fmt::format("cannot publish for job {}: no such job", best.job_id));
    }
    return inserted;
  });
  if (!status.ok()) return status;
  return snapshot_id;
}

absl::Status Store::UpsertWorker(const WorkerRecord& worker) {
  const int64_t now_ms = NowUnixMs();
  return impl_->Write([&](Database& db) -> absl::Status {
    // A known worker keeps its registered_ms; everything else is replaced.
    TESSEL_ASSIGN_OR_RETURN(
        Statement upsert,
        db.Prepare("INSERT INTO workers (id, name, targets, slots, registered_ms, "
                   "last_heartbeat_ms, trials_done, credential) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (id) DO UPDATE SET name = excluded.name, targets = "
                   "excluded.targets, slots = excluded.slots, last_heartbeat_ms = "
                   "excluded.last_heartbeat_ms, trials_done = excluded.trials_done"));
    upsert.BindText(worker.id)
        .BindText(worker.name)
        .BindText(worker.targets)
        .BindInt(worker.slots)
        .BindInt(worker.registered_ms != 0 ? worker.registered_ms : now_ms)
        .BindInt(worker.last_heartbeat_ms != 0 ? worker.last_heartbeat_ms : now_ms)
        .BindInt(worker.trials_done)
        .BindText(worker.credential);
    return upsert.Run();
  });
}

absl::Status Store::ProbeWrite() {
  return impl_->Write([](Database& db) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(
        Statement touch,
        db.Prepare("UPDATE jobs SET message = message WHERE id = (SELECT MAX(id) FROM jobs)"));
    return touch.Run();
  });
}

absl::StatusOr<int64_t> Store::PurgeWorkers(int64_t before_ms) {
  int64_t purged = 0;
  absl::Status status = impl_->Write([&](Database& db) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(
        Statement purge,
        db.Prepare("DELETE FROM workers WHERE last_heartbeat_ms < ? AND quarantine_reason = ''"));
    purge.BindInt(before_ms);
    TESSEL_RETURN_IF_ERROR(purge.Run());
    purged = db.Changes();
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return purged;
}

absl::Status Store::QuarantineWorker(const std::string& worker_id, const std::string& why) {
  return impl_->Write([&](Database& db) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(Statement update,
                            db.Prepare("UPDATE workers SET quarantine_reason = ? WHERE id = ?"));
    return update.BindText(why).BindText(worker_id).Run();
  });
}

absl::StatusOr<std::set<std::string>> Store::QuarantinedWorkers() {
  return impl_->Read<std::set<std::string>>(
      [&](Database& db) -> absl::StatusOr<std::set<std::string>> {
        TESSEL_ASSIGN_OR_RETURN(Statement select,
                                db.Prepare("SELECT id FROM workers WHERE quarantine_reason != ''"));
        std::set<std::string> ids;
        while (true) {
          TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
          if (!row) break;
          ids.insert(select.Text(0));
        }
        return ids;
      });
}

absl::StatusOr<std::map<std::string, std::string>> Store::QuarantinedCredentials() {
  return impl_->Read<std::map<std::string, std::string>>(
      [&](Database& db) -> absl::StatusOr<std::map<std::string, std::string>> {
        TESSEL_ASSIGN_OR_RETURN(
            Statement select,
            db.Prepare("SELECT credential, quarantine_reason FROM workers WHERE "
                       "quarantine_reason != '' AND credential != '' ORDER BY registered_ms"));
        std::map<std::string, std::string> reasons;
        while (true) {
          TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
          if (!row) break;
          reasons.emplace(select.Text(0), select.Text(1));
        }
        return reasons;
      });
}

absl::StatusOr<JobRecord> Store::GetJob(int64_t job_id) {
  return impl_->Read<JobRecord>([&](Database& db) -> absl::StatusOr<JobRecord> {
    static const std::string kSql = std::string(kJobSelect) + "WHERE j.id = ?";
    TESSEL_ASSIGN_OR_RETURN(Statement select, db.Prepare(kSql));
    select.BindInt(job_id);
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::NotFoundError(fmt::format("job {} not found", job_id));
    return JobFromRow(select);
  });
}

namespace {

// Reads every row of `select` with `from_row`, which returns a T or an absl::StatusOr<T>.
template <typename T, typename FromRow>
absl::StatusOr<std::vector<T>> AllRows(Statement& select, FromRow from_row) {
  std::vector<T> out;
  while (true) {
    TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) return out;
    if constexpr (std::is_same_v<decltype(from_row(select)), T>) {
      out.push_back(from_row(select));
    } else {
      TESSEL_ASSIGN_OR_RETURN(T value, from_row(select));
      out.push_back(std::move(value));
    }
  }
}

// On a reader connection of `impl` (a Store::Impl): prepares `sql`, lets `bind` bind its
// parameters and reads every row with `from_row` (see AllRows).
template <typename T, typename StoreImpl, typename Bind, typename FromRow>
absl::StatusOr<std::vector<T>> ReadAllRows(StoreImpl& impl, const std::string& sql, Bind bind,
                                           FromRow from_row) {
  using Rows = std::vector<T>;
  return impl.template Read<Rows>([&](Database& db) -> absl::StatusOr<Rows> {
    TESSEL_ASSIGN_OR_RETURN(Statement select, db.Prepare(sql));
    bind(select);
    return AllRows<T>(select, from_row);
  });
}

}  // namespace

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(int limit, int64_t before_id) {
  static const std::string kSql =
      std::string(kJobSelect) + "WHERE j.id < ? ORDER BY j.id DESC LIMIT ?";
  return ReadAllRows<JobRecord>(
      *impl_, kSql,
      [&](Statement& select) {
        select.BindInt(before_id > 0 ? before_id : std::numeric_limits<int64_t>::max());
        select.BindInt(limit > 0 ? limit : -1);  // a negative LIMIT means none
      },
      JobFromRow);
}

absl::StatusOr<std::vector<JobRecord>> Store::JobsInState(JobState state) {
  static const std::string kSql = std::string(kJobSelect) + "WHERE j.state = ? ORDER BY j.id";
  return ReadAllRows<JobRecord>(
      *impl_, kSql, [&](Statement& select) { select.BindText(JobStateName(state)); }, JobFromRow);
}

namespace {

constexpr const char* kTrialSelect =
    "SELECT id, job_id, config, status, time_ns, samples_json, message, bound, stats_json, "
    "verified, is_default, is_verify, worker_id, created_ms, arm FROM trials ";

absl::StatusOr<TrialRecord> TrialFromRow(const Statement& row) {
  TrialRecord trial;
  trial.id = row.Int(0);
  trial.job_id = row.Int(1);
  trial.config = row.Text(2);
  TESSEL_ASSIGN_OR_RETURN(trial.status, StoredTrialStatus(row.Text(3)));
  if (!row.IsNull(4)) trial.time_ns = row.Double(4);
  trial.samples_ns = SamplesFromJson(row.Text(5));
  trial.message = row.Text(6);
  trial.bound = row.Text(7);
  trial.stats_json = row.Text(8);
  trial.verified = row.Int(9) != 0;
  trial.is_default = row.Int(10) != 0;
  trial.is_verify = row.Int(11) != 0;
  trial.worker_id = row.Text(12);
  trial.created_ms = row.Int(13);
  trial.arm = row.Text(14);
  return trial;
}

// The columns TrialSummariesForJobs selects, in order.
absl::StatusOr<TrialSummary> TrialSummaryFromRow(const Statement& row) {
  TrialSummary trial;
  trial.id = row.Int(0);
  trial.job_id = row.Int(1);
  trial.config = row.Text(2);
  TESSEL_ASSIGN_OR_RETURN(trial.status, StoredTrialStatus(row.Text(3)));
  if (!row.IsNull(4)) trial.time_ns = row.Double(4);
  trial.verified = row.Int(5) != 0;
  trial.is_default = row.Int(6) != 0;
  trial.is_verify = row.Int(7) != 0;
  return trial;
}

}  // namespace

absl::StatusOr<std::vector<TrialRecord>> Store::TrialsForJob(int64_t job_id) {
  static const std::string kSql = std::string(kTrialSelect) + "WHERE job_id = ? ORDER BY id";
  return ReadAllRows<TrialRecord>(
      *impl_, kSql, [&](Statement& select) { select.BindInt(job_id); }, TrialFromRow);
}

absl::StatusOr<std::vector<TrialRecord>> Store::TrialsForJobPage(int64_t job_id, int64_t after_id,
                                                                 int limit) {
  static const std::string kSql =
      std::string(kTrialSelect) + "WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?";
  return ReadAllRows<TrialRecord>(
      *impl_, kSql,
      [&](Statement& select) {
        select.BindInt(job_id);
        select.BindInt(after_id);
        select.BindInt(limit > 0 ? limit : -1);
      },
      TrialFromRow);
}

absl::StatusOr<std::map<int64_t, std::vector<TrialSummary>>> Store::TrialSummariesForJobs(
    std::span<const int64_t> job_ids) {
  using ByJob = std::map<int64_t, std::vector<TrialSummary>>;
  if (job_ids.empty()) return ByJob{};
  return impl_->Read<ByJob>([&](Database& db) -> absl::StatusOr<ByJob> {
    // The ids as one JSON array parameter (json_each), so one prepared statement serves any count.
    static const std::string kSql =
        "SELECT id, job_id, config, status, time_ns, verified, is_default, is_verify FROM trials "
        "WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY job_id, id";
    TESSEL_ASSIGN_OR_RETURN(Statement select, db.Prepare(kSql));
    select.BindText(StrCat("[", StrJoin(job_ids, ","), "]"));
    absl::StatusOr<std::vector<TrialSummary>> rows =
        AllRows<TrialSummary>(select, TrialSummaryFromRow);
    if (!rows.ok()) return rows.status();
    ByJob out;
    for (TrialSummary& trial : *rows) out[trial.job_id].push_back(std::move(trial));
    return out;
  });
}

absl::StatusOr<std::map<int64_t, BestRecord>> Store::BestsPublishedBy(
    std::span<const int64_t> job_ids) {
  using ByJob = std::map<int64_t, BestRecord>;
  if (job_ids.empty()) return ByJob{};
  return impl_->Read<ByJob>([&](Database& db) -> absl::StatusOr<ByJob> {
    static const std::string kSql = std::string(kBestSelect) +
                                    "WHERE b.job_id IN (SELECT value FROM json_each(?)) "
                                    "ORDER BY b.snapshot_id";
    TESSEL_ASSIGN_OR_RETURN(Statement select, db.Prepare(kSql));
    select.BindText(StrCat("[", StrJoin(job_ids, ","), "]"));
    absl::StatusOr<std::vector<BestRecord>> rows = AllRows<BestRecord>(select, BestFromRow);
    if (!rows.ok()) return rows.status();
    ByJob out;
    for (BestRecord& best : *rows) out[best.job_id] = std::move(best);  // the latest wins
    return out;
  });
}

absl::StatusOr<int64_t> Store::MaxTrialId() {
  return impl_->Read<int64_t>([](Database& db) -> absl::StatusOr<int64_t> {
    TESSEL_ASSIGN_OR_RETURN(Statement select,
                            db.Prepare("SELECT COALESCE(MAX(id), 0) FROM trials"));
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    return *row ? select.Int(0) : 0;
  });
}

absl::StatusOr<std::map<std::pair<std::string, std::string>, int64_t>> Store::TrialCounts() {
  using Counts = std::map<std::pair<std::string, std::string>, int64_t>;
  return impl_->Read<Counts>([](Database& db) -> absl::StatusOr<Counts> {
    TESSEL_ASSIGN_OR_RETURN(
        Statement select,
        db.Prepare("SELECT w.target, t.status, COUNT(*) FROM trials t JOIN jobs j ON j.id = "
                   "t.job_id JOIN workloads w ON w.id = j.workload_id GROUP BY 1, 2"));
    Counts counts;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) return counts;
      counts[{select.Text(0), select.Text(1)}] = select.Int(2);
    }
  });
}

absl::StatusOr<std::map<std::string, int64_t>> Store::JobCounts() {
  using Counts = std::map<std::string, int64_t>;
  return impl_->Read<Counts>([](Database& db) -> absl::StatusOr<Counts> {
    TESSEL_ASSIGN_OR_RETURN(Statement select,
                            db.Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    Counts counts;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) return counts;
      counts[select.Text(0)] = select.Int(1);
    }
  });
}

absl::StatusOr<std::optional<BestRecord>> Store::LatestBest(const WorkloadRecord& workload,
                                                            int64_t max_snapshot) {
  static const std::string kSql =
      std::string(kBestSelect) +
      "WHERE w.kernel = ?1 AND w.dims = ?2 AND w.dtype = ?3 AND w.target = ?4 AND "
      "(?5 = 0 OR b.snapshot_id <= ?5) ORDER BY b.snapshot_id DESC, b.id DESC LIMIT 1";
  TESSEL_ASSIGN_OR_RETURN(
      std::vector<BestRecord> newest,
      ReadAllRows<BestRecord>(
          *impl_, kSql,
          [&](Statement& select) { BindWorkload(select, workload).BindInt(max_snapshot); },
          BestFromRow));
  if (newest.empty()) return std::optional<BestRecord>();
  return std::optional<BestRecord>(std::move(newest.front()));
}

absl::StatusOr<std::vector<BestRecord>> Store::BestForKernel(const std::string& kernel,
                                                             int64_t max_snapshot) {
  // The newest row per workload; sorted by workload so the output is deterministic.
  static const std::string kSql =
      std::string(kBestSelect) +
      "WHERE w.kernel = ?1 AND b.id = (SELECT b2.id FROM best b2 WHERE b2.workload_id = "
      "b.workload_id AND (?2 = 0 OR b2.snapshot_id <= ?2) ORDER BY b2.snapshot_id DESC, "
      "b2.id DESC LIMIT 1) ORDER BY w.dims, w.dtype, w.target";
  return ReadAllRows<BestRecord>(
      *impl_, kSql, [&](Statement& select) { select.BindText(kernel).BindInt(max_snapshot); },
      BestFromRow);
}

absl::StatusOr<std::vector<WorkerRecord>> Store::ListWorkers() {
  using Workers = std::vector<WorkerRecord>;
  return impl_->Read<Workers>([](Database& db) -> absl::StatusOr<Workers> {
    TESSEL_ASSIGN_OR_RETURN(
        Statement select,
        db.Prepare("SELECT id, name, targets, slots, registered_ms, last_heartbeat_ms, "
                   "trials_done FROM workers ORDER BY id"));
    return AllRows<WorkerRecord>(select, [](const Statement& row) {
      WorkerRecord worker;
      worker.id = row.Text(0);
      worker.name = row.Text(1);
      worker.targets = row.Text(2);
      worker.slots = static_cast<int>(row.Int(3));
      worker.registered_ms = row.Int(4);
      worker.last_heartbeat_ms = row.Int(5);
      worker.trials_done = row.Int(6);
      return worker;
    });
  });
}

int64_t Store::transactions_committed() const { return impl_->transactions_committed(); }

int64_t Store::writes_committed() const { return impl_->writes_committed(); }

}  // namespace tessel::server

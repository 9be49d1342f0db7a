// The SQLite store: see store.h for the contract.
//
// Layout: Store::Impl owns two connections to the same file. The writer connection belongs to the
// writer thread, which takes every queued write (up to max_batch) and runs them in one
// BEGIN IMMEDIATE ... COMMIT, each write inside its own SAVEPOINT so one failing write is rolled
// back alone. A caller blocks on its WriteOp's notification, which fires only after the COMMIT
// returned. The reader connection (query_only) is shared by all reads under read_mu_; every read
// statement is reset when done, so the next read starts a fresh WAL snapshot and sees every commit.
//
// Durability: the database runs in WAL mode. A COMMIT that returned is in the WAL file in the OS
// page cache, so it survives a crash of this process with either synchronous setting; with
// synchronous=FULL (the default) it is also fsync'ed and survives power loss.
#include "server/store.h"

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/migrations.h"
#include "schema/strings.h"

namespace tessel::server {
namespace {

constexpr std::string_view kJobStates[] = {"queued", "running", "completed", "cancelled", "failed"};
constexpr std::string_view kFinalJobStates[] = {"completed", "cancelled", "failed"};
constexpr std::string_view kTrialStatuses[] = {
    "OK", "INVALID_CONFIG", "WRONG_ANSWER", "RUNTIME_ERROR", "TIMEOUT", "WORKER_LOST", "CANCELLED"};

template <typename Range>
bool Contains(const Range& range, std::string_view value) {
  for (std::string_view item : range) {
    if (item == value) return true;
  }
  return false;
}

// Maps an (extended) SQLite result code to the closest canonical status code.
absl::StatusCode CodeFor(int extended_rc) {
  switch (extended_rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return absl::StatusCode::kFailedPrecondition;
    default:
      break;
  }
  switch (extended_rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
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

class Connection;

// A cached prepared statement in use. Binds parameters left to right and resets the statement
// (ending its read transaction) and clears its bindings when destroyed. Move-only.
class Statement {
 public:
  Statement(Connection* connection, sqlite3_stmt* stmt) : connection_(connection), stmt_(stmt) {}
  Statement(Statement&& other) noexcept
      : connection_(other.connection_),
        stmt_(std::exchange(other.stmt_, nullptr)),
        next_index_(other.next_index_),
        bind_rc_(other.bind_rc_) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }

  Statement& BindInt(int64_t value) {
    return Check(sqlite3_bind_int64(stmt_, next_index_++, value));
  }
  Statement& BindDouble(double value) {
    return Check(sqlite3_bind_double(stmt_, next_index_++, value));
  }
  Statement& BindText(std::string_view value) {
    return Check(sqlite3_bind_text64(stmt_, next_index_++, value.data(), value.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  Statement& BindNull() { return Check(sqlite3_bind_null(stmt_, next_index_++)); }
  Statement& BindOptionalDouble(const std::optional<double>& value) {
    return value.has_value() ? BindDouble(*value) : BindNull();
  }
  Statement& BindOptionalInt(const std::optional<int64_t>& value) {
    return value.has_value() ? BindInt(*value) : BindNull();
  }

  // Steps once: true when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Steps to completion, ignoring rows.
  absl::Status Run();

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string Text(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    if (text == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }

 private:
  Statement& Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  Connection* connection_;
  sqlite3_stmt* stmt_;
  int next_index_ = 1;
  int bind_rc_ = SQLITE_OK;
};

// One SQLite connection with its prepared-statement cache. Not thread-safe: each connection is
// used by one thread at a time (the writer thread, or a reader holding read_mu_).
class Connection {
 public:
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { Close(); }

  // Opens `path` (creating it when `create`), with extended result codes, busy_timeout, foreign
  // keys and the synchronous level of `options`.
  absl::Status Open(const std::string& path, const StoreOptions& options, bool create) {
    path_ = path;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
      std::string detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      Close();
      return absl::Status(CodeFor(rc),
                          fmt::format("cannot open database {}: {} (check that the directory "
                                      "exists and is writable)",
                                      path, detail));
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, options.busy_timeout_ms);
    if (absl::Status status = Exec("PRAGMA foreign_keys = ON"); !status.ok()) return status;
    return Exec(options.synchronous_full ? "PRAGMA synchronous = FULL"
                                         : "PRAGMA synchronous = NORMAL");
  }

  void Close() {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    cache_.clear();
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = nullptr;
  }

  // Returns the cached prepared statement for `sql`, preparing it on first use.
  absl::StatusOr<Statement> Prepare(std::string_view sql) {
    auto it = cache_.find(std::string(sql));
    if (it == cache_.end()) {
      sqlite3_stmt* stmt = nullptr;
      int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return Error(rc, fmt::format("preparing \"{}\"", sql));
      it = cache_.emplace(std::string(sql), stmt).first;
    }
    return Statement(this, it->second);
  }

  // Runs a statement without parameters or rows (BEGIN, SAVEPOINT, PRAGMA ...), cached.
  absl::Status Exec(std::string_view sql) {
    absl::StatusOr<Statement> stmt = Prepare(sql);
    if (!stmt.ok()) return stmt.status();
    return stmt->Run();
  }

  // Runs a whole script (a migration) with sqlite3_exec; the script holds no values.
  absl::Status ExecScript(const std::string& script, std::string_view what) {
    char* message = nullptr;
    int rc = sqlite3_exec(db_, script.c_str(), nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return absl::OkStatus();
    std::string detail = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return absl::Status(CodeFor(rc), fmt::format("{} on database {}: {}", what, path_, detail));
  }

  // A status for the failed result code `rc`, naming what failed, the database and SQLite's
  // message.
  absl::Status Error(int rc, std::string_view what) const {
    return absl::Status(CodeFor(rc),
                        fmt::format("{} on database {}: {}", what, path_, sqlite3_errmsg(db_)));
  }

  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int64_t Changes() const { return sqlite3_changes64(db_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

absl::StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return connection_->Error(bind_rc_, "binding a parameter");
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return connection_->Error(rc, fmt::format("running \"{}\"", sqlite3_sql(stmt_)));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

#define TESSEL_RETURN_IF_ERROR(expr)                    \
  do {                                                  \
    if (absl::Status _status = (expr); !_status.ok()) { \
      return _status;                                   \
    }                                                   \
  } while (0)

// Binds a StatusOr<Statement> to `var` or returns its error.
#define TESSEL_PREPARE(var, connection, sql)                      \
  absl::StatusOr<Statement> var##_or = (connection).Prepare(sql); \
  if (!var##_or.ok()) return var##_or.status();                   \
  Statement& var = *var##_or

// Returns the id of the workloads row for `workload`, inserting it when absent.
absl::StatusOr<int64_t> WorkloadId(Connection& db, const WorkloadRecord& workload) {
  {
    TESSEL_PREPARE(insert, db,
                   "INSERT INTO workloads (kernel, dims, dtype, target) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (kernel, dims, dtype, target) DO NOTHING");
    insert.BindText(workload.kernel)
        .BindText(workload.dims)
        .BindText(workload.dtype)
        .BindText(workload.target);
    TESSEL_RETURN_IF_ERROR(insert.Run());
  }
  TESSEL_PREPARE(select, db,
                 "SELECT id FROM workloads WHERE kernel = ? AND dims = ? AND dtype = ? AND "
                 "target = ?");
  select.BindText(workload.kernel)
      .BindText(workload.dims)
      .BindText(workload.dtype)
      .BindText(workload.target);
  absl::StatusOr<bool> row = select.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("workload row vanished right after its insert");
  return select.Int(0);
}

constexpr std::string_view kJobSelect =
    "SELECT j.id, w.kernel, w.dims, w.dtype, w.target, j.dims_display, j.kernel_version, "
    "j.target_version, j.strategy, j.budget, j.seed, j.state, j.message, j.default_config, "
    "j.roofline_ns, j.created_ms, j.finished_ms, j.time_limit_s, j.stop_after_no_improvement, "
    "j.target_time_ns, j.effort, j.stopped_by FROM jobs j JOIN workloads w ON w.id = "
    "j.workload_id ";

JobRecord JobFromRow(const Statement& row) {
  JobRecord job;
  job.id = row.Int(0);
  job.workload = {row.Text(1), row.Text(2), row.Text(3), row.Text(4)};
  job.dims_display = row.Text(5);
  job.kernel_version = static_cast<int>(row.Int(6));
  job.target_version = static_cast<int>(row.Int(7));
  job.strategy = row.Text(8);
  job.budget = static_cast<int>(row.Int(9));
  job.seed = static_cast<uint64_t>(row.Int(10));
  job.state = row.Text(11);
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
  return job;
}

constexpr std::string_view kBestSelect =
    "SELECT b.id, w.kernel, w.dims, w.dtype, w.target, b.kernel_version, b.target_version, "
    "b.config, b.time_ns, b.job_id, b.trial_id, b.snapshot_id, b.published_ms FROM best b JOIN "
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
  return best;
}

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Store::Impl {
 public:
  Impl(std::string path, StoreOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { Shutdown(); }

  // Opens both connections, enables WAL, applies migrations and starts the writer thread.
  absl::Status Open() {
    TESSEL_RETURN_IF_ERROR(writer_db_.Open(path_, options_, /*create=*/true));
    {
      TESSEL_PREPARE(mode, writer_db_, "PRAGMA journal_mode = WAL");
      absl::StatusOr<bool> row = mode.Step();
      if (!row.ok()) return row.status();
      std::string journal_mode = *row ? mode.Text(0) : "";
      if (journal_mode != "wal") {
        return absl::FailedPreconditionError(fmt::format(
            "cannot put database {} in WAL mode (journal_mode is '{}'); the store needs a file "
            "on a local file system",
            path_, journal_mode));
      }
    }
    TESSEL_RETURN_IF_ERROR(ApplyMigrations());
    {
      absl::MutexLock lock(&read_mu_);
      TESSEL_RETURN_IF_ERROR(reader_db_.Open(path_, options_, /*create=*/false));
      TESSEL_RETURN_IF_ERROR(reader_db_.Exec("PRAGMA query_only = ON"));
    }
    writer_thread_ = std::thread([this] { WriterLoop(); });
    return absl::OkStatus();
  }

  // Stops accepting writes, commits everything queued, joins the writer. Idempotent.
  void Shutdown() {
    {
      absl::MutexLock lock(&queue_mu_);
      stopping_ = true;
    }
    if (writer_thread_.joinable()) writer_thread_.join();
  }

  // Runs `write` on the writer thread inside the next batch transaction and returns its status
  // once that transaction committed (or failed). `write` runs inside a SAVEPOINT; on error its
  // changes are rolled back and the rest of the batch still commits. `write` may run more than
  // once if SQLite aborts the whole transaction; it must only touch the database and its outputs.
  absl::Status Write(std::function<absl::Status(Connection&)> write) {
    WriteOp op(std::move(write));
    {
      absl::MutexLock lock(&queue_mu_);
      if (stopping_) {
        return absl::UnavailableError(
            fmt::format("store {} is closing; the write was not applied", path_));
      }
      queue_.push_back(&op);
    }
    op.done.WaitForNotification();
    return op.status;
  }

  // Runs `read` on the reader connection, serialized with other reads.
  template <typename T>
  absl::StatusOr<T> Read(const std::function<absl::StatusOr<T>(Connection&)>& read) {
    absl::MutexLock lock(&read_mu_);
    return read(reader_db_);
  }

  int64_t transactions_committed() const { return transactions_committed_.load(); }
  int64_t writes_committed() const { return writes_committed_.load(); }

 private:
  struct WriteOp {
    explicit WriteOp(std::function<absl::Status(Connection&)> write) : write(std::move(write)) {}

    std::function<absl::Status(Connection&)> write;
    absl::Status status;
    absl::Notification done;

    void Finish(absl::Status result) {
      status = std::move(result);
      done.Notify();  // `this` may be gone right after
    }
  };

  absl::Status ApplyMigrations() {
    Connection& db = writer_db_;
    TESSEL_RETURN_IF_ERROR(
        db.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"));
    std::set<int> known;
    for (const Migration& migration : Migrations()) known.insert(migration.version);
    for (const Migration& migration : Migrations()) {
      // BEGIN IMMEDIATE takes the write lock first, so two processes opening the same new file
      // cannot both apply a migration.
      TESSEL_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
      absl::StatusOr<bool> applied = ApplyMigrationLocked(migration, known);
      if (!applied.ok()) {
        if (db.InTransaction()) (void)db.Exec("ROLLBACK");
        return applied.status();
      }
      TESSEL_RETURN_IF_ERROR(db.Exec(*applied ? "COMMIT" : "ROLLBACK"));
    }
    return absl::OkStatus();
  }

  // Applies `migration` unless recorded; returns whether it applied it.
  // REQUIRES: a write transaction is open on writer_db_.
  absl::StatusOr<bool> ApplyMigrationLocked(const Migration& migration,
                                            const std::set<int>& known) {
    Connection& db = writer_db_;
    bool recorded = false;
    {
      TESSEL_PREPARE(versions, db, "SELECT version FROM schema_migrations ORDER BY version");
      while (true) {
        absl::StatusOr<bool> row = versions.Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        int version = static_cast<int>(versions.Int(0));
        if (!known.contains(version)) {
          return absl::FailedPreconditionError(fmt::format(
              "database {} was written by a newer tessel (migration {}); this binary knows "
              "migrations up to {}. Use a newer tessel or another --db",
              path_, version, *known.rbegin()));
        }
        if (version == migration.version) recorded = true;
      }
    }
    if (recorded) return false;
    TESSEL_RETURN_IF_ERROR(db.ExecScript(std::string(migration.sql),
                                         fmt::format("applying migration {}", migration.name)));
    TESSEL_PREPARE(record, db,
                   "INSERT INTO schema_migrations (version, name, applied_ms) VALUES (?, ?, ?)");
    record.BindInt(migration.version).BindText(migration.name).BindInt(NowUnixMs());
    TESSEL_RETURN_IF_ERROR(record.Run());
    return true;
  }

  bool QueueReadyOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return stopping_ || !queue_.empty();
  }

  void WriterLoop() {
    const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch));
    while (true) {
      std::vector<WriteOp*> batch;
      {
        absl::MutexLock lock(&queue_mu_, absl::Condition(this, &Impl::QueueReadyOrStopping));
        if (queue_.empty()) return;  // stopping, and everything queued has committed
        while (!queue_.empty() && batch.size() < max_batch) {
          batch.push_back(queue_.front());
          queue_.pop_front();
        }
      }
      RunBatch(std::move(batch));
    }
  }

  // Commits `ops` in one transaction, each in its own savepoint, and finishes every op.
  void RunBatch(std::vector<WriteOp*> ops) {
    Connection& db = writer_db_;
    while (!ops.empty()) {
      if (absl::Status begin = db.Exec("BEGIN IMMEDIATE"); !begin.ok()) {
        for (WriteOp* op : ops) op->Finish(begin);
        return;
      }
      std::vector<WriteOp*> succeeded;
      std::vector<std::pair<WriteOp*, absl::Status>> failed;
      std::optional<size_t> aborted_at;  // an op after which SQLite rolled back the transaction
      for (size_t i = 0; i < ops.size(); ++i) {
        WriteOp* op = ops[i];
        absl::Status status = db.Exec("SAVEPOINT write");
        if (status.ok()) status = op->write(db);
        if (status.ok()) status = db.Exec("RELEASE write");
        if (status.ok()) {
          succeeded.push_back(op);
          continue;
        }
        if (db.InTransaction() && db.Exec("ROLLBACK TO write").ok() &&
            db.Exec("RELEASE write").ok()) {
          failed.emplace_back(op, std::move(status));
          continue;
        }
        // SQLite dropped the whole transaction (e.g. disk full): fail this op, rerun the others.
        if (db.InTransaction()) (void)db.Exec("ROLLBACK");
        op->Finish(std::move(status));
        aborted_at = i;
        break;
      }
      if (aborted_at.has_value()) {
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(*aborted_at));
        continue;
      }
      absl::Status commit = db.Exec("COMMIT");
      if (!commit.ok()) {
        if (db.InTransaction()) (void)db.Exec("ROLLBACK");
        for (WriteOp* op : succeeded) op->Finish(commit);
      } else {
        transactions_committed_.fetch_add(1);
        writes_committed_.fetch_add(static_cast<int64_t>(succeeded.size()));
        for (WriteOp* op : succeeded) op->Finish(absl::OkStatus());
      }
      for (auto& [op, status] : failed) op->Finish(std::move(status));
      return;
    }
  }

  const std::string path_;
  const StoreOptions options_;

  Connection writer_db_;  // used only by Open, then only by the writer thread
  std::thread writer_thread_;

  absl::Mutex queue_mu_;
  std::deque<WriteOp*> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;

  absl::Mutex read_mu_;
  Connection reader_db_ ABSL_GUARDED_BY(read_mu_);

  std::atomic<int64_t> transactions_committed_{0};
  std::atomic<int64_t> writes_committed_{0};
};

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
  return impl_->Read<std::vector<int>>([](Connection& db) -> absl::StatusOr<std::vector<int>> {
    TESSEL_PREPARE(select, db, "SELECT version FROM schema_migrations ORDER BY version");
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
  if (!Contains(kJobStates, job.state)) {
    return absl::InvalidArgumentError(fmt::format(
        "job state '{}' is not one of queued, running, completed, cancelled, failed", job.state));
  }
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
  absl::Status status = impl_->Write([&](Connection& db) -> absl::Status {
    absl::StatusOr<int64_t> workload_id = WorkloadId(db, job.workload);
    if (!workload_id.ok()) return workload_id.status();
    TESSEL_PREPARE(
        insert, db,
        "INSERT INTO jobs (workload_id, dims_display, kernel_version, target_version, "
        "strategy, budget, seed, state, message, default_config, roofline_ns, "
        "created_ms, finished_ms, time_limit_s, stop_after_no_improvement, "
        "target_time_ns, effort, stopped_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?)");
    insert.BindInt(*workload_id)
        .BindText(job.dims_display)
        .BindInt(job.kernel_version)
        .BindInt(job.target_version)
        .BindText(job.strategy)
        .BindInt(job.budget)
        .BindInt(static_cast<int64_t>(job.seed))
        .BindText(job.state)
        .BindText(job.message)
        .BindText(job.default_config)
        .BindDouble(job.roofline_ns)
        .BindInt(created_ms)
        .BindOptionalInt(job.finished_ms)
        .BindInt(job.time_limit_s)
        .BindInt(job.stop_after_no_improvement)
        .BindDouble(job.target_time_ns)
        .BindText(job.effort)
        .BindText(job.stopped_by);
    TESSEL_RETURN_IF_ERROR(insert.Run());
    job_id = db.LastInsertRowId();
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return job_id;
}

absl::Status Store::UpdateJobState(int64_t job_id, const std::string& state,
                                   const std::string& message, const std::string& stopped_by) {
  if (!Contains(kJobStates, state)) {
    return absl::InvalidArgumentError(fmt::format(
        "job state '{}' is not one of queued, running, completed, cancelled, failed", state));
  }
  std::optional<int64_t> finished_ms;
  if (Contains(kFinalJobStates, state)) finished_ms = NowUnixMs();
  return impl_->Write([&](Connection& db) -> absl::Status {
    TESSEL_PREPARE(update, db,
                   "UPDATE jobs SET state = ?, message = ?, finished_ms = ?, stopped_by = ? "
                   "WHERE id = ?");
    update.BindText(state)
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
  for (const TrialRecord& trial : trials) {
    if (!Contains(kTrialStatuses, trial.status)) {
      return absl::InvalidArgumentError(fmt::format(
          "trial {}: status '{}' is not one of OK, INVALID_CONFIG, WRONG_ANSWER, RUNTIME_ERROR, "
          "TIMEOUT, WORKER_LOST, CANCELLED; no trial of this call was written",
          trial.id, trial.status));
    }
    samples_json.push_back(SamplesToJson(trial.samples_ns));
  }
  const int64_t now_ms = NowUnixMs();
  return impl_->Write([&](Connection& db) -> absl::Status {
    for (size_t i = 0; i < trials.size(); ++i) {
      const TrialRecord& trial = trials[i];
      TESSEL_PREPARE(insert, db,
                     "INSERT INTO trials (id, job_id, config, status, time_ns, samples_json, "
                     "message, bound, stats_json, verified, is_default, is_verify, worker_id, "
                     "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      insert.BindInt(trial.id)
          .BindInt(trial.job_id)
          .BindText(trial.config)
          .BindText(trial.status)
          .BindOptionalDouble(trial.time_ns)
          .BindText(samples_json[i])
          .BindText(trial.message)
          .BindText(trial.bound)
          .BindText(trial.stats_json)
          .BindInt(trial.verified ? 1 : 0)
          .BindInt(trial.is_default ? 1 : 0)
          .BindInt(trial.is_verify ? 1 : 0)
          .BindText(trial.worker_id)
          .BindInt(trial.created_ms != 0 ? trial.created_ms : now_ms);
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
  absl::Status status = impl_->Write([&](Connection& db) -> absl::Status {
    absl::StatusOr<int64_t> workload_id = WorkloadId(db, best.workload);
    if (!workload_id.ok()) return workload_id.status();
    {
      TESSEL_PREPARE(snapshot, db, "INSERT INTO snapshots (created_ms) VALUES (?)");
      snapshot.BindInt(published_ms);
      TESSEL_RETURN_IF_ERROR(snapshot.Run());
      snapshot_id = db.LastInsertRowId();
    }
    TESSEL_PREPARE(insert, db,
                   "INSERT INTO best (workload_id, kernel_version, target_version, config, "
                   "time_ns, job_id, trial_id, snapshot_id, published_ms) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert.BindInt(*workload_id)
        .BindInt(best.kernel_version)
        .BindInt(best.target_version)
        .BindText(best.config)
        .BindDouble(best.time_ns)
        .BindOptionalInt(best.job_id != 0 ? std::optional<int64_t>(best.job_id) : std::nullopt)
        .BindOptionalInt(best.trial_id != 0 ? std::optional<int64_t>(best.trial_id) : std::nullopt)
        .BindInt(snapshot_id)
        .BindInt(published_ms);
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
  return impl_->Write([&](Connection& db) -> absl::Status {
    // A known worker keeps its registered_ms; everything else is replaced.
    TESSEL_PREPARE(upsert, db,
                   "INSERT INTO workers (id, name, targets, slots, registered_ms, "
                   "last_heartbeat_ms, trials_done) VALUES (?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (id) DO UPDATE SET name = excluded.name, targets = "
                   "excluded.targets, slots = excluded.slots, last_heartbeat_ms = "
                   "excluded.last_heartbeat_ms, trials_done = excluded.trials_done");
    upsert.BindText(worker.id)
        .BindText(worker.name)
        .BindText(worker.targets)
        .BindInt(worker.slots)
        .BindInt(worker.registered_ms != 0 ? worker.registered_ms : now_ms)
        .BindInt(worker.last_heartbeat_ms != 0 ? worker.last_heartbeat_ms : now_ms)
        .BindInt(worker.trials_done);
    return upsert.Run();
  });
}

absl::StatusOr<JobRecord> Store::GetJob(int64_t job_id) {
  return impl_->Read<JobRecord>([&](Connection& db) -> absl::StatusOr<JobRecord> {
    static const std::string kSql = std::string(kJobSelect) + "WHERE j.id = ?";
    TESSEL_PREPARE(select, db, kSql);
    select.BindInt(job_id);
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::NotFoundError(fmt::format("job {} not found", job_id));
    return JobFromRow(select);
  });
}

namespace {

// Reads every row of `select` with `from_row`.
template <typename T, typename FromRow>
absl::StatusOr<std::vector<T>> AllRows(Statement& select, FromRow from_row) {
  std::vector<T> out;
  while (true) {
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(from_row(select));
  }
}

}  // namespace

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(int limit) {
  using Jobs = std::vector<JobRecord>;
  return impl_->Read<Jobs>([&](Connection& db) -> absl::StatusOr<Jobs> {
    static const std::string kSql = std::string(kJobSelect) + "ORDER BY j.id DESC LIMIT ?";
    TESSEL_PREPARE(select, db, kSql);
    select.BindInt(limit > 0 ? limit : -1);  // a negative LIMIT means none
    return AllRows<JobRecord>(select, JobFromRow);
  });
}

absl::StatusOr<std::vector<JobRecord>> Store::JobsInState(const std::string& state) {
  using Jobs = std::vector<JobRecord>;
  return impl_->Read<Jobs>([&](Connection& db) -> absl::StatusOr<Jobs> {
    static const std::string kSql = std::string(kJobSelect) + "WHERE j.state = ? ORDER BY j.id";
    TESSEL_PREPARE(select, db, kSql);
    select.BindText(state);
    return AllRows<JobRecord>(select, JobFromRow);
  });
}

namespace {

constexpr const char* kTrialSelect =
    "SELECT id, job_id, config, status, time_ns, samples_json, message, bound, stats_json, "
    "verified, is_default, is_verify, worker_id, created_ms FROM trials ";

TrialRecord TrialFromRow(const Statement& row) {
  TrialRecord trial;
  trial.id = row.Int(0);
  trial.job_id = row.Int(1);
  trial.config = row.Text(2);
  trial.status = row.Text(3);
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
  return trial;
}

}  // namespace

absl::StatusOr<std::vector<TrialRecord>> Store::TrialsForJob(int64_t job_id) {
  using Trials = std::vector<TrialRecord>;
  return impl_->Read<Trials>([&](Connection& db) -> absl::StatusOr<Trials> {
    static const std::string kSql = std::string(kTrialSelect) + "WHERE job_id = ? ORDER BY id";
    TESSEL_PREPARE(select, db, kSql);
    select.BindInt(job_id);
    return AllRows<TrialRecord>(select, TrialFromRow);
  });
}

absl::StatusOr<std::map<int64_t, std::vector<TrialRecord>>> Store::TrialsForJobs(
    std::span<const int64_t> job_ids) {
  using ByJob = std::map<int64_t, std::vector<TrialRecord>>;
  if (job_ids.empty()) return ByJob{};
  return impl_->Read<ByJob>([&](Connection& db) -> absl::StatusOr<ByJob> {
    // The ids as one JSON array parameter (json_each), so one prepared statement serves any count.
    static const std::string kSql = std::string(kTrialSelect) +
                                    "WHERE job_id IN (SELECT value FROM json_each(?)) "
                                    "ORDER BY job_id, id";
    TESSEL_PREPARE(select, db, kSql);
    select.BindText(StrCat("[", StrJoin(job_ids, ","), "]"));
    absl::StatusOr<std::vector<TrialRecord>> rows = AllRows<TrialRecord>(select, TrialFromRow);
    if (!rows.ok()) return rows.status();
    ByJob out;
    for (TrialRecord& trial : *rows) out[trial.job_id].push_back(std::move(trial));
    return out;
  });
}

absl::StatusOr<int64_t> Store::MaxTrialId() {
  return impl_->Read<int64_t>([](Connection& db) -> absl::StatusOr<int64_t> {
    TESSEL_PREPARE(select, db, "SELECT COALESCE(MAX(id), 0) FROM trials");
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    return *row ? select.Int(0) : 0;
  });
}

absl::StatusOr<std::optional<BestRecord>> Store::LatestBest(const WorkloadRecord& workload,
                                                            int64_t max_snapshot) {
  using MaybeBest = std::optional<BestRecord>;
  return impl_->Read<MaybeBest>([&](Connection& db) -> absl::StatusOr<MaybeBest> {
    static const std::string kSql =
        std::string(kBestSelect) +
        "WHERE w.kernel = ?1 AND w.dims = ?2 AND w.dtype = ?3 AND w.target = ?4 AND "
        "(?5 = 0 OR b.snapshot_id <= ?5) ORDER BY b.snapshot_id DESC, b.id DESC LIMIT 1";
    TESSEL_PREPARE(select, db, kSql);
    select.BindText(workload.kernel)
        .BindText(workload.dims)
        .BindText(workload.dtype)
        .BindText(workload.target)
        .BindInt(max_snapshot);
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return MaybeBest();
    return MaybeBest(BestFromRow(select));
  });
}

absl::StatusOr<std::vector<BestRecord>> Store::BestForKernel(const std::string& kernel,
                                                             int64_t max_snapshot) {
  using Bests = std::vector<BestRecord>;
  return impl_->Read<Bests>([&](Connection& db) -> absl::StatusOr<Bests> {
    // The newest row per workload; sorted by workload so the output is deterministic.
    static const std::string kSql =
        std::string(kBestSelect) +
        "WHERE w.kernel = ?1 AND b.id = (SELECT b2.id FROM best b2 WHERE b2.workload_id = "
        "b.workload_id AND (?2 = 0 OR b2.snapshot_id <= ?2) ORDER BY b2.snapshot_id DESC, "
        "b2.id DESC LIMIT 1) ORDER BY w.dims, w.dtype, w.target";
    TESSEL_PREPARE(select, db, kSql);
    select.BindText(kernel).BindInt(max_snapshot);
    return AllRows<BestRecord>(select, BestFromRow);
  });
}

absl::StatusOr<std::vector<WorkerRecord>> Store::ListWorkers() {
  using Workers = std::vector<WorkerRecord>;
  return impl_->Read<Workers>([](Connection& db) -> absl::StatusOr<Workers> {
    TESSEL_PREPARE(select, db,
                   "SELECT id, name, targets, slots, registered_ms, last_heartbeat_ms, "
                   "trials_done FROM workers ORDER BY id");
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

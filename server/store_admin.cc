// Backup, restore, retention and VACUUM of a tessel database (store_admin.h, store.h).
#include "server/store_admin.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "fmt/format.h"
#include "schema/migrations.h"
#include "schema/sqlite.h"
#include "schema/status_macros.h"
#include "server/store.h"
#include "server/store_impl.h"

namespace tessel::server {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  return absl::UnavailableError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

// fsync of a file or a directory.
absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoStatus("cannot sync", path);
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Renames `from` to `to` and syncs the directory, so the rename survives a crash.
absl::Status DurableRename(const std::string& from, const std::string& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error) {
    return absl::UnavailableError(
        fmt::format("cannot rename {} to {}: {}", from, to, error.message()));
  }
  return SyncPath(DirectoryOf(to));
}

absl::StatusOr<int64_t> QueryInt(sqlite::Database& db, const char* sql) {
  TESSEL_ASSIGN_OR_RETURN(sqlite::Statement statement, db.Prepare(sql));
  TESSEL_ASSIGN_OR_RETURN(bool row, statement.Step());
  return row && !statement.IsNull(0) ? statement.Int(0) : 0;
}

// The summary of an open database; FailedPrecondition when it is not a tessel database.
absl::StatusOr<DatabaseSummary> Summarize(sqlite::Database& db, const std::string& path) {
  absl::StatusOr<int64_t> version = QueryInt(db, "SELECT max(version) FROM schema_migrations");
  if (!version.ok()) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not a tessel database (no schema_migrations table)", path));
  }
  DatabaseSummary summary;
  summary.schema_version = static_cast<int>(*version);
  TESSEL_ASSIGN_OR_RETURN(summary.trials, QueryInt(db, "SELECT count(*) FROM trials"));
  TESSEL_ASSIGN_OR_RETURN(summary.max_trial_id, QueryInt(db, "SELECT max(id) FROM trials"));
  std::error_code error;
  summary.bytes = static_cast<int64_t>(fs::file_size(path, error));
  return summary;
}

// PRAGMA integrity_check on `db`: FailedPrecondition with its first answer unless "ok".
absl::Status CheckSound(sqlite::Database& db, const std::string& path) {
  absl::StatusOr<sqlite::Statement> check = db.Prepare("PRAGMA integrity_check(1)");
  if (!check.ok()) {
    return absl::FailedPreconditionError(fmt::format("{} cannot be read as a database ({})", path,
                                                     std::string(check.status().message())));
  }
  absl::StatusOr<bool> row = check->Step();
  if (!row.ok()) {
    return absl::FailedPreconditionError(fmt::format("{} cannot be read as a database ({})", path,
                                                     std::string(row.status().message())));
  }
  const std::string verdict = *row ? check->Text(0) : "no answer";
  if (verdict != "ok") {
    return absl::FailedPreconditionError(
        fmt::format("{} fails integrity_check: {}", path, verdict.substr(0, 200)));
  }
  return absl::OkStatus();
}

int LatestKnownMigration() { return Migrations().empty() ? 0 : Migrations().back().version; }

// An open descriptor of `path` holding flock `operation`, or the error.
absl::StatusOr<int> LockedDescriptor(const std::string& path, int operation) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  if (::flock(fd, operation) == 0) return fd;
  const int saved = errno;
  ::close(fd);
  if (saved == EWOULDBLOCK) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is in use by a running tessel server (or an embedded tune): stop it first, or stage "
        "the restore with `tessel admin restore --server ADDR`, which applies it at the server's "
        "next start",
        path));
  }
  errno = saved;
  return ErrnoStatus("cannot lock", path);
}

}  // namespace

// ---- DatabaseLock ----

absl::StatusOr<DatabaseLock> DatabaseLock::Shared(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(int fd, LockedDescriptor(path, LOCK_SH | LOCK_NB));
  return DatabaseLock(fd);
}

absl::StatusOr<DatabaseLock> DatabaseLock::Exclusive(const std::string& path) {
  TESSEL_ASSIGN_OR_RETURN(int fd, LockedDescriptor(path, LOCK_EX | LOCK_NB));
  return DatabaseLock(fd);
}

DatabaseLock& DatabaseLock::operator=(DatabaseLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DatabaseLock::~DatabaseLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

// ---- backup and restore ----

int64_t DatabaseBytes(const std::string& db_path) {
  int64_t bytes = 0;
  for (const std::string& path : {db_path, db_path + "-wal"}) {
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (!error) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

absl::StatusOr<DatabaseSummary> BackupDatabase(const std::string& db_path,
                                               const std::string& out_path) {
  if (!fs::exists(db_path)) return absl::NotFoundError(fmt::format("no database at {}", db_path));
  sqlite::OpenOptions source_options;
  source_options.read_only = true;
  source_options.busy_timeout_ms = 5000;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> source,
                          sqlite::Database::Open(db_path, source_options));
  const std::string partial = out_path + ".partial";
  std::error_code ignored;
  fs::remove(partial, ignored);
  DatabaseSummary summary;
  {
    sqlite::OpenOptions copy_options;
    copy_options.create = true;
    TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> copy,
                            sqlite::Database::Open(partial, copy_options));
    absl::Status copied = source->BackupTo(*copy);
    // The source is in WAL mode and so is the copy's header: make the copy one file of its own.
    if (copied.ok()) copied = copy->Exec("PRAGMA journal_mode = DELETE");
    if (copied.ok()) copied = CheckSound(*copy, partial);
    if (!copied.ok()) {
      copy.reset();
      fs::remove(partial, ignored);
      return copied;
    }
    TESSEL_ASSIGN_OR_RETURN(summary, Summarize(*copy, partial));
  }
  TESSEL_RETURN_IF_ERROR(SyncPath(partial));
  TESSEL_RETURN_IF_ERROR(DurableRename(partial, out_path));
  return summary;
}

absl::StatusOr<DatabaseSummary> InspectBackup(const std::string& path) {
  if (!fs::is_regular_file(path)) {
    return absl::NotFoundError(fmt::format("no backup file at {}", path));
  }
  sqlite::OpenOptions options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<sqlite::Database>> db = sqlite::Database::Open(path, options);
  if (!db.ok()) {
    return absl::FailedPreconditionError(fmt::format("{} cannot be opened as a database ({})", path,
                                                     std::string(db.status().message())));
  }
  TESSEL_RETURN_IF_ERROR(CheckSound(**db, path));
  TESSEL_ASSIGN_OR_RETURN(DatabaseSummary summary, Summarize(**db, path));
  if (summary.schema_version > LatestKnownMigration()) {
    return absl::FailedPreconditionError(fmt::format(
        "{} was written by a newer tessel (schema version {}; this build knows up to {}): "
        "restore it with that version",
        path, summary.schema_version, LatestKnownMigration()));
  }
  return summary;
}

absl::StatusOr<std::string> RestoreDatabase(const std::string& backup_path,
                                            const std::string& db_path) {
  TESSEL_RETURN_IF_ERROR(InspectBackup(backup_path).status());
  std::string kept;
  std::optional<DatabaseLock> lock;
  if (fs::exists(db_path)) {
    TESSEL_ASSIGN_OR_RETURN(lock, DatabaseLock::Exclusive(db_path));
    kept = fmt::format("{}.before-restore-{}", db_path, NowUnixMs());
    // The WAL may hold committed transactions (a server that was killed): keep it with its file.
    for (const char* suffix : {"-wal", "-shm"}) {
      if (fs::exists(db_path + suffix)) {
        TESSEL_RETURN_IF_ERROR(DurableRename(db_path + suffix, kept + suffix));
      }
    }
    TESSEL_RETURN_IF_ERROR(DurableRename(db_path, kept));
  }
  const std::string partial = db_path + ".restoring";
  std::error_code error;
  fs::copy_file(backup_path, partial, fs::copy_options::overwrite_existing, error);
  if (error) {
    return absl::UnavailableError(
        fmt::format("cannot copy {} to {}: {}", backup_path, partial, error.message()));
  }
  TESSEL_RETURN_IF_ERROR(SyncPath(partial));
  TESSEL_RETURN_IF_ERROR(DurableRename(partial, db_path));
  return kept;
}

std::string StagedRestorePath(const std::string& db_path) { return db_path + ".restore"; }

absl::StatusOr<std::optional<std::string>> ApplyStagedRestore(const std::string& db_path) {
  const std::string staged = StagedRestorePath(db_path);
  if (!fs::exists(staged)) return std::nullopt;
  TESSEL_ASSIGN_OR_RETURN(std::string kept, RestoreDatabase(staged, db_path));
  std::error_code error;
  fs::remove(staged, error);
  if (error) {
    return absl::UnavailableError(fmt::format(
        "restored {} from {} but cannot remove it ({}): remove it by hand, or the next start "
        "restores it again",
        db_path, staged, error.message()));
  }
  return kept;
}

// ---- retention and VACUUM of an open store ----

absl::StatusOr<int64_t> Store::DeleteOldTrials(const RetentionPolicy& policy, int64_t now_ms) {
  if (policy.keep_trials_days <= 0) return 0;
  const int64_t cutoff_ms = now_ms - int64_t{policy.keep_trials_days} * 86'400'000;
  int64_t deleted = 0;
  TESSEL_RETURN_IF_ERROR(impl_->Write([&](sqlite::Database& db) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(sqlite::Statement statement, db.Prepare(R"sql(
      DELETE FROM trials
      WHERE created_ms < ?1
        AND is_default = 0
        AND job_id IN (SELECT id FROM jobs WHERE state IN ('completed', 'cancelled', 'failed'))
        AND id NOT IN (SELECT trial_id FROM best WHERE trial_id IS NOT NULL)
        AND id NOT IN (
          SELECT id FROM (
            SELECT t.id AS id,
                   row_number() OVER (PARTITION BY j.workload_id ORDER BY t.time_ns, t.id) AS rank
            FROM trials t JOIN jobs j ON j.id = t.job_id
            WHERE t.status = 'OK' AND t.time_ns IS NOT NULL)
          WHERE rank <= ?2))sql"));
    TESSEL_RETURN_IF_ERROR(statement.BindInt(cutoff_ms).BindInt(policy.keep_top).Run());
    deleted = db.Changes();
    return absl::OkStatus();
  }));
  return deleted;
}

absl::Status Store::Vacuum() {
  return impl_->WriteAlone([](sqlite::Database& db) -> absl::Status {
    TESSEL_RETURN_IF_ERROR(db.Exec("VACUUM"));
    return db.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  });
}

const std::string& Store::path() const { return impl_->path(); }

}  // namespace tessel::server

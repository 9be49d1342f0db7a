// Backups and restores of a tessel database file (`tessel admin backup|restore`, AdminService),
// and the lock by which every server that has a database open keeps a restore off it. Retention
// and VACUUM of an open store are Store methods (store.h); they live in store_admin.cc too.
#ifndef TESSEL_SERVER_STORE_ADMIN_H_
#define TESSEL_SERVER_STORE_ADMIN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessel::server {

// What a database file holds, as far as an operator checks a backup.
struct DatabaseSummary {
  int64_t bytes = 0;         // the file's size (a backup has no WAL beside it)
  int64_t trials = 0;        // rows of `trials`
  int64_t max_trial_id = 0;  // the newest trial
  int schema_version = 0;    // the newest migration applied
};

// Copies the database at `db_path` to `out_path` with SQLite's online backup API: the copy is the
// database as one read transaction saw it, so it holds every write committed before the backup
// began, and writers (a running server) go on meanwhile. The copy is a single self-contained file
// (rollback journal mode), checked with integrity_check, fsync'ed and then renamed into place, so
// `out_path` never holds a partial copy. NotFound when there is no database at `db_path`.
absl::StatusOr<DatabaseSummary> BackupDatabase(const std::string& db_path,
                                               const std::string& out_path);

// Checks that `path` can be restored: a tessel database (it has schema_migrations) that passes
// integrity_check, with no migration newer than this build knows. FailedPrecondition naming the
// problem when not.
absl::StatusOr<DatabaseSummary> InspectBackup(const std::string& path);

// Replaces the database at `db_path` (absent is fine) by a copy of the backup at `backup_path`,
// after InspectBackup. The database it replaces is kept beside it, renamed to
// `<db_path>.before-restore-<unix ms>` (with its -wal and -shm files); the returned path names
// it, empty when there was none. FailedPrecondition when a server has `db_path` open
// (DatabaseLock): a restore must not change a file under a running server.
absl::StatusOr<std::string> RestoreDatabase(const std::string& backup_path,
                                            const std::string& db_path);

// Where AdminService.Restore stages an uploaded backup: the server applies it at its next start
// (ApplyStagedRestore), before it opens its database.
std::string StagedRestorePath(const std::string& db_path);

// Applies a staged restore of `db_path`, if there is one: RestoreDatabase from the staged file,
// which is then removed. Returns the kept path of the replaced database (RestoreDatabase), nullopt
// when nothing was staged.
absl::StatusOr<std::optional<std::string>> ApplyStagedRestore(const std::string& db_path);

// A shared advisory lock (flock) on a database file, held by every server (and embedded CLI
// server) for as long as it has the file open. RestoreDatabase takes it exclusively and fails
// fast when anyone holds it. SQLite's own locks are POSIX record locks, which flock does not
// touch. Move-only; released on destruction.
class DatabaseLock {
 public:
  static absl::StatusOr<DatabaseLock> Shared(const std::string& path);
  // Exclusive, without waiting: FailedPrecondition when the file is in use.
  static absl::StatusOr<DatabaseLock> Exclusive(const std::string& path);
  DatabaseLock(DatabaseLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DatabaseLock& operator=(DatabaseLock&& other) noexcept;
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;
  ~DatabaseLock();

 private:
  explicit DatabaseLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The bytes a database occupies on disk: the file and its WAL.
int64_t DatabaseBytes(const std::string& db_path);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_STORE_ADMIN_H_

// A small RAII wrapper over the SQLite C API, shared by the server's store, libtessel's snapshot
// reader/writer and its local answer cache. Every failure is an absl::Status whose code follows
// the SQLite result code (SqliteCode) and whose message names what failed, the database path and
// SQLite's own message.
//
//   TESSEL_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path, {.read_only = true}));
//   TESSEL_ASSIGN_OR_RETURN(auto select, db->Prepare("SELECT a, b FROM t WHERE k = ?"));
//   select.BindText(key);
//   while (true) {
//     TESSEL_ASSIGN_OR_RETURN(bool row, select.Step());
//     if (!row) break;
//     use(select.Int(0), select.Text(1));
//   }
//
// Not thread-safe: one Database (and its statements) is used by one thread at a time.
#ifndef TESSEL_SCHEMA_SQLITE_H_
#define TESSEL_SCHEMA_SQLITE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tessel::sqlite {

// The closest canonical status code for an (extended) SQLite result code: constraint violations
// of a primary key or unique index are AlreadyExists, of a foreign key FailedPrecondition, other
// constraints InvalidArgument; busy, locked, I/O and cannot-open are Unavailable; full and
// no-memory ResourceExhausted; read-only and permission PermissionDenied; corrupt and
// not-a-database DataLoss; anything else Internal.
absl::StatusCode SqliteCode(int result_code);

// PRAGMA synchronous levels; kUnchanged keeps SQLite's default (FULL).
enum class Synchronous { kUnchanged, kNormal, kFull };

// How Database::Open opens and sets up a connection. Each field's default is the plain SQLite one.
struct OpenOptions {
  bool read_only = false;     // SQLITE_OPEN_READONLY (no writes, never creates)
  bool create = false;        // create the file when absent (ignored when read_only)
  int busy_timeout_ms = 0;    // wait this long for another connection's lock; 0 = fail fast
  bool foreign_keys = false;  // PRAGMA foreign_keys = ON
  bool wal = false;           // PRAGMA journal_mode = WAL; fails when the file cannot use it
  Synchronous synchronous = Synchronous::kUnchanged;  // PRAGMA synchronous = NORMAL or FULL
  bool query_only = false;  // PRAGMA query_only = ON (a read-write open that never writes)
};

class Database;

// A prepared statement in use, handed out by Database::Prepare. Binds parameters left to right;
// a bind error is reported by the next Step. On destruction the statement is reset (ending its
// read transaction) and its bindings cleared, and it returns to its database's cache. Move-only;
// must not outlive its Database.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  Statement& BindInt(int64_t value);
  Statement& BindDouble(double value);
  Statement& BindText(std::string_view value);
  Statement& BindNull();
  Statement& BindOptionalInt(const std::optional<int64_t>& value);
  Statement& BindOptionalDouble(const std::optional<double>& value);

  // Steps once: true when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Steps to completion, ignoring rows.
  absl::Status Run();

  // Columns of the current row, counted from 0. Text of a NULL column is "".
  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  bool IsNull(int column) const;

 private:
  friend class Database;
  Statement(Database* database, sqlite3_stmt* stmt) : database_(database), stmt_(stmt) {}
  Statement& Check(int rc);

  Database* database_;
  sqlite3_stmt* stmt_;
  int next_index_ = 1;
  int bind_rc_ = 0;  // SQLITE_OK
};

// One SQLite connection with a cache of prepared statements. Closed on destruction.
class Database {
 public:
  // Opens `path` with extended result codes and `options`. NotFound-like failures (a missing file
  // without `create`) and every setup failure come back as a status naming `path`.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const OpenOptions& options);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // The cached prepared statement for `sql` (one statement), prepared on first use. Only one
  // Statement per distinct `sql` may be in use at a time.
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // Runs one statement without parameters, ignoring rows (BEGIN, PRAGMA ...); cached.
  absl::Status Exec(std::string_view sql);
  // Runs a script of several statements (a migration, a schema) with sqlite3_exec, uncached.
  // `what` names it in an error.
  absl::Status ExecScript(const std::string& script, std::string_view what);

  // A status for the failed result code `rc`: "<what> on database <path>: <sqlite message>".
  absl::Status Error(int rc, std::string_view what) const;

  bool InTransaction() const;
  int64_t LastInsertRowId() const;
  // Copies this connection's main database, every page, over `destination`'s with SQLite's online
  // backup API in a single step: the pages are read in one read transaction, so the copy is a
  // consistent snapshot even while other connections write (in WAL mode they are not blocked).
  absl::Status BackupTo(Database& destination);
  int64_t Changes() const;
  const std::string& path() const { return path_; }

 private:
  Database(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  absl::Status Setup(const OpenOptions& options);

  std::string path_;
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

// A transaction that rolls back unless committed. Begin with BEGIN (deferred) or, with
// `immediate`, BEGIN IMMEDIATE (takes the write lock at once). Move-only; must not outlive its
// Database.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Database& database, bool immediate = false);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  // Rolls back when still open (errors ignored: SQLite has rolled back itself on most failures).
  ~Transaction();

  // COMMIT. On failure the transaction is rolled back and the status returned.
  absl::Status Commit();

 private:
  explicit Transaction(Database* database) : database_(database) {}
  Database* database_;  // nullptr once committed or moved from
};

}  // namespace tessel::sqlite

#endif  // TESSEL_SCHEMA_SQLITE_H_

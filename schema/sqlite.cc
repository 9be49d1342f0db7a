#include "schema/sqlite.h"

#include <sqlite3.h>

#include "fmt/format.h"
#include "schema/status_macros.h"

namespace tessel::sqlite {

namespace {

struct CodeMapping {
  int sqlite;
  absl::StatusCode status;
};

// Extended codes with a meaning of their own, looked up first.
constexpr CodeMapping kExtendedCodes[] = {
    {SQLITE_CONSTRAINT_PRIMARYKEY, absl::StatusCode::kAlreadyExists},
    {SQLITE_CONSTRAINT_UNIQUE, absl::StatusCode::kAlreadyExists},
    {SQLITE_CONSTRAINT_FOREIGNKEY, absl::StatusCode::kFailedPrecondition},
};

// Primary codes (the low byte of an extended code).
constexpr CodeMapping kPrimaryCodes[] = {
    {SQLITE_CONSTRAINT, absl::StatusCode::kInvalidArgument},
    {SQLITE_MISMATCH, absl::StatusCode::kInvalidArgument},
    {SQLITE_TOOBIG, absl::StatusCode::kInvalidArgument},
    {SQLITE_BUSY, absl::StatusCode::kUnavailable},
    {SQLITE_LOCKED, absl::StatusCode::kUnavailable},
    {SQLITE_IOERR, absl::StatusCode::kUnavailable},
    {SQLITE_CANTOPEN, absl::StatusCode::kUnavailable},
    {SQLITE_FULL, absl::StatusCode::kResourceExhausted},
    {SQLITE_NOMEM, absl::StatusCode::kResourceExhausted},
    {SQLITE_PERM, absl::StatusCode::kPermissionDenied},
    {SQLITE_READONLY, absl::StatusCode::kPermissionDenied},
    {SQLITE_AUTH, absl::StatusCode::kPermissionDenied},
    {SQLITE_CORRUPT, absl::StatusCode::kDataLoss},
    {SQLITE_NOTADB, absl::StatusCode::kDataLoss},
};

}  // namespace

absl::StatusCode SqliteCode(int result_code) {
  for (const CodeMapping& mapping : kExtendedCodes) {
    if (mapping.sqlite == result_code) return mapping.status;
  }
  for (const CodeMapping& mapping : kPrimaryCodes) {
    if (mapping.sqlite == (result_code & 0xff)) return mapping.status;
  }
  return absl::StatusCode::kInternal;
}

// ---- Statement ----

Statement::Statement(Statement&& other) noexcept
    : database_(other.database_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      next_index_(other.next_index_),
      bind_rc_(other.bind_rc_) {}

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Statement& Statement::Check(int rc) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindInt(int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, next_index_++, value));
}
Statement& Statement::BindDouble(double value) {
  return Check(sqlite3_bind_double(stmt_, next_index_++, value));
}
Statement& Statement::BindText(std::string_view value) {
  return Check(sqlite3_bind_text64(stmt_, next_index_++, value.data(), value.size(),
                                   SQLITE_TRANSIENT, SQLITE_UTF8));
}
Statement& Statement::BindNull() { return Check(sqlite3_bind_null(stmt_, next_index_++)); }
Statement& Statement::BindOptionalInt(const std::optional<int64_t>& value) {
  return value.has_value() ? BindInt(*value) : BindNull();
}
Statement& Statement::BindOptionalDouble(const std::optional<double>& value) {
  return value.has_value() ? BindDouble(*value) : BindNull();
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return database_->Error(bind_rc_, "binding a parameter");
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return database_->Error(rc, fmt::format("running \"{}\"", sqlite3_sql(stmt_)));
}

absl::Status Statement::Run() {
  while (true) {
    TESSEL_ASSIGN_OR_RETURN(const bool row, Step());
    if (!row) return absl::OkStatus();
  }
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }
bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}
std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

// ---- Database ----

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const OpenOptions& options) {
  int flags = SQLITE_OPEN_NOMUTEX;
  if (options.read_only) {
    flags |= SQLITE_OPEN_READONLY;
  } else {
    flags |= SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);  // a handle is returned even on most failures
    return absl::Status(
        SqliteCode(rc),
        options.read_only
            ? fmt::format("cannot open database {}: {}", path, detail)
            : fmt::format("cannot open database {}: {} (check that the directory exists and is "
                          "writable)",
                          path, detail));
  }
  std::unique_ptr<Database> database(new Database(path, db));
  TESSEL_RETURN_IF_ERROR(database->Setup(options));
  return database;
}

absl::Status Database::Setup(const OpenOptions& options) {
  sqlite3_extended_result_codes(db_, 1);
  if (options.busy_timeout_ms > 0) sqlite3_busy_timeout(db_, options.busy_timeout_ms);
  if (options.foreign_keys) TESSEL_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys = ON"));
  if (options.synchronous == Synchronous::kNormal) {
    TESSEL_RETURN_IF_ERROR(Exec("PRAGMA synchronous = NORMAL"));
  } else if (options.synchronous == Synchronous::kFull) {
    TESSEL_RETURN_IF_ERROR(Exec("PRAGMA synchronous = FULL"));
  }
  if (options.wal) {
    TESSEL_ASSIGN_OR_RETURN(Statement mode, Prepare("PRAGMA journal_mode = WAL"));
    TESSEL_ASSIGN_OR_RETURN(const bool row, mode.Step());
    const std::string journal_mode = row ? mode.Text(0) : "";
    if (journal_mode != "wal") {
      return absl::FailedPreconditionError(fmt::format(
          "cannot put database {} in WAL mode (journal_mode is '{}'); the store needs a file "
          "on a local file system",
          path_, journal_mode));
    }
  }
  if (options.query_only) TESSEL_RETURN_IF_ERROR(Exec("PRAGMA query_only = ON"));
  return absl::OkStatus();
}

Database::~Database() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, fmt::format("preparing \"{}\"", sql));
    it = cache_.emplace(std::string(sql), stmt).first;
  }
  return Statement(this, it->second);
}

absl::Status Database::Exec(std::string_view sql) {
  TESSEL_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  return stmt.Run();
}

absl::Status Database::ExecScript(const std::string& script, std::string_view what) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, script.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string detail = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return absl::Status(SqliteCode(rc), fmt::format("{} on database {}: {}", what, path_, detail));
}

absl::Status Database::Error(int rc, std::string_view what) const {
  return absl::Status(SqliteCode(rc),
                      fmt::format("{} on database {}: {}", what, path_, sqlite3_errmsg(db_)));
}

bool Database::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }
int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int64_t Database::Changes() const { return sqlite3_changes64(db_); }

absl::Status Database::BackupTo(Database& destination) {
  sqlite3_backup* backup = sqlite3_backup_init(destination.db_, "main", db_, "main");
  if (backup == nullptr) {
    return destination.Error(sqlite3_extended_errcode(destination.db_), "backup_init");
  }
  int rc = SQLITE_OK;
  // A busy source or destination (another connection's lock) is waited out; each retry copies
  // the whole database again from a fresh read transaction.
  for (int attempt = 0; attempt < 100; ++attempt) {
    rc = sqlite3_backup_step(backup, -1);
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    sqlite3_sleep(50);
  }
  const int finish_rc = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return Error(rc, "backup_step");
  if (finish_rc != SQLITE_OK) return destination.Error(finish_rc, "backup_finish");
  return absl::OkStatus();
}

// ---- Transaction ----

absl::StatusOr<Transaction> Transaction::Begin(Database& database, bool immediate) {
  TESSEL_RETURN_IF_ERROR(database.Exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN"));
  return Transaction(&database);
}

Transaction::Transaction(Transaction&& other) noexcept
    : database_(std::exchange(other.database_, nullptr)) {}

Transaction::~Transaction() {
  if (database_ != nullptr && database_->InTransaction()) (void)database_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  Database* database = std::exchange(database_, nullptr);
  if (database == nullptr) return absl::FailedPreconditionError("transaction already finished");
  absl::Status commit = database->Exec("COMMIT");
  if (!commit.ok() && database->InTransaction()) (void)database->Exec("ROLLBACK");
  return commit;
}

}  // namespace tessel::sqlite

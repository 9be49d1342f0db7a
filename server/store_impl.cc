// Store::Impl: connections, migrations and the writer thread (see store_impl.h).
#include "server/store_impl.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::server {

sqlite::OpenOptions Store::Impl::ConnectionOptions() const {
  sqlite::OpenOptions open;
  open.busy_timeout_ms = options_.busy_timeout_ms;
  open.foreign_keys = true;
  open.synchronous =
      options_.synchronous_full ? sqlite::Synchronous::kFull : sqlite::Synchronous::kNormal;
  return open;
}

absl::StatusOr<std::unique_ptr<sqlite::Database>> Store::Impl::OpenReader() const {
  sqlite::OpenOptions reader = ConnectionOptions();
  reader.query_only = true;
  return sqlite::Database::Open(path_, reader);
}

absl::StatusOr<std::unique_ptr<sqlite::Database>> Store::Impl::AcquireReader() {
  {
    absl::MutexLock lock(&readers_mu_);
    const int max_readers = std::max(1, options_.max_readers);
    auto can_proceed = [this, max_readers]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(readers_mu_) {
      return !idle_readers_.empty() || open_readers_ < max_readers;
    };
    readers_mu_.Await(absl::Condition(&can_proceed));
    if (!idle_readers_.empty()) {
      std::unique_ptr<sqlite::Database> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return reader;
    }
    ++open_readers_;  // reserved; opened below, outside the lock
  }
  absl::StatusOr<std::unique_ptr<sqlite::Database>> reader = OpenReader();
  if (!reader.ok()) {
    absl::MutexLock lock(&readers_mu_);
    --open_readers_;
  }
  return reader;
}

void Store::Impl::ReleaseReader(std::unique_ptr<sqlite::Database> reader) {
  absl::MutexLock lock(&readers_mu_);
  idle_readers_.push_back(std::move(reader));
}

absl::Status Store::Impl::QuickCheck() {
  TESSEL_ASSIGN_OR_RETURN(sqlite::Statement check, writer_db_->Prepare("PRAGMA quick_check"));
  absl::StatusOr<bool> row = check.Step();
  if (!row.ok()) {
    return absl::DataLossError(
        fmt::format("database {} cannot be read ({}); restore it from a "
                    "backup or point --db elsewhere",
                    path_, std::string(row.status().message())));
  }
  const std::string verdict = *row ? check.Text(0) : "no answer";
  if (verdict != "ok") {
    return absl::DataLossError(fmt::format(
        "database {} is corrupt (quick_check: {}); restore it from a backup or point --db "
        "elsewhere",
        path_, Shown(verdict, 200)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckIntegrity(const std::string& path, int max_problems) {
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(fmt::format("no database at {}", path));
  }
  sqlite::OpenOptions options;
  options.read_only = true;
  options.busy_timeout_ms = 5000;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> db,
                          sqlite::Database::Open(path, options));
  std::vector<std::string> problems;
  auto collect = [&](const std::string& sql, auto describe) -> absl::Status {
    absl::StatusOr<sqlite::Statement> check = db->Prepare(sql);
    if (!check.ok()) {
      return absl::DataLossError(fmt::format("{} cannot be read as a tessel database ({})", path,
                                             std::string(check.status().message())));
    }
    while (static_cast<int>(problems.size()) < max_problems) {
      absl::StatusOr<bool> row = check->Step();
      if (!row.ok()) {
        return absl::DataLossError(
            fmt::format("{} cannot be read ({})", path, std::string(row.status().message())));
      }
      if (!*row) break;
      if (std::optional<std::string> problem = describe(*check)) {
        problems.push_back(*std::move(problem));
      }
    }
    return absl::OkStatus();
  };
  TESSEL_RETURN_IF_ERROR(collect(fmt::format("PRAGMA integrity_check({})", max_problems),
                                 [](sqlite::Statement& row) -> std::optional<std::string> {
                                   std::string text = row.Text(0);
                                   if (text == "ok") return std::nullopt;
                                   return Shown(text, 300);
                                 }));
  TESSEL_RETURN_IF_ERROR(collect("PRAGMA foreign_key_check", [](sqlite::Statement& row) {
    return std::optional<std::string>(fmt::format("table {} row {}: no matching row in {}",
                                                  Shown(row.Text(0), 64), row.Int(1),
                                                  Shown(row.Text(2), 64)));
  }));
  return problems;
}

absl::Status Store::Impl::Open() {
  sqlite::OpenOptions writer = ConnectionOptions();
  writer.create = true;
  writer.wal = true;
  TESSEL_ASSIGN_OR_RETURN(writer_db_, sqlite::Database::Open(path_, writer));
  TESSEL_RETURN_IF_ERROR(QuickCheck());
  TESSEL_RETURN_IF_ERROR(ApplyMigrations());
  {
    // One reader at once, so a file that cannot be read fails Open rather than the first read.
    TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> reader, OpenReader());
    absl::MutexLock lock(&readers_mu_);
    idle_readers_.push_back(std::move(reader));
    open_readers_ = 1;
  }
  writer_thread_ = std::thread([this] { WriterLoop(); });
  return absl::OkStatus();
}

void Store::Impl::Shutdown() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  if (writer_thread_.joinable()) writer_thread_.join();
}

absl::Status Store::Impl::Write(std::function<absl::Status(sqlite::Database&)> write) {
  WriteOp op(std::move(write), /*alone=*/false);
  return Enqueue(op);
}

absl::Status Store::Impl::WriteAlone(std::function<absl::Status(sqlite::Database&)> work) {
  WriteOp op(std::move(work), /*alone=*/true);
  return Enqueue(op);
}

absl::Status Store::Impl::Enqueue(WriteOp& op) {
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

absl::Status Store::Impl::ApplyMigrations() {
  sqlite::Database& db = *writer_db_;
  TESSEL_RETURN_IF_ERROR(
      db.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
              "name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"));
  std::set<int> known;
  for (const Migration& migration : Migrations()) known.insert(migration.version);
  for (const Migration& migration : Migrations()) {
    // BEGIN IMMEDIATE takes the write lock first, so two processes opening the same new file
    // cannot both apply a migration. A migration already recorded is rolled back (it wrote
    // nothing); so is one that failed.
    TESSEL_ASSIGN_OR_RETURN(sqlite::Transaction transaction,
                            sqlite::Transaction::Begin(db, /*immediate=*/true));
    TESSEL_ASSIGN_OR_RETURN(const bool applied, ApplyMigrationLocked(migration, known));
    if (applied) TESSEL_RETURN_IF_ERROR(transaction.Commit());
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Store::Impl::ApplyMigrationLocked(const Migration& migration,
                                                       const std::set<int>& known) {
  sqlite::Database& db = *writer_db_;
  bool recorded = false;
  {
    TESSEL_ASSIGN_OR_RETURN(sqlite::Statement versions,
                            db.Prepare("SELECT version FROM schema_migrations ORDER BY version"));
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, versions.Step());
      if (!row) break;
      const int version = static_cast<int>(versions.Int(0));
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
  TESSEL_ASSIGN_OR_RETURN(
      sqlite::Statement record,
      db.Prepare("INSERT INTO schema_migrations (version, name, applied_ms) VALUES (?, ?, ?)"));
  record.BindInt(migration.version).BindText(migration.name).BindInt(NowUnixMs());
  TESSEL_RETURN_IF_ERROR(record.Run());
  return true;
}

void Store::Impl::WriterLoop() {
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch));
  while (true) {
    std::vector<WriteOp*> batch;
    {
      absl::MutexLock lock(&queue_mu_, absl::Condition(this, &Impl::QueueReadyOrStopping));
      if (queue_.empty()) return;  // stopping, and everything queued has committed
      while (!queue_.empty() && batch.size() < max_batch &&
             (batch.empty() || !queue_.front()->alone)) {
        batch.push_back(queue_.front());
        queue_.pop_front();
        if (batch.back()->alone) break;
      }
    }
    if (batch.size() == 1 && batch.front()->alone) {
      WriteOp* op = batch.front();
      op->Finish(op->write(*writer_db_));
      continue;
    }
    RunBatch(std::move(batch));
  }
}

void Store::Impl::RunBatch(std::vector<WriteOp*> ops) {
  sqlite::Database& db = *writer_db_;
  while (!ops.empty()) {
    std::optional<sqlite::Transaction> transaction;
    if (absl::StatusOr<sqlite::Transaction> begin =
            sqlite::Transaction::Begin(db, /*immediate=*/true);
        begin.ok()) {
      transaction.emplace(*std::move(begin));
    } else {
      for (WriteOp* op : ops) op->Finish(begin.status());
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
      transaction.reset();  // rolls back what is left of it
      op->Finish(std::move(status));
      aborted_at = i;
      break;
    }
    if (aborted_at.has_value()) {
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(*aborted_at));
      continue;
    }
    const auto commit_start = std::chrono::steady_clock::now();
    absl::Status commit = transaction->Commit();  // rolled back on failure
    if (options_.on_commit && commit.ok()) {
      options_.on_commit(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - commit_start).count());
    }
    if (!commit.ok()) {
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

}  // namespace tessel::server

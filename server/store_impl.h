// Store::Impl: the store's two connections (schema/sqlite.h), the writer thread that batches
// queued writes into one transaction, and the migrations applied at open. Internal to the store:
// store.cc holds the records' SQL, store_impl.cc this machinery.
//
// Layout: the writer connection belongs to the writer thread, which takes every queued write (up
// to max_batch) and runs them in one BEGIN IMMEDIATE ... COMMIT, each write inside its own
// SAVEPOINT so one failing write is rolled back alone. A caller blocks on its WriteOp's
// notification, which fires only after the COMMIT returned. Reads take a reader connection
// (query_only) of their own from a small pool, so they run in parallel with each other and with
// the writer; every read statement is reset when done, so the next read starts a fresh WAL
// snapshot and sees every commit.
//
// Durability: the database runs in WAL mode. A COMMIT that returned is in the WAL file in the OS
// page cache, so it survives a crash of this process with either synchronous setting; with
// synchronous=FULL (the default) it is also fsync'ed and survives power loss.
#ifndef TESSEL_SERVER_STORE_IMPL_H_
#define TESSEL_SERVER_STORE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "schema/migrations.h"
#include "schema/sqlite.h"
#include "server/store.h"

namespace tessel::server {

class Store::Impl {
 public:
  Impl(std::string path, StoreOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { Shutdown(); }

  // Opens both connections (the writer in WAL mode), applies migrations and starts the writer
  // thread.
  absl::Status Open();
  // PRAGMA quick_check on the writer: DataLoss naming the file unless it says "ok".
  absl::Status QuickCheck();

  // Stops accepting writes, commits everything queued, joins the writer. Idempotent.
  void Shutdown();

  // Runs `write` on the writer thread inside the next batch transaction and returns its status
  // once that transaction committed (or failed). `write` runs inside a SAVEPOINT; on error its
  // changes are rolled back and the rest of the batch still commits. `write` may run more than
  // once if SQLite aborts the whole transaction; it must only touch the database and its outputs.
  absl::Status Write(std::function<absl::Status(sqlite::Database&)> write);
  // Runs `work` on the writer thread alone, outside any transaction (VACUUM cannot run inside
  // one), between two batches; returns its status.
  absl::Status WriteAlone(std::function<absl::Status(sqlite::Database&)> work);

  const std::string& path() const { return path_; }

  // Runs `read` on a reader connection that no other read uses meanwhile, so reads run in
  // parallel (up to options.max_readers at once).
  template <typename T>
  absl::StatusOr<T> Read(const std::function<absl::StatusOr<T>(sqlite::Database&)>& read) {
    absl::StatusOr<std::unique_ptr<sqlite::Database>> reader = AcquireReader();
    if (!reader.ok()) return reader.status();
    absl::StatusOr<T> result = read(**reader);
    ReleaseReader(*std::move(reader));
    return result;
  }

  int64_t transactions_committed() const { return transactions_committed_.load(); }
  int64_t writes_committed() const { return writes_committed_.load(); }

 private:
  struct WriteOp {
    WriteOp(std::function<absl::Status(sqlite::Database&)> write, bool alone)
        : write(std::move(write)), alone(alone) {}

    std::function<absl::Status(sqlite::Database&)> write;
    const bool alone;  // run outside the batch transaction, by itself
    absl::Status status;
    absl::Notification done;

    void Finish(absl::Status result) {
      status = std::move(result);
      done.Notify();  // `this` may be gone right after
    }
  };

  // The options every connection is opened with.
  sqlite::OpenOptions ConnectionOptions() const;
  absl::StatusOr<std::unique_ptr<sqlite::Database>> OpenReader() const;
  // An idle reader connection, or a new one while fewer than max_readers are open; waits otherwise.
  absl::StatusOr<std::unique_ptr<sqlite::Database>> AcquireReader();
  void ReleaseReader(std::unique_ptr<sqlite::Database> reader);
  absl::Status ApplyMigrations();
  // Applies `migration` unless recorded; returns whether it applied it.
  // REQUIRES: a write transaction is open on writer_db_.
  absl::StatusOr<bool> ApplyMigrationLocked(const Migration& migration, const std::set<int>& known);

  bool QueueReadyOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return stopping_ || !queue_.empty();
  }
  void WriterLoop();
  // Queues `op` and waits until the writer finished it.
  absl::Status Enqueue(WriteOp& op);
  // Commits `ops` in one transaction, each in its own savepoint, and finishes every op.
  void RunBatch(std::vector<WriteOp*> ops);

  const std::string path_;
  const StoreOptions options_;

  // Used only by Open, then only by the writer thread.
  std::unique_ptr<sqlite::Database> writer_db_;
  std::thread writer_thread_;

  absl::Mutex queue_mu_;
  std::deque<WriteOp*> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;

  absl::Mutex readers_mu_;
  std::vector<std::unique_ptr<sqlite::Database>> idle_readers_ ABSL_GUARDED_BY(readers_mu_);
  int open_readers_ ABSL_GUARDED_BY(readers_mu_) = 0;

  std::atomic<int64_t> transactions_committed_{0};
  std::atomic<int64_t> writes_committed_{0};
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_STORE_IMPL_H_

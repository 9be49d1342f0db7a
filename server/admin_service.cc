#include "server/admin_service.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "schema/tessel.grpc.pb.h"
#include "server/store_admin.h"
#include "server/wire.h"
#include "spdlog/spdlog.h"

namespace tessel::server {
namespace {

namespace v1 = tessel::v1;
namespace fs = std::filesystem;

constexpr size_t kChunkBytes = size_t{1} << 20;

// A name beside the database for a temporary file of this server's, unique within the process.
std::string TemporaryPath(const std::string& db_path, const char* what) {
  static std::atomic<int64_t> counter{0};
  return fmt::format("{}.{}-{}-{}.tmp", db_path, what, NowUnixMs(), counter.fetch_add(1));
}

void RemoveQuietly(const std::string& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
}

// Runs `work` on a thread of its own; it must end by finishing the call it serves.
void RunDetached(std::function<void()> work) { std::thread(std::move(work)).detach(); }

// Finishes a unary call with `status` from a thread of its own after `work` ran.
grpc::ServerUnaryReactor* AnswerFromThread(grpc::CallbackServerContext* context,
                                           std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunDetached([reactor, work = std::move(work)] { reactor->Finish(ToGrpcStatus(work())); });
  return reactor;
}

// Streams a fresh backup of the database, then removes it.
class BackupReactor final : public grpc::ServerWriteReactor<v1::BackupChunk> {
 public:
  explicit BackupReactor(const std::string& db_path)
      : db_path_(db_path), copy_path_(TemporaryPath(db_path, "backup")) {
    RunDetached([this] { Prepare(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    file_.close();
    RemoveQuietly(copy_path_);
    delete this;
  }

 private:
  void Prepare() {
    absl::StatusOr<DatabaseSummary> summary = BackupDatabase(db_path_, copy_path_);
    if (!summary.ok()) {
      spdlog::error("backup of {} failed: {}", db_path_, std::string(summary.status().message()));
      FinishOnce(ToGrpcStatus(summary.status()));
      return;
    }
    spdlog::info("backup of {}: {} trials, {} bytes, streaming to a client", db_path_,
                 summary->trials, summary->bytes);
    file_.open(copy_path_, std::ios::binary);
    chunk_.set_total_bytes(summary->bytes);
    chunk_.set_trials(summary->trials);
    chunk_.set_max_trial_id(summary->max_trial_id);
    first_ = true;
    WriteNext();
  }

  void WriteNext() {
    buffer_.resize(kChunkBytes);
    file_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    const auto n = static_cast<size_t>(file_.gcount());
    if (file_.bad()) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot read the backup copy"));
      return;
    }
    if (n == 0 && !first_) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (!first_) chunk_.Clear();
    first_ = false;
    chunk_.set_data(buffer_.data(), n);
    StartWrite(&chunk_);
  }

  void FinishOnce(const grpc::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  const std::string db_path_;
  const std::string copy_path_;
  std::ifstream file_;
  std::vector<char> buffer_;
  v1::BackupChunk chunk_;
  bool first_ = true;
  std::mutex mu_;
  bool finished_ = false;
};

// Receives a backup, checks it and stages it for the server's next start.
class RestoreReactor final : public grpc::ServerReadReactor<v1::RestoreChunk> {
 public:
  RestoreReactor(grpc::CallbackServerContext* context, const std::string& db_path,
                 v1::RestoreResponse* response)
      : context_(context),
        db_path_(db_path),
        upload_path_(TemporaryPath(db_path, "upload")),
        response_(response) {
    file_.open(upload_path_, std::ios::binary | std::ios::trunc);
    if (!file_) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server cannot write beside its database"));
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      file_.close();
      if (context_->IsCancelled()) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the upload was cancelled"));
        return;
      }
      RunDetached([this] { Stage(); });
      return;
    }
    bytes_ += static_cast<int64_t>(chunk_.data().size());
    if (bytes_ > kMaxRestoreBytes) {
      Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          fmt::format("RestoreChunk.data: the backup exceeds {} GiB", kMaxRestoreBytes >> 30)));
      return;
    }
    file_.write(chunk_.data().data(), static_cast<std::streamsize>(chunk_.data().size()));
    if (!file_) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server cannot store the upload (disk full?)"));
      return;
    }
    StartRead(&chunk_);
  }

  void OnDone() override {
    RemoveQuietly(upload_path_);
    delete this;
  }

 private:
  void Stage() {
    absl::StatusOr<DatabaseSummary> summary = InspectBackup(upload_path_);
    if (!summary.ok()) {
      // What the client sent is not a restorable database.
      Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          fmt::format("RestoreChunk.data: {}", std::string(summary.status().message()))));
      return;
    }
    const std::string staged = StagedRestorePath(db_path_);
    std::error_code error;
    fs::rename(upload_path_, staged, error);
    if (error) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          fmt::format("cannot stage the restore: {}", error.message())));
      return;
    }
    spdlog::warn("restore staged at {} ({} trials): it replaces {} at the next start", staged,
                 summary->trials, db_path_);
    response_->set_staged_path(staged);
    response_->set_trials(summary->trials);
    response_->set_bytes(summary->bytes);
    Finish(grpc::Status::OK);
  }

  grpc::CallbackServerContext* const context_;
  const std::string db_path_;
  const std::string upload_path_;
  v1::RestoreResponse* const response_;
  std::ofstream file_;
  v1::RestoreChunk chunk_;
  int64_t bytes_ = 0;
};

class RefusedBackup final : public grpc::ServerWriteReactor<v1::BackupChunk> {
 public:
  explicit RefusedBackup(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

class RefusedRestore final : public grpc::ServerReadReactor<v1::RestoreChunk> {
 public:
  explicit RefusedRestore(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

absl::Status CheckVacuumRequest(const v1::VacuumRequest& request) {
  if (request.keep_trials_days() < 0 || request.keep_trials_days() > kMaxKeepTrialsDays) {
    return absl::InvalidArgumentError(
        fmt::format("keep_trials_days: must be 0 (keep all) to {}", kMaxKeepTrialsDays));
  }
  if (request.keep_top() < 0 || request.keep_top() > kMaxKeepTop) {
    return absl::InvalidArgumentError(
        fmt::format("keep_top: must be 0 (the default) to {}", kMaxKeepTop));
  }
  return absl::OkStatus();
}

class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(Store* store, const Authorizer* auth) : store_(store), auth_(auth) {}

  grpc::ServerWriteReactor<v1::BackupChunk>* Backup(grpc::CallbackServerContext* context,
                                                    const v1::BackupRequest*) override {
    if (absl::Status allowed = auth_->Check("Backup", *context); !allowed.ok()) {
      return new RefusedBackup(allowed);
    }
    return new BackupReactor(store_->path());
  }

  grpc::ServerUnaryReactor* CheckDatabase(grpc::CallbackServerContext* context,
                                          const v1::CheckDatabaseRequest*,
                                          v1::CheckDatabaseResponse* response) override {
    if (absl::Status allowed = auth_->Check("CheckDatabase", *context); !allowed.ok()) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
    return AnswerFromThread(context, [this, response]() -> absl::Status {
      absl::StatusOr<std::vector<std::string>> problems = CheckIntegrity(store_->path());
      if (!problems.ok()) return problems.status();
      for (std::string& problem : *problems) response->add_problems(std::move(problem));
      return absl::OkStatus();
    });
  }

  grpc::ServerUnaryReactor* Vacuum(grpc::CallbackServerContext* context,
                                   const v1::VacuumRequest* request,
                                   v1::VacuumResponse* response) override {
    absl::Status allowed = auth_->Check("Vacuum", *context);
    if (allowed.ok()) allowed = CheckVacuumRequest(*request);
    if (!allowed.ok()) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
    RetentionPolicy policy{.keep_trials_days = request->keep_trials_days()};
    if (request->keep_top() > 0) policy.keep_top = request->keep_top();
    return AnswerFromThread(context, [this, policy, response]() -> absl::Status {
      response->set_bytes_before(DatabaseBytes(store_->path()));
      absl::StatusOr<int64_t> deleted = store_->DeleteOldTrials(policy, NowUnixMs());
      if (!deleted.ok()) return deleted.status();
      response->set_trials_deleted(*deleted);
      if (absl::Status vacuumed = store_->Vacuum(); !vacuumed.ok()) return vacuumed;
      response->set_bytes_after(DatabaseBytes(store_->path()));
      spdlog::info("vacuum: {} old trial(s) deleted, {} -> {} bytes", *deleted,
                   response->bytes_before(), response->bytes_after());
      return absl::OkStatus();
    });
  }

  grpc::ServerReadReactor<v1::RestoreChunk>* Restore(grpc::CallbackServerContext* context,
                                                     v1::RestoreResponse* response) override {
    if (absl::Status allowed = auth_->Check("Restore", *context); !allowed.ok()) {
      return new RefusedRestore(allowed);
    }
    return new RestoreReactor(context, store_->path(), response);
  }

 private:
  Store* const store_;
  const Authorizer* const auth_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAdminService(Store* store, const Authorizer* auth) {
  return std::make_unique<AdminServiceImpl>(store, auth);
}

}  // namespace tessel::server

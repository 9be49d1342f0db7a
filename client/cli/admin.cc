// `tessel admin check|backup|restore|vacuum`: maintenance of a tessel database, on a file (--db)
// or through a running server (--server, the tuner role). The work is server/store_admin.h's in
// both cases; through a server it runs there (AdminService).
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/common.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "server/store.h"
#include "server/store_admin.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

std::string Bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

class AdminCommand final : public Command {
 public:
  AdminCommand()
      : Command("admin",
                "database maintenance: check (integrity), backup (online, consistent), restore, "
                "vacuum (retention of old trials, then VACUUM); on --db or through --server",
                "tessel admin backup --out tessel-backup.db --server localhost:7878\n"
                "  tessel admin check --db tessel.db\n"
                "  tessel admin vacuum --keep-trials-days 90 --db tessel.db\n"
                "  tessel admin restore --from tessel-backup.db --db tessel.db") {}

  absl::Status Run(int& exit_code) override {
    const bool remote = !args_.server.empty();
    if (action_ == "backup" && out_.empty()) {
      return absl::InvalidArgumentError("admin backup needs --out FILE");
    }
    if (action_ == "restore" && from_.empty()) {
      return absl::InvalidArgumentError("admin restore needs --from FILE (a backup)");
    }
    std::unique_ptr<Backend> backend;
    if (remote) {
      TESSEL_ASSIGN_OR_RETURN(backend, OpenBackend(args_, /*must_exist=*/true));
    }
    client::Client* client = remote ? backend->client.get() : nullptr;
    if (action_ == "check") return Check(client, exit_code);
    if (action_ == "backup") return Backup(client);
    if (action_ == "restore") return Restore(client);
    return Vacuum(client);
  }

 private:
  void AddOptions(CLI::App& command) override {
    command
        .add_option("action", action_,
                    "check: integrity_check and foreign_key_check; backup: a consistent copy "
                    "taken while jobs run (--out); restore: replace the database by a backup "
                    "(--from; through --server it is staged for the server's next start); "
                    "vacuum: retention (--keep-trials-days), then VACUUM")
        ->required()
        ->check(CLI::IsMember({"check", "backup", "restore", "vacuum"}));
    AddServerOptions(command, args_);
    command.add_option("--out", out_, "backup: the file to write (replaced when complete)");
    command.add_option("--from", from_, "restore: the backup file to restore");
    command
        .add_option("--keep-trials-days", keep_days_,
                    "vacuum: first delete trials older than this many days, of finished jobs; "
                    "every published best and each workload's --keep-top fastest trials stay "
                    "(0: delete none)")
        ->capture_default_str()
        ->check(CLI::Range(0, server::kMaxKeepTrialsDays));
    command
        .add_option("--keep-top", keep_top_,
                    "vacuum: retention keeps this many fastest OK trials per workload")
        ->capture_default_str()
        ->check(CLI::Range(1, server::kMaxKeepTop));
  }

  std::string Where() const { return args_.server.empty() ? args_.DbPath() : args_.server; }

  absl::Status Check(client::Client* client, int& exit_code) {
    std::vector<std::string> problems;
    if (client != nullptr) {
      TESSEL_ASSIGN_OR_RETURN(v1::CheckDatabaseResponse response, client->CheckDatabase());
      problems.assign(response.problems().begin(), response.problems().end());
    } else {
      TESSEL_ASSIGN_OR_RETURN(problems, server::CheckIntegrity(args_.DbPath()));
    }
    exit_code = problems.empty() ? 0 : 1;
    if (json_) {
      PrintJson({{"db", Where()}, {"ok", problems.empty()}, {"problems", problems}});
      return absl::OkStatus();
    }
    if (problems.empty()) {
      std::cout << fmt::format("{}: ok (integrity_check and foreign_key_check)\n", Where());
      return absl::OkStatus();
    }
    std::cout << fmt::format("{}: {} problem(s); restore it from a backup:\n", Where(),
                             problems.size());
    for (const std::string& problem : problems) std::cout << "  " << problem << "\n";
    return absl::OkStatus();
  }

  absl::Status Backup(client::Client* client) {
    server::DatabaseSummary summary;
    if (client != nullptr) {
      TESSEL_ASSIGN_OR_RETURN(v1::BackupChunk chunk, client->Backup(out_));
      summary = {.bytes = chunk.total_bytes(),
                 .trials = chunk.trials(),
                 .max_trial_id = chunk.max_trial_id()};
    } else {
      TESSEL_ASSIGN_OR_RETURN(summary, server::BackupDatabase(args_.DbPath(), out_));
    }
    if (json_) {
      PrintJson({{"db", Where()},
                 {"out", out_},
                 {"bytes", summary.bytes},
                 {"trials", summary.trials},
                 {"max_trial_id", summary.max_trial_id}});
    } else {
      std::cout << fmt::format(
          "backup of {} written to {}: {} trials (newest id {}), {}; it passed "
          "integrity_check\nrestore it with: tessel admin restore --from {} --db FILE\n",
          Where(), out_, summary.trials, summary.max_trial_id, Bytes(summary.bytes), out_, out_);
    }
    return absl::OkStatus();
  }

  absl::Status Restore(client::Client* client) {
    if (client != nullptr) {
      TESSEL_ASSIGN_OR_RETURN(v1::RestoreResponse response, client->Restore(from_));
      if (json_) {
        PrintJson({{"server", args_.server},
                   {"from", from_},
                   {"staged", true},
                   {"staged_path", response.staged_path()},
                   {"trials", response.trials()}});
      } else {
        std::cout << fmt::format(
            "{} ({} trials) checked and staged on {} at {}: it replaces the server's database "
            "when the server next starts (restart it to apply; the replaced database is kept "
            "beside it)\n",
            from_, response.trials(), args_.server, response.staged_path());
      }
      return absl::OkStatus();
    }
    TESSEL_ASSIGN_OR_RETURN(server::DatabaseSummary summary, server::InspectBackup(from_));
    TESSEL_ASSIGN_OR_RETURN(std::string kept, server::RestoreDatabase(from_, args_.DbPath()));
    if (json_) {
      PrintJson(
          {{"db", args_.DbPath()}, {"from", from_}, {"trials", summary.trials}, {"kept", kept}});
    } else {
      std::cout << fmt::format("{} restored from {} ({} trials){}\n", args_.DbPath(), from_,
                               summary.trials,
                               kept.empty() ? "" : fmt::format("; the replaced one is {}", kept));
    }
    return absl::OkStatus();
  }

  absl::Status Vacuum(client::Client* client) {
    v1::VacuumResponse response;
    if (client != nullptr) {
      v1::VacuumRequest request;
      request.set_keep_trials_days(keep_days_);
      request.set_keep_top(keep_top_);
      TESSEL_ASSIGN_OR_RETURN(response, client->Vacuum(request));
    } else {
      const std::string db = args_.DbPath();
      if (!std::filesystem::exists(db)) {
        return absl::NotFoundError(fmt::format("no database at {} (--db)", db));
      }
      TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<server::Store> store, server::Store::Open(db));
      response.set_bytes_before(server::DatabaseBytes(db));
      TESSEL_ASSIGN_OR_RETURN(
          int64_t deleted,
          store->DeleteOldTrials({.keep_trials_days = keep_days_, .keep_top = keep_top_},
                                 server::NowUnixMs()));
      response.set_trials_deleted(deleted);
      TESSEL_RETURN_IF_ERROR(store->Vacuum());
      response.set_bytes_after(server::DatabaseBytes(db));
    }
    if (json_) {
      PrintJson({{"db", Where()},
                 {"trials_deleted", response.trials_deleted()},
                 {"bytes_before", response.bytes_before()},
                 {"bytes_after", response.bytes_after()}});
    } else {
      std::cout << fmt::format("{}: {} old trial(s) deleted; {} -> {}\n", Where(),
                               response.trials_deleted(), Bytes(response.bytes_before()),
                               Bytes(response.bytes_after()));
    }
    return absl::OkStatus();
  }

  std::string action_;
  ServerArgs args_;
  std::string out_;
  std::string from_;
  int keep_days_ = 0;
  int keep_top_ = server::RetentionPolicy{}.keep_top;
};

}  // namespace

std::unique_ptr<Command> NewAdminCommand() { return std::make_unique<AdminCommand>(); }

}  // namespace tessel::cli

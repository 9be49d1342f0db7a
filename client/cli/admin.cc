// `tessel admin check --db PATH`: the full integrity check of a database file (the server runs
// only SQLite's quick_check when it opens one).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/common.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "server/store.h"

namespace tessel::cli {
namespace {

class AdminCommand final : public Command {
 public:
  AdminCommand()
      : Command("admin", "maintenance of a database file: `admin check` verifies it in full",
                "tessel admin check --db tessel.db") {}

  // Exit 0 when the file is sound; 1 with the problems (one per line, or a JSON list) when not.
  absl::Status Run(int& exit_code) override {
    TESSEL_ASSIGN_OR_RETURN(std::vector<std::string> problems, server::CheckIntegrity(db_));
    exit_code = problems.empty() ? 0 : 1;
    if (json_) {
      PrintJson({{"db", db_}, {"ok", problems.empty()}, {"problems", problems}});
      return absl::OkStatus();
    }
    if (problems.empty()) {
      std::cout << fmt::format("{}: ok (integrity_check and foreign_key_check)\n", db_);
      return absl::OkStatus();
    }
    std::cout << fmt::format("{}: {} problem(s); restore it from a backup:\n", db_,
                             problems.size());
    for (const std::string& problem : problems) std::cout << "  " << problem << "\n";
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("action", action_, "check: integrity_check and foreign_key_check")
        ->required()
        ->check(CLI::IsMember({"check"}));
    command.add_option("--db", db_, "the database file (safe to check while a server runs)")
        ->capture_default_str();
  }

  std::string action_;
  std::string db_ = kDefaultDb;
};

}  // namespace

std::unique_ptr<Command> NewAdminCommand() { return std::make_unique<AdminCommand>(); }

}  // namespace tessel::cli

// `tessel trials JOB`: a job's trials, or its top-k fastest, with status, time, bound and config.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

json TrialRow(const v1::TrialResult& t) {
  return {{"trial_id", t.trial_id()},
          {"status", client::TrialStatusName(t.status())},
          {"time_ns", t.time_ns() > 0 ? json(t.time_ns()) : json(nullptr)},
          {"bound", t.bound().empty() ? json(nullptr) : json(t.bound())},
          {"verified", t.verified()},
          {"worker_id", t.worker_id()},
          {"arm", t.arm()},
          {"config", t.config()},
          {"message", t.message()}};
}

// Worker ids and messages came from workers: shown escaped (schema/strings.h Shown).
std::vector<std::string> TrialCells(const json& row) {
  const json& time = row["time_ns"];
  const std::string message = row["message"].get<std::string>();
  return {std::to_string(row["trial_id"].get<int64_t>()),
          row["status"].get<std::string>(),
          time.is_null() ? "-" : HumanTime(time.get<double>()),
          row["bound"].is_null() ? "-" : row["bound"].get<std::string>(),
          Shown(row["worker_id"].get<std::string>(), 64),
          row["config"].get<std::string>() +
              (message.empty() ? "" : "  (" + Shown(message, 160) + ")")};
}

class TrialsCommand final : public Command {
 public:
  TrialsCommand()
      : Command("trials", "a job's trials: all by id, or the --top K fastest",
                "tessel trials 12 --top 5 --server localhost:7070") {}

  // Prints the trials as a table, or {"trials": [...]} with --json. InvalidArgument for an unknown
  // --status; NotFound for an unknown job.
  absl::Status Run(int&) override {
    std::optional<TrialStatus> wanted;
    if (!status_.empty()) {
      std::string upper = status_;
      for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
      wanted = ParseTrialStatus(upper);
      if (!wanted) {
        return absl::InvalidArgumentError(StrCat("--status '", Shown(status_, 64),
                                                 "' is not a trial status (", StatusNames(), ")"));
      }
    }
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(std::vector<v1::TrialResult> trials, backend->client->ListTrials(job_));
    if (top_ > 0) wanted = TrialStatus::kOk;
    if (wanted) {
      const v1::TrialStatus proto = ToProto(*wanted);
      std::erase_if(trials, [&](const v1::TrialResult& t) { return t.status() != proto; });
    }
    if (top_ > 0) {
      std::stable_sort(trials.begin(), trials.end(),
                       [](const auto& a, const auto& b) { return a.time_ns() < b.time_ns(); });
      if (trials.size() > size_t(top_)) trials.resize(size_t(top_));
    }
    json rows = json::array();
    for (const v1::TrialResult& t : trials) rows.push_back(TrialRow(t));
    PrintList(rows, json_,
              {.key = "trials",
               .columns =
                   {{"TRIAL", true}, {"STATUS"}, {"TIME", true}, {"BOUND"}, {"WORKER"}, {"CONFIG"}},
               .cells = TrialCells,
               .line = nullptr,
               .when_empty = StrCat("(no trials", wanted ? " with that status" : "", ")\n"),
               .footer = ""});
    return absl::OkStatus();
  }

 private:
  static std::string StatusNames() {
    std::vector<std::string> names;
    for (TrialStatus s : {TrialStatus::kOk, TrialStatus::kInvalidConfig, TrialStatus::kWrongAnswer,
                          TrialStatus::kRuntimeError, TrialStatus::kTimeout,
                          TrialStatus::kWorkerLost, TrialStatus::kCancelled}) {
      names.emplace_back(TrialStatusName(s));
    }
    return StrJoin(names, ", ");
  }

  void AddOptions(CLI::App& command) override {
    command.add_option("job", job_, "job id")->required()->check(PositiveInteger());
    command.add_option("--top", top_, "only the K fastest OK trials, fastest first")
        ->check(PositiveInteger());
    command.add_option("--status", status_,
                       StrCat("only trials with this status (any case): ", StatusNames()));
    AddServerOptions(command, backend_);
  }

  ServerArgs backend_;
  int64_t job_ = 0;
  int top_ = 0;  // 0 = every trial, by id
  std::string status_;
};

}  // namespace

std::unique_ptr<Command> NewTrialsCommand() { return std::make_unique<TrialsCommand>(); }

}  // namespace tessel::cli

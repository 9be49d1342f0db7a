// `tessel jobs`: list tuning jobs, newest first.
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

json NullIfEmpty(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

json JobRow(const v1::Job& job) {
  const bool has_best = job.has_best() && job.best().time_ns() > 0;
  return {{"id", job.id()},
          {"kernel", job.workload().kernel()},
          {"shape", ShapeOf(job.workload())},
          {"dtype", job.workload().dtype()},
          {"target", job.workload().target()},
          {"strategy", job.strategy()},
          {"state", client::JobStateName(job.state())},
          {"trials", job.trials().total()},
          {"budget", job.budget()},
          {"effort", NullIfEmpty(job.effort())},
          {"stopped_by", NullIfEmpty(job.stopped_by())},
          {"best_time_ns", has_best ? json(job.best().time_ns()) : json(nullptr)},
          {"best_config", has_best ? json(job.best().config()) : json(nullptr)},
          {"created_unix_ms", job.created_unix_ms()},
          {"stale", job.stale()},
          {"model", NullIfEmpty(job.model())}};
}

std::vector<std::string> JobCells(const json& row) {
  const json& best = row["best_time_ns"];
  return {std::to_string(row["id"].get<int64_t>()),
          row["kernel"].get<std::string>(),
          row["shape"].get<std::string>(),
          row["dtype"].get<std::string>(),
          row["target"].get<std::string>(),
          row["state"].get<std::string>(),
          fmt::format("{}/{}", row["trials"].get<int64_t>(), row["budget"].get<int64_t>()),
          best.is_null() ? "-" : HumanTime(best.get<double>()),
          row["model"].is_null() ? "-" : Shown(row["model"].get<std::string>(), 48)};
}

class JobsCommand final : public Command {
 public:
  JobsCommand() : Command("jobs", "list tuning jobs, newest first", "tessel jobs --limit 20") {}

  // Prints the jobs as a table, or {"jobs": [...]} with --json.
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const std::vector<v1::Job> jobs, backend->client->ListJobs(limit_));
    json rows = json::array();
    for (const v1::Job& job : jobs) rows.push_back(JobRow(job));
    PrintList(rows, json_,
              {.key = "jobs",
               .columns = {{"ID", true},
                           {"KERNEL"},
                           {"SHAPE"},
                           {"DTYPE"},
                           {"TARGET"},
                           {"STATE"},
                           {"TRIALS", true},
                           {"BEST", true},
                           {"MODEL"}},
               .cells = JobCells,
               .line = nullptr,
               .when_empty = "(no jobs)\n",
               .footer = ""});
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("--limit", limit_, "at most this many (default: server's)");
    AddServerOptions(command, backend_);
  }

  ServerArgs backend_;
  int limit_ = 0;  // 0 = the server's default
};

}  // namespace

std::unique_ptr<Command> NewJobsCommand() { return std::make_unique<JobsCommand>(); }

}  // namespace tessel::cli

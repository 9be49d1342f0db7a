#include "client/cli/jobs.h"

#include <iostream>
#include <memory>
#include <vector>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"

namespace tessel::cli {

namespace v1 = tessel::v1;
using nlohmann::json;

CLI::App* AddJobsCommand(CLI::App& app, ListArgs& args) {
  CLI::App* cmd = app.add_subcommand("jobs", "list tuning jobs, newest first");
  cmd->add_option("--limit", args.limit, "at most this many (default: server's)");
  cmd->add_flag("--json", args.json, "print one JSON object");
  AddServerOptions(cmd, args.backend);
  return cmd;
}

absl::Status RunJobs(const ListArgs& args) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.backend.server, args.backend.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::vector<v1::Job>> jobs = (*backend)->client->ListJobs(args.limit);
  if (!jobs.ok()) return jobs.status();
  if (args.json) {
    json list = json::array();
    for (const v1::Job& job : *jobs) {
      const bool has_best = job.has_best() && job.best().time_ns() > 0;
      list.push_back(
          {{"id", job.id()},
           {"kernel", job.workload().kernel()},
           {"shape", ShapeOf(job.workload())},
           {"dtype", job.workload().dtype()},
           {"target", job.workload().target()},
           {"strategy", job.strategy()},
           {"state", client::JobStateName(job.state())},
           {"trials", job.trials().total()},
           {"budget", job.budget()},
           {"effort", job.effort().empty() ? json(nullptr) : json(job.effort())},
           {"stopped_by", job.stopped_by().empty() ? json(nullptr) : json(job.stopped_by())},
           {"best_time_ns", has_best ? json(job.best().time_ns()) : json(nullptr)},
           {"best_config", has_best ? json(job.best().config()) : json(nullptr)},
           {"created_unix_ms", job.created_unix_ms()},
           {"stale", job.stale()}});
    }
    PrintJson({{"jobs", list}});
    return absl::OkStatus();
  }
  std::cout << fmt::format("{:>5}  {:<10} {:<26} {:<6} {:<8} {:<10} {:>13}  {}\n", "ID", "KERNEL",
                           "SHAPE", "DTYPE", "TARGET", "STATE", "TRIALS", "BEST");
  for (const v1::Job& job : *jobs) {
    std::cout << fmt::format(
        "{:>5}  {:<10} {:<26} {:<6} {:<8} {:<10} {:>13}  {}\n", job.id(), job.workload().kernel(),
        ShapeOf(job.workload()), job.workload().dtype(), job.workload().target(),
        client::JobStateName(job.state()), fmt::format("{}/{}", job.trials().total(), job.budget()),
        job.has_best() && job.best().time_ns() > 0 ? HumanTime(job.best().time_ns()) : "-");
  }
  if (jobs->empty()) std::cout << "(no jobs)\n";
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace tessel::cli

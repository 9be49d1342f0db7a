#include "client/cli/tune.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "client/cli/job_report.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/strings.h"
#include "search/strategy.h"

namespace tessel::cli {

namespace v1 = tessel::v1;
using nlohmann::json;

CLI::App* AddTuneCommand(CLI::App& app, TuneArgs& args) {
  CLI::App* cmd = app.add_subcommand("tune", "tune a kernel (embedded server unless --server)");
  cmd->add_option("kernel", args.kernel, "kernel name (see `tessel kernels`)")->required();
  cmd->add_option("--shape", args.shape, "named dims, e.g. M=4096,N=4096,K=4096")->required();
  cmd->add_option("--dtype", args.dtype, "element type")->capture_default_str();
  cmd->add_option("--target", args.target, "target (see `tessel targets`)")->capture_default_str();
  cmd->add_option("--strategy", args.strategy, "search strategy (default: the server's)");
  cmd->add_option("--effort", args.effort,
                  StrCat("search effort: ", search::EffortPresetNames(),
                         " (a budget and early stops; see below)"))
      ->capture_default_str();
  cmd->add_option("--budget", args.budget, "trials charged to the budget (default: the effort's)")
      ->each([&args](const std::string&) { args.budget_set = true; });
  cmd->add_option("--seed", args.seed, "search seed")->capture_default_str();
  cmd->add_option("--workers", args.workers, "embedded worker threads (default: hardware threads)");
  cmd->add_flag("-q,--quiet", args.quiet, "no progress on stderr");
  cmd->add_flag("--json", args.json, "print one JSON object");
  cmd->add_option("--time-limit", args.time_limit,
                  "wall-clock limit: 90, 30s, 2m or 1h; the job then verifies and publishes "
                  "the best found so far (0 = no limit)");
  cmd->add_option("--patience", args.patience,
                  "stop after this many trials in a row without a faster result (default: the "
                  "effort's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--target-ns", args.target_ns,
                  "stop once a config is at least this fast (0 = never)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--cold-start", args.cold_start,
                "do not warm-start from earlier jobs of this kernel and dtype");
  cmd->add_flag("--no-wait", args.no_wait,
                "submit, print the job and return (needs --server; see `tessel watch`)");
  AddServerOptions(cmd, args.server, args.db);
  std::string efforts = "Effort presets (--budget and --patience override theirs):";
  for (const search::EffortPreset& preset : search::kEffortPresets) {
    efforts +=
        fmt::format("\n  {:<8} {} trials{}: {}", preset.name, preset.budget,
                    preset.no_improvement > 0
                        ? fmt::format(", stop after {} without a faster one", preset.no_improvement)
                        : "",
                    preset.summary);
  }
  cmd->footer(efforts);
  return cmd;
}

absl::Status RunTune(const TuneArgs& args, int& exit_code) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  if (args.no_wait && args.server.empty()) {
    return absl::InvalidArgumentError(
        "--no-wait needs --server: an embedded job stops when this command exits");
  }
  std::string strategy = args.strategy == "auto" ? "" : args.strategy;
  if (!strategy.empty()) {
    std::vector<std::string> names = search::StrategyNames();
    if (std::find(names.begin(), names.end(), strategy) == names.end()) {
      return absl::InvalidArgumentError(StrCat("unknown strategy '", strategy,
                                               "' (known strategies: ", StrJoin(names, ", "),
                                               ", auto)"));
    }
  }
  if (search::FindEffortPreset(args.effort) == nullptr) {
    return absl::InvalidArgumentError(StrCat("unknown --effort '", args.effort,
                                             "' (presets: ", search::EffortPresetNames(), ")"));
  }
  if (args.budget_set && args.budget <= 0) {
    return absl::InvalidArgumentError(StrCat("--budget must be positive, got ", args.budget));
  }
  absl::StatusOr<int> time_limit_s = ParseTimeLimitSeconds(args.time_limit, "--time-limit");
  if (!time_limit_s.ok()) return time_limit_s.status();
  int workers = args.workers > 0
                    ? args.workers
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  v1::SubmitJobRequest request;
  *request.mutable_workload() = workload->ToProto();
  request.set_strategy(strategy);
  request.set_effort(args.effort);
  request.set_budget(args.budget_set ? args.budget : 0);  // 0: the effort's
  request.set_seed(args.seed);
  request.set_cold_start(args.cold_start);
  request.set_time_limit_s(*time_limit_s);
  request.set_stop_after_no_improvement(args.patience);
  request.set_target_time_ns(args.target_ns);

  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.server, args.db, /*must_exist=*/false);
  if (!backend.ok()) return backend.status();

  // Embedded mode: worker threads in-process, over the server's in-process channel.
  EmbeddedWorkers embedded;
  if (absl::Status started = embedded.Start(**backend, workers); !started.ok()) return started;
  if ((*backend)->server && !args.quiet) {
    std::fprintf(stderr, "tuning %s %s on %s with %d embedded worker threads (db %s)\n",
                 args.kernel.c_str(), workload->shape.c_str(), args.target.c_str(), workers,
                 args.db.c_str());
  }
  if (args.no_wait) {
    absl::StatusOr<v1::Job> submitted = (*backend)->client->SubmitJob(request);
    if (!submitted.ok()) return submitted.status();
    if (args.json) {
      json out = JobJson(*submitted);
      out["shape"] = workload->shape;
      out["server"] = args.server;
      PrintJson(out);
    } else {
      std::cout << fmt::format("submitted job {}; follow it with: tessel watch {} --server {}\n",
                               submitted->id(), submitted->id(), args.server);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<v1::Job> job = SubmitAndWatch(*(*backend)->client, request, !args.quiet);
  embedded.Stop();
  if (!job.ok()) return job.status();

  if (args.json) {
    json out = JobJson(*job);
    out["shape"] = workload->shape;
    if ((*backend)->server) {
      out["db"] = args.db;
    } else {
      out["server"] = args.server;
    }
    PrintJson(out);
  } else {
    PrintTuneSummary(*job);
  }
  if (job->state() != v1::JOB_COMPLETED) {
    exit_code = kExitFailure;
    std::fprintf(stderr, "tessel: error: job %lld ended %s%s%s\n",
                 static_cast<long long>(job->id()), client::JobStateName(job->state()).c_str(),
                 job->message().empty() ? "" : ": ", job->message().c_str());
  }
  return absl::OkStatus();
}

}  // namespace tessel::cli

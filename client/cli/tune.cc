// `tessel tune KERNEL --shape DIMS`: submit a tuning job and follow it to its end (embedded server
// and worker threads unless --server).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/job_report.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/cli_checks.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "search/stopping.h"
#include "search/strategy.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

// The --help footer: what each effort preset costs.
std::string EffortFooter() {
  std::string efforts = "Effort presets (--budget and --patience override theirs):";
  for (const search::EffortPreset& preset : search::kEffortPresets) {
    efforts +=
        fmt::format("\n  {:<8} {} trials{}: {}", preset.name, preset.budget,
                    preset.no_improvement > 0
                        ? fmt::format(", stop after {} without a faster one", preset.no_improvement)
                        : "",
                    preset.summary);
  }
  return efforts;
}

class TuneCommand final : public Command {
 public:
  TuneCommand()
      : Command("tune", "tune a kernel (embedded server unless --server)",
                "tessel tune matmul --shape M=4096,N=4096,K=4096 --budget 200 --strategy auto") {}

  // Validates everything before any work, submits, follows the job and prints it (one JSON
  // object with --json). Sets `exit_code` to 1 when the job does not complete.
  absl::Status Run(int& exit_code) override;

 private:
  void AddOptions(CLI::App& command) override;
  // The request for the validated options; InvalidArgument naming the bad flag.
  absl::StatusOr<v1::SubmitJobRequest> Request(const Workload& workload) const;
  // The completed job whose result is stored for the request's workload, exact and not stale;
  // nullopt when there is none.
  absl::StatusOr<std::optional<v1::Job>> StoredResult(Backend& backend,
                                                      const v1::SubmitJobRequest& request) const;
  // Prints the finished job (one JSON object with --json).
  void PrintResult(const v1::Job& job, const Workload& workload, const Backend& backend) const;
  // Prints the job as submitted (--no-wait).
  void PrintSubmitted(const v1::Job& job, const Workload& workload) const;

  WorkloadArgs workload_;
  ServerArgs backend_;
  std::string strategy_;
  std::string effort_ = std::string(search::kDefaultEffort);  // a row of search::kEffortPresets
  int budget_ = 0;                                            // 0 = the effort's
  bool budget_set_ = false;  // --budget was given (then it must be positive)
  uint64_t seed_ = 1;
  int workers_ = 0;
  bool quiet_ = false;
  bool no_wait_ = false;          // submit, print the job, return (needs --server)
  bool cold_start_ = false;       // no warm start from earlier jobs of the kernel
  std::string time_limit_ = "0";  // early stops (0 = none); --time-limit as given
  int patience_ = 0;              // 0 = the effort's
  double target_ns_ = 0;
  bool new_job_ = false;  // start a job even when one runs for this workload
  bool retune_ = false;   // tune even when a fresh result is stored
  int priority_ = 0;
  int lockstep_ = 0;  // v1::SubmitJobRequest.lockstep (0 = pipelined)
};

void TuneCommand::AddOptions(CLI::App& command) {
  AddWorkloadOptions(command, workload_);
  command.add_option("--strategy", strategy_,
                     StrCat("search strategy: ", StrJoin(search::StrategyNames(), ", "),
                            " (default: the server's, auto)"));
  command
      .add_option("--effort", effort_,
                  StrCat("search effort: ", search::EffortPresetNames(),
                         " (a budget and early stops; see below)"))
      ->capture_default_str();
  command.add_option("--budget", budget_, "trials charged to the budget (default: the effort's)")
      ->each([this](const std::string&) { budget_set_ = true; });
  command.add_option("--seed", seed_, "search seed")->capture_default_str();
  command.add_option("--workers", workers_, "embedded worker threads (default: hardware threads)");
  command.add_flag("-q,--quiet", quiet_, "no progress on stderr");
  command.add_option("--time-limit", time_limit_,
                     "wall-clock limit: 90, 30s, 2m or 1h; the job then verifies and publishes "
                     "the best found so far (0 = no limit)");
  command
      .add_option("--patience", patience_,
                  "stop after this many trials in a row without a faster result (default: the "
                  "effort's)")
      ->check(tessel::NonNegativeNumber());
  command
      .add_option("--target-ns", target_ns_, "stop once a config is at least this fast (0 = never)")
      ->check(tessel::NonNegativeNumber());
  command.add_flag("--cold-start", cold_start_,
                   "do not warm-start from earlier jobs of this kernel and dtype");
  command
      .add_option("--priority", priority_,
                  "leases go to higher priorities first and are shared fairly among jobs of "
                  "one priority (-1000 .. 1000)")
      ->capture_default_str()
      ->check(CLI::Range(-1000, 1000));
  command
      .add_option("--lockstep", lockstep_,
                  "propose in batches of this many (1 .. 64), each after the last is measured, "
                  "and learn from them in proposal order: the same seed then gives the same "
                  "result with any workers (0 = pipelined, faster with many workers)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  command.add_flag("--new-job", new_job_,
                   "start a new job even when one is already tuning this workload (by default "
                   "this command follows that job)");
  command.add_flag("--retune", retune_,
                   "tune even when this workload already has a stored result that is not stale "
                   "(by default that result is printed and nothing runs)");
  command.add_flag("--no-wait", no_wait_,
                   "submit, print the job and return (needs --server; see `tessel watch`)");
  AddServerOptions(command, backend_);
  command
      .add_option("--noise", backend_.noise,
                  "embedded: simulated run-to-run noise (relative sigma; a server has --noise)")
      ->check(tessel::NonNegativeNumber());
  command
      .add_option("--promote-top", backend_.promote_top,
                  "embedded, with noise: this many top candidates race on re-measures and the "
                  "lowest trimmed mean is published (default 12; 0 = off)")
      ->check(tessel::NonNegativeNumber());
  command.footer(EffortFooter());
}

absl::StatusOr<v1::SubmitJobRequest> TuneCommand::Request(const Workload& workload) const {
  if (!backend_.server.empty() && (backend_.noise > 0 || backend_.promote_top >= 0)) {
    return absl::InvalidArgumentError(
        "--noise and --promote-top set the embedded server; a remote server has its own "
        "(tessel-server --noise, --promote-top)");
  }
  if (no_wait_ && backend_.server.empty()) {
    return absl::InvalidArgumentError(
        "--no-wait needs --server: an embedded job stops when this command exits");
  }
  const std::string strategy = strategy_ == "auto" ? "" : strategy_;
  if (!strategy.empty()) TESSEL_RETURN_IF_ERROR(search::CheckStrategyName(strategy));
  if (search::FindEffortPreset(effort_) == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("unknown --effort '", effort_, "' (presets: ", search::EffortPresetNames(), ")"));
  }
  if (budget_set_ && budget_ <= 0) {
    return absl::InvalidArgumentError(StrCat("--budget must be positive, got ", budget_));
  }
  TESSEL_ASSIGN_OR_RETURN(const int time_limit_s,
                          ParseTimeLimitSeconds(time_limit_, "--time-limit"));
  v1::SubmitJobRequest request;
  *request.mutable_workload() = workload.ToProto();
  request.set_strategy(strategy);
  request.set_effort(effort_);
  request.set_budget(budget_set_ ? budget_ : 0);  // 0: the effort's
  request.set_seed(seed_);
  request.set_cold_start(cold_start_);
  request.set_time_limit_s(time_limit_s);
  request.set_stop_after_no_improvement(patience_);
  request.set_target_time_ns(target_ns_);
  request.set_new_job(new_job_);
  request.set_priority(priority_);
  request.set_lockstep(lockstep_);
  return request;
}

absl::StatusOr<std::optional<v1::Job>> TuneCommand::StoredResult(
    Backend& backend, const v1::SubmitJobRequest& request) const {
  TESSEL_ASSIGN_OR_RETURN(const v1::LookupResponse found,
                          backend.client->Lookup(request.workload()));
  if (found.match() != "exact" || found.stale() || found.job_id() <= 0) return std::nullopt;
  TESSEL_ASSIGN_OR_RETURN(v1::Job job, backend.client->GetJob(found.job_id()));
  if (job.state() != v1::JOB_COMPLETED) return std::nullopt;
  return job;
}

void TuneCommand::PrintResult(const v1::Job& job, const Workload& workload,
                              const Backend& backend) const {
  const json bottleneck = job.has_best() && job.best().time_ns() > 0
                              ? BottleneckJson(workload, job.best().config())
                              : json(nullptr);
  if (json_) {
    json out = JobJson(job);
    out["shape"] = workload.shape;
    out["bottleneck"] = bottleneck;
    if (backend.server) {
      out["db"] = backend_.DbPath();
    } else {
      out["server"] = backend_.server;
    }
    PrintJson(out);
  } else {
    PrintTuneSummary(job);
    if (!bottleneck.is_null()) {
      std::cout << "  bottleneck: " << bottleneck["summary"].get<std::string>() << std::endl;
    }
  }
}

void TuneCommand::PrintSubmitted(const v1::Job& job, const Workload& workload) const {
  if (json_) {
    json out = JobJson(job);
    out["shape"] = workload.shape;
    out["server"] = backend_.server;
    PrintJson(out);
  } else {
    std::cout << fmt::format("submitted job {}; follow it with: tessel watch {} --server {}\n",
                             job.id(), job.id(), backend_.server);
  }
}

absl::Status TuneCommand::Run(int& exit_code) {
  TESSEL_ASSIGN_OR_RETURN(const Workload workload, ValidateWorkload(workload_));
  TESSEL_ASSIGN_OR_RETURN(const v1::SubmitJobRequest request, Request(workload));
  // With --json, stdout holds the one JSON object and stderr stays empty unless it fails.
  const bool progress = !quiet_ && !json_;
  const int workers =
      workers_ > 0 ? workers_ : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/false));
  if (!retune_ && !new_job_) {
    TESSEL_ASSIGN_OR_RETURN(std::optional<v1::Job> stored, StoredResult(*backend, request));
    if (stored) {
      if (progress) {
        std::fprintf(stderr,
                     "%s %s is already tuned (job %lld, not stale): its stored result; --retune "
                     "tunes it again\n",
                     workload_.kernel.c_str(), workload.shape.c_str(),
                     static_cast<long long>(stored->id()));
      }
      PrintResult(*stored, workload, *backend);
      return absl::OkStatus();
    }
  }

  // Embedded mode: worker threads in-process, over the server's in-process channel.
  EmbeddedWorkers embedded;
  TESSEL_RETURN_IF_ERROR(embedded.Start(*backend, workers));
  if (backend->server && progress) {
    std::fprintf(stderr, "tuning %s %s on %s with %d embedded worker threads (db %s)\n",
                 workload_.kernel.c_str(), workload.shape.c_str(), workload_.target.c_str(),
                 workers, backend_.DbPath().c_str());
  }
  if (no_wait_) {
    TESSEL_ASSIGN_OR_RETURN(const v1::Job submitted, backend->client->SubmitJob(request));
    PrintSubmitted(submitted, workload);
    return absl::OkStatus();
  }
  absl::StatusOr<v1::Job> job =
      SubmitAndWatch(*backend->client, request, progress, 0, /*stop_when_paused=*/true);
  embedded.Stop();
  if (!job.ok()) return job.status();
  PrintResult(*job, workload, *backend);
  if (job->state() != v1::JOB_COMPLETED) {
    exit_code = kExitFailure;
    std::fprintf(stderr, "tessel: error: job %lld ended %s%s%s\n",
                 static_cast<long long>(job->id()), client::JobStateName(job->state()).c_str(),
                 job->message().empty() ? "" : ": ", Shown(job->message(), 512).c_str());
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Command> NewTuneCommand() { return std::make_unique<TuneCommand>(); }

}  // namespace tessel::cli

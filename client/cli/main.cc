// tessel: the command-line interface. See DESIGN.md "CLI contract": every command takes --json and
// then prints exactly one JSON object on stdout; errors are one "tessel: error: ..." line on stderr
// and a non-zero exit (1 for failures, 2 for bad usage). Progress goes to stderr.
//
// With --server the CLI is a client; without it, tune/lookup/jobs/workers open an embedded server
// on --db (no network port) and, for tune, run worker threads in-process.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/common.h"
#include "client/cli/export.h"
#include "client/cli/replay.h"
#include "client/cli/retune.h"
#include "client/cli/space.h"
#include "client/client.h"
#include "fmt/format.h"
#include "kernels/kernel.h"
#include "nlohmann/json.hpp"
#include "schema/key.h"
#include "schema/strings.h"
#include "search/stopping.h"
#include "search/strategy.h"
#include "server/server.h"
#include "sim/api.h"
#include "sim/simulate.h"
#include "sim/target.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "worker/agent.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

// ---- tune ----

struct TuneArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  std::string strategy;
  std::string effort = std::string(search::kDefaultEffort);  // a row of search::kEffortPresets
  int budget = 0;                                            // 0 = the effort's
  bool budget_set = false;  // --budget was given (then it must be positive)
  uint64_t seed = 1;
  std::string server;
  std::string db = kDefaultDb;
  int workers = 0;
  bool quiet = false;
  bool json = false;
  bool no_wait = false;          // submit, print the job, return (needs --server)
  bool cold_start = false;       // no warm start from earlier jobs of the kernel
  std::string time_limit = "0";  // early stops (0 = none); --time-limit as given
  int patience = 0;              // 0 = the effort's
  double target_ns = 0;
  int64_t watch_job = 0;  // `tessel watch`: follow this existing job instead of submitting
};

json MeasurementJson(const v1::Measurement& m, bool present) {
  if (!present) return nullptr;
  return {{"config", m.config()}, {"time_ns", m.time_ns()}, {"trial_id", m.trial_id()}};
}

json JobJson(const v1::Job& job) {
  const bool has_best = job.has_best() && job.best().time_ns() > 0;
  const bool has_default = job.has_default_config() && job.default_config().time_ns() > 0;
  json out = {
      {"job_id", job.id()},
      {"kernel", job.workload().kernel()},
      {"shape", ShapeOf(job.workload())},
      {"dtype", job.workload().dtype()},
      {"target", job.workload().target()},
      {"strategy", job.strategy()},
      {"budget", job.budget()},
      {"seed", job.seed()},
      {"state", client::JobStateName(job.state())},
      {"best", MeasurementJson(job.best(), has_best)},
      {"default", MeasurementJson(job.default_config(), has_default)},
      {"roofline_ns", job.roofline_ns()},
      {"trials",
       {{"total", job.trials().total()},
        {"ok", job.trials().ok()},
        {"invalid", job.trials().invalid()},
        {"failed", job.trials().failed()},
        {"pending", job.trials().pending()},
        {"retried", job.trials().retried()}}},
      {"stale", job.stale()},
      {"effort", job.effort().empty() ? json(nullptr) : json(job.effort())},
      {"time_limit_s", job.time_limit_s() > 0 ? json(job.time_limit_s()) : json(nullptr)},
      {"stop_after_no_improvement",
       job.stop_after_no_improvement() > 0 ? json(job.stop_after_no_improvement()) : json(nullptr)},
      {"stopped_by", job.stopped_by().empty() ? json(nullptr) : json(job.stopped_by())},
  };
  if (job.has_default_config() && !has_default) {
    out["default"] = {{"config", job.default_config().config()}, {"time_ns", nullptr}};
  }
  out["speedup_vs_default"] = has_best && has_default
                                  ? json(job.default_config().time_ns() / job.best().time_ns())
                                  : json(nullptr);
  out["roofline_fraction"] = has_best && job.roofline_ns() > 0
                                 ? json(job.roofline_ns() / job.best().time_ns())
                                 : json(nullptr);
  if (!job.message().empty()) out["message"] = job.message();
  return out;
}

void PrintTuneSummary(const v1::Job& job) {
  json j = JobJson(job);
  std::cout << fmt::format(
      "job {} {}: {} {} {} on {} ({} strategy, {} trials: {} ok, {} invalid, "
      "{} failed)\n",
      job.id(), client::JobStateName(job.state()), job.workload().kernel(), ShapeOf(job.workload()),
      job.workload().dtype(), job.workload().target(), job.strategy(), job.trials().total(),
      job.trials().ok(), job.trials().invalid(), job.trials().failed());
  if (!job.message().empty()) std::cout << "  message:  " << job.message() << "\n";
  if (!job.stopped_by().empty()) {
    std::cout << fmt::format(
        "  stopped by: {}{}{}\n", job.stopped_by(),
        job.effort().empty() ? "" : fmt::format(" (effort {})", job.effort()),
        job.time_limit_s() > 0 ? fmt::format(", time limit {} s", job.time_limit_s()) : "");
  }
  if (!j["best"].is_null()) {
    std::cout << fmt::format("  best:     {}  {}\n", HumanTime(job.best().time_ns()),
                             job.best().config());
  } else {
    std::cout << "  best:     none (no trial succeeded)\n";
  }
  if (!j["default"].is_null() && !j["default"]["time_ns"].is_null()) {
    std::cout << fmt::format("  default:  {}  {}\n", HumanTime(job.default_config().time_ns()),
                             job.default_config().config());
  }
  if (!j["speedup_vs_default"].is_null()) {
    std::cout << fmt::format("  speedup vs default: {:.2f}x\n",
                             j["speedup_vs_default"].get<double>());
  }
  if (!j["roofline_fraction"].is_null()) {
    std::cout << fmt::format("  roofline: {} bound; best reaches {:.1f}% of it\n",
                             HumanTime(job.roofline_ns()),
                             100 * j["roofline_fraction"].get<double>());
  }
  std::cout.flush();
}

// Prints a progress line on stderr when the counts change (at most a few per second).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool enabled) : enabled_(enabled) {}
  void Update(const v1::Job& job) {
    if (!enabled_) return;
    const v1::TrialCounts& t = job.trials();
    std::string line = fmt::format("job {} {}: {}/{} trials ({} ok, {} invalid, {} failed){}",
                                   job.id(), client::JobStateName(job.state()), t.total(),
                                   job.budget(), t.ok(), t.invalid(), t.failed(),
                                   job.has_best() && job.best().time_ns() > 0
                                       ? fmt::format(", best {}", HumanTime(job.best().time_ns()))
                                       : "");
    auto now = std::chrono::steady_clock::now();
    if (line == last_line_) return;
    if (!client::IsFinalState(job.state()) && now - last_print_ < std::chrono::milliseconds(250)) {
      return;
    }
    last_line_ = line;
    last_print_ = now;
    std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  bool enabled_;
  std::string last_line_;
  std::chrono::steady_clock::time_point last_print_{};
};

// Submits and watches the job on `client` to a final state.
// With `existing_job` > 0 nothing is submitted: that job is watched instead.
absl::StatusOr<v1::Job> SubmitAndWatch(client::Client& client, const v1::SubmitJobRequest& request,
                                       bool progress, int64_t existing_job = 0) {
  absl::StatusOr<v1::Job> job =
      existing_job > 0 ? client.GetJob(existing_job) : client.SubmitJob(request);
  if (!job.ok()) return job.status();
  if (client::IsFinalState(job->state())) return job;
  ProgressPrinter printer(progress);
  printer.Update(*job);
  absl::StatusOr<v1::Job> last = client.WatchJob(job->id(), [&](const v1::JobEvent& event) {
    printer.Update(event.job());
    return true;
  });
  if (!last.ok()) return last.status();
  if (!client::IsFinalState(last->state())) {
    // The stream ended early (e.g. the server is shutting down): ask once more.
    absl::StatusOr<v1::Job> now = client.GetJob(job->id());
    if (!now.ok()) return now.status();
    if (!client::IsFinalState(now->state())) {
      return absl::UnavailableError(StrCat("lost track of job ", job->id(), " while it was ",
                                           client::JobStateName(now->state())));
    }
    return now;
  }
  return last;
}

absl::Status RunTune(const TuneArgs& args, int& exit_code);

// `tessel watch JOB`: follows an existing job to its end and prints it as `tune` would. With --db
// it runs embedded workers, so a job left unfinished by an earlier embedded run resumes.
absl::Status RunWatch(const TuneArgs& args, int& exit_code) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.server, args.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  EmbeddedWorkers embedded;
  if (absl::Status started = embedded.Start(**backend, args.workers); !started.ok()) {
    return started;
  }
  absl::StatusOr<v1::Job> job =
      SubmitAndWatch(*(*backend)->client, v1::SubmitJobRequest(), !args.quiet, args.watch_job);
  embedded.Stop();
  if (!job.ok()) return job.status();
  if (args.json) {
    json out = JobJson(*job);
    PrintJson(out);
  } else {
    PrintTuneSummary(*job);
  }
  if (job->state() != v1::JOB_COMPLETED) exit_code = kExitFailure;
  return absl::OkStatus();
}

absl::Status RunTune(const TuneArgs& args, int& exit_code) {
  if (args.watch_job > 0) return RunWatch(args, exit_code);
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

// ---- lookup ----

struct LookupArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  std::string server;
  std::string db = kDefaultDb;
  std::string snapshot;
  bool json = false;
};

absl::Status RunLookup(const LookupArgs& args) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  if (!args.snapshot.empty()) {
    // libtessel's snapshot reader: no server and no database needed.
    auto snapshot = client::Snapshot::Open(args.snapshot);
    if (!snapshot.ok()) return snapshot.status();
    auto found = (*snapshot)->Find(args.kernel, workload->problem.dims, args.dtype, args.target);
    if (!found.ok()) return found.status();
    PrintLookupResult(*found, args.kernel, workload->shape, args.dtype, args.target, args.json);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.server, args.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<v1::LookupResponse> found = (*backend)->client->Lookup(workload->ToProto());
  if (!found.ok()) return found.status();
  if (args.json) {
    PrintJson({{"kernel", args.kernel},
               {"shape", workload->shape},
               {"dtype", args.dtype},
               {"target", args.target},
               {"config", found->config()},
               {"match", found->match()},
               {"time_ns", found->time_ns()},
               {"stale", found->stale()},
               {"snapshot", found->snapshot_id()},
               {"job_id", found->job_id()},
               {"tuned_dims", found->tuned_dims()},
               {"tuned_target", found->tuned_target()}});
    return absl::OkStatus();
  }
  std::cout << fmt::format("{} {} {} on {}: {}\n", args.kernel, workload->shape, args.dtype,
                           args.target, found->config());
  std::cout << fmt::format("  match: {}{}", found->match(), found->stale() ? " (stale)" : "");
  if (found->time_ns() > 0) std::cout << fmt::format(", {}", HumanTime(found->time_ns()));
  if (found->job_id() > 0) {
    std::cout << fmt::format(", from job {} ({} on {}), snapshot {}", found->job_id(),
                             found->tuned_dims(), found->tuned_target(), found->snapshot_id());
  }
  std::cout << std::endl;
  return absl::OkStatus();
}

// ---- jobs / workers ----

struct ListArgs {
  std::string server;
  std::string db = kDefaultDb;
  int limit = 0;
  bool json = false;
};

absl::Status RunJobs(const ListArgs& args) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.server, args.db, /*must_exist=*/true);
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

absl::Status RunWorkers(const ListArgs& args) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.server, args.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::vector<v1::WorkerInfo>> workers = (*backend)->client->ListWorkers();
  if (!workers.ok()) return workers.status();
  if (args.json) {
    json list = json::array();
    for (const v1::WorkerInfo& w : *workers) {
      list.push_back({{"id", w.worker_id()},
                      {"name", w.name()},
                      {"targets", std::vector<std::string>(w.targets().begin(), w.targets().end())},
                      {"slots", w.slots()},
                      {"state", w.state()},
                      {"leased_trials", w.leased_trials()},
                      {"trials_done", w.trials_done()},
                      {"last_heartbeat_unix_ms", w.last_heartbeat_unix_ms()}});
    }
    PrintJson({{"workers", list}});
    return absl::OkStatus();
  }
  std::cout << fmt::format("{:<14} {:<24} {:<6} {:>5} {:>7} {:>8}  {}\n", "ID", "NAME", "STATE",
                           "SLOTS", "LEASED", "DONE", "TARGETS");
  for (const v1::WorkerInfo& w : *workers) {
    std::cout << fmt::format("{:<14} {:<24} {:<6} {:>5} {:>7} {:>8}  {}\n", w.worker_id(), w.name(),
                             w.state(), w.slots(), w.leased_trials(), w.trials_done(),
                             w.targets().empty() ? "all" : StrJoin(w.targets(), ","));
  }
  if (workers->empty()) std::cout << "(no workers)\n";
  std::cout.flush();
  return absl::OkStatus();
}

// ---- kernels / targets (local registry; no server needed) ----

absl::Status RunKernels(bool as_json) {
  absl::StatusOr<sim::Target> target = sim::LoadTarget(kDefaultTarget);
  json list = json::array();
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    // Params of the kernel's example problem on the default target.
    const kernels::Problem problem = kernel->Example();
    json params = json::array();
    if (target.ok()) {
      if (absl::StatusOr<kernels::Space> space = kernel->SpaceFor(problem, *target); space.ok()) {
        for (const kernels::Param& p : space->params()) {
          params.push_back({{"name", p.name}, {"values", p.values}, {"help", p.help}});
        }
      }
    }
    list.push_back({{"name", std::string(kernel->name())},
                    {"version", kernel->version()},
                    {"description", std::string(kernel->description())},
                    {"dims", kernel->dims()},
                    {"dtypes", kernel->dtypes()},
                    {"params", params}});
  }
  if (as_json) {
    PrintJson({{"kernels", list}});
    return absl::OkStatus();
  }
  for (const json& k : list) {
    std::cout << fmt::format("{} (v{}): {}\n  dims: {}  dtypes: {}\n", k["name"].get<std::string>(),
                             k["version"].get<int>(), k["description"].get<std::string>(),
                             StrJoin(k["dims"].get<std::vector<std::string>>(), ","),
                             StrJoin(k["dtypes"].get<std::vector<std::string>>(), ","));
    for (const json& p : k["params"]) {
      std::cout << fmt::format("  {:<12} {}\n", p["name"].get<std::string>(),
                               StrJoin(p["values"].get<std::vector<std::string>>(), " "));
    }
  }
  std::cout.flush();
  return absl::OkStatus();
}

absl::Status RunTargets(bool as_json) {
  json list = json::array();
  for (const std::string& name : sim::TargetNames()) {
    absl::StatusOr<sim::Target> target = sim::LoadTarget(name);
    if (!target.ok()) return target.status();
    list.push_back({{"name", target->name},
                    {"version", target->version},
                    {"description", target->description}});
  }
  if (as_json) {
    PrintJson({{"targets", list}});
    return absl::OkStatus();
  }
  for (const json& t : list) {
    std::cout << fmt::format("{:<22} v{}  {}\n", t["name"].get<std::string>(),
                             t["version"].get<int>(), t["description"].get<std::string>());
  }
  std::cout << "(systolic-RxC-{ws,os,is} names any systolic array size)" << std::endl;
  return absl::OkStatus();
}

// ---- simulate (local: lower + simulate one config) ----

struct SimulateArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  std::string config;
  std::string trace;
  double noise = 0;
  uint64_t seed = 0;
  bool exact = false;
  bool json = false;
};

absl::Status RunSimulate(const SimulateArgs& args) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  if (args.noise < 0) return absl::InvalidArgumentError("--noise must be >= 0");
  const sim::SimOptions options{.noise_sigma = args.noise, .seed = args.seed, .exact = args.exact};
  absl::StatusOr<sim::Target> target = LoadTargetOrExplain(args.target);
  if (!target.ok()) return target.status();
  Config config;
  if (args.config.empty()) {
    config = workload->kernel->Default(workload->problem, *target);
  } else {
    absl::StatusOr<Config> parsed = Config::Parse(args.config);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          StrCat("bad --config '", args.config, "': ", std::string(parsed.status().message())));
    }
    config = *parsed;
  }
  json out = {{"kernel", args.kernel},       {"shape", workload->shape},
              {"dtype", args.dtype},         {"target", args.target},
              {"config", config.ToString()}, {"default", args.config.empty()}};
  absl::StatusOr<sim::SimResult> result =
      kernels::Evaluate(*workload->kernel, workload->problem, config, *target, options);
  if (result.ok() && !args.trace.empty()) {
    absl::StatusOr<sim::Program> program =
        workload->kernel->Lower(workload->problem, config, *target);
    absl::Status written =
        program.ok() ? sim::WriteTrace(*target, *program, options, args.trace) : program.status();
    if (!written.ok()) {
      return absl::UnavailableError(
          StrCat("cannot write trace ", args.trace, ": ", std::string(written.message())));
    }
  }
  if (!result.ok()) {
    if (!absl::IsInvalidArgument(result.status())) {
      return absl::InternalError(
          StrCat("simulation failed: ", std::string(result.status().message())));
    }
    out["valid"] = false;
    out["reason"] = std::string(result.status().message());
    if (args.json) {
      PrintJson(out);
    } else {
      std::cout << fmt::format("{} {} on {}: config {} is invalid: {}\n", args.kernel,
                               workload->shape, args.target, config.ToString(),
                               out["reason"].get<std::string>());
    }
    return absl::OkStatus();
  }
  out["valid"] = true;
  out["time_ns"] = result->time_ns;
  out["ticks"] = result->ticks;
  out["tensor_cycles"] = result->tensor_cycles;
  out["roofline_ns"] = result->roofline_ns;
  out["roofline_fraction"] =
      result->time_ns > 0 ? json(result->roofline_ns / result->time_ns) : json(nullptr);
  out["bound"] = result->bound;
  json engines = json::object();
  for (int i = 0; i < sim::kNumEngines; ++i) {
    const sim::EngineStats& e = result->engines[i];
    engines[std::string(sim::EngineName(static_cast<sim::EngineKind>(i)))] = {
        {"busy_frac", e.busy_frac}, {"busy_ticks", e.busy_ticks}, {"instructions", e.instructions}};
  }
  out["engines"] = engines;
  out["hbm_bytes"] = result->hbm_bytes;
  out["sbuf_peak_bytes"] = result->sbuf_peak_bytes;
  out["psum_peak_bytes"] = result->psum_peak_bytes;
  if (args.json) {
    PrintJson(out);
    return absl::OkStatus();
  }
  std::cout << fmt::format("{} {} {} on {}\n  config:   {}{}\n  time:     {} ({} bound)\n",
                           args.kernel, workload->shape, args.dtype, args.target, config.ToString(),
                           args.config.empty() ? " (default)" : "", HumanTime(result->time_ns),
                           result->bound);
  std::cout << fmt::format("  roofline: {} ({:.1f}% reached)\n", HumanTime(result->roofline_ns),
                           result->time_ns > 0 ? 100 * result->roofline_ns / result->time_ns : 0);
  std::cout << "  engines: ";
  for (auto& [name, e] : engines.items()) {
    std::cout << fmt::format(" {} {:.0f}%", name, 100 * e["busy_frac"].get<double>());
  }
  std::cout << fmt::format(
      "\n  hbm: {} bytes  sbuf peak: {} B/partition  psum peak: {} "
      "B/partition\n",
      result->hbm_bytes, result->sbuf_peak_bytes, result->psum_peak_bytes);
  std::cout.flush();
  return absl::OkStatus();
}

// ---- main ----

void AddServerOptions(CLI::App* command, std::string& server, std::string& db) {
  auto* server_opt = command->add_option("--server", server, "tessel server address HOST:PORT");
  auto* db_opt = command->add_option("--db", db, "SQLite database of the embedded server")
                     ->capture_default_str();
  server_opt->excludes(db_opt);
}

int Main(int argc, char** argv) {
  // Library logs (embedded server and workers) go to stderr, warnings and up only: spdlog's
  // default logger writes to stdout, where a warning would break the one JSON object of --json.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessel"));
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{"tessel: autotuning of ML kernel schedules on a simulated accelerator"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");

  TuneArgs tune;
  CLI::App* tune_cmd =
      app.add_subcommand("tune", "tune a kernel (embedded server unless --server)");
  tune_cmd->add_option("kernel", tune.kernel, "kernel name (see `tessel kernels`)")->required();
  tune_cmd->add_option("--shape", tune.shape, "named dims, e.g. M=4096,N=4096,K=4096")->required();
  tune_cmd->add_option("--dtype", tune.dtype, "element type")->capture_default_str();
  tune_cmd->add_option("--target", tune.target, "target (see `tessel targets`)")
      ->capture_default_str();
  tune_cmd->add_option("--strategy", tune.strategy, "search strategy (default: the server's)");
  tune_cmd
      ->add_option("--effort", tune.effort,
                   StrCat("search effort: ", search::EffortPresetNames(),
                          " (a budget and early stops; see below)"))
      ->capture_default_str();
  CLI::Option* budget_opt = tune_cmd->add_option(
      "--budget", tune.budget, "trials charged to the budget (default: the effort's)");
  tune_cmd->add_option("--seed", tune.seed, "search seed")->capture_default_str();
  tune_cmd->add_option("--workers", tune.workers,
                       "embedded worker threads (default: hardware threads)");
  tune_cmd->add_flag("-q,--quiet", tune.quiet, "no progress on stderr");
  tune_cmd->add_flag("--json", tune.json, "print one JSON object");
  tune_cmd->add_option("--time-limit", tune.time_limit,
                       "wall-clock limit: 90, 30s, 2m or 1h; the job then verifies and publishes "
                       "the best found so far (0 = no limit)");
  tune_cmd
      ->add_option("--patience", tune.patience,
                   "stop after this many trials in a row without a faster result (default: the "
                   "effort's)")
      ->check(CLI::NonNegativeNumber);
  tune_cmd
      ->add_option("--target-ns", tune.target_ns,
                   "stop once a config is at least this fast (0 = never)")
      ->check(CLI::NonNegativeNumber);
  tune_cmd->add_flag("--cold-start", tune.cold_start,
                     "do not warm-start from earlier jobs of this kernel and dtype");
  tune_cmd->add_flag("--no-wait", tune.no_wait,
                     "submit, print the job and return (needs --server; see `tessel watch`)");
  AddServerOptions(tune_cmd, tune.server, tune.db);
  std::string efforts = "Effort presets (--budget and --patience override theirs):";
  for (const search::EffortPreset& preset : search::kEffortPresets) {
    efforts +=
        fmt::format("\n  {:<8} {} trials{}: {}", preset.name, preset.budget,
                    preset.no_improvement > 0
                        ? fmt::format(", stop after {} without a faster one", preset.no_improvement)
                        : "",
                    preset.summary);
  }
  tune_cmd->footer(efforts);

  TuneArgs watch;
  CLI::App* watch_cmd =
      app.add_subcommand("watch", "follow a job to its end and print it as `tune` does");
  watch_cmd->add_option("job", watch.watch_job, "job id")->required()->check(CLI::PositiveNumber);
  watch_cmd->add_option("--workers", watch.workers,
                        "embedded worker threads with --db (default: hardware threads)");
  watch_cmd->add_flag("-q,--quiet", watch.quiet, "no progress on stderr");
  watch_cmd->add_flag("--json", watch.json, "print one JSON object");
  AddServerOptions(watch_cmd, watch.server, watch.db);

  LookupArgs lookup;
  CLI::App* lookup_cmd = app.add_subcommand("lookup", "the best known config for a workload");
  lookup_cmd->add_option("kernel", lookup.kernel, "kernel name")->required();
  lookup_cmd->add_option("--shape", lookup.shape, "named dims")->required();
  lookup_cmd->add_option("--dtype", lookup.dtype, "element type")->capture_default_str();
  lookup_cmd->add_option("--target", lookup.target, "target")->capture_default_str();
  lookup_cmd->add_option("--snapshot", lookup.snapshot, "exported snapshot file");
  lookup_cmd->add_flag("--json", lookup.json, "print one JSON object");
  AddServerOptions(lookup_cmd, lookup.server, lookup.db);

  ListArgs jobs;
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "list tuning jobs, newest first");
  jobs_cmd->add_option("--limit", jobs.limit, "at most this many (default: server's)");
  jobs_cmd->add_flag("--json", jobs.json, "print one JSON object");
  AddServerOptions(jobs_cmd, jobs.server, jobs.db);

  ListArgs workers;
  CLI::App* workers_cmd = app.add_subcommand("workers", "list registered workers");
  workers_cmd->add_flag("--json", workers.json, "print one JSON object");
  AddServerOptions(workers_cmd, workers.server, workers.db);

  bool kernels_json = false;
  CLI::App* kernels_cmd = app.add_subcommand("kernels", "list kernels, their dims and params");
  kernels_cmd->add_flag("--json", kernels_json, "print one JSON object");

  bool targets_json = false;
  CLI::App* targets_cmd = app.add_subcommand("targets", "list built-in targets");
  targets_cmd->add_flag("--json", targets_json, "print one JSON object");

  ExportArgs export_args;
  CLI::App* export_cmd = AddExportCommand(app, export_args);
  ImportArgs import_args;
  CLI::App* import_cmd = AddImportCommand(app, import_args);
  RetuneArgs retune_args;
  CLI::App* retune_cmd = AddRetuneCommand(app, retune_args);

  SimulateArgs simulate;
  CLI::App* simulate_cmd =
      app.add_subcommand("simulate", "lower and simulate one config locally (no server)");
  simulate_cmd->add_option("kernel", simulate.kernel, "kernel name")->required();
  simulate_cmd->add_option("--shape", simulate.shape, "named dims")->required();
  simulate_cmd->add_option("--dtype", simulate.dtype, "element type")->capture_default_str();
  simulate_cmd->add_option("--target", simulate.target, "target")->capture_default_str();
  simulate_cmd->add_option("--config", simulate.config,
                           "config, e.g. tile_m=128,tile_n=512 (default: the kernel's default)");
  simulate_cmd->add_option("--trace", simulate.trace,
                           "write a Chrome trace-event JSON file (Perfetto / chrome://tracing)");
  simulate_cmd->add_option("--noise", simulate.noise, "relative run-to-run noise sigma (0 = off)");
  simulate_cmd->add_option("--seed", simulate.seed, "seed of the noise");
  simulate_cmd->add_flag("--exact", simulate.exact, "simulate every iteration (no fast path)");
  simulate_cmd->add_flag("--json", simulate.json, "print one JSON object");

  ReplayArgs replay;
  CLI::App* replay_cmd = AddReplayCommand(app, replay);
  SpaceArgs space;
  CLI::App* space_cmd = AddSpaceCommand(app, space);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::vector<std::string> names;
      for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
      std::fprintf(stderr, "tessel: error: unknown command '%s' (commands: %s)\n", argv[1],
                   StrJoin(names, ", ").c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "tessel: error: %s\nrun 'tessel --help' for usage\n", e.what());
    return kExitUsage;
  }

  tune.budget_set = budget_opt->count() > 0;
  int exit_code = 0;
  absl::Status status;
  if (*tune_cmd) {
    status = RunTune(tune, exit_code);
  } else if (*watch_cmd) {
    status = RunWatch(watch, exit_code);
  } else if (*lookup_cmd) {
    status = RunLookup(lookup);
  } else if (*jobs_cmd) {
    status = RunJobs(jobs);
  } else if (*workers_cmd) {
    status = RunWorkers(workers);
  } else if (*kernels_cmd) {
    status = RunKernels(kernels_json);
  } else if (*targets_cmd) {
    status = RunTargets(targets_json);
  } else if (*export_cmd) {
    status = RunExport(export_args);
  } else if (*import_cmd) {
    status = RunImport(import_args);
  } else if (*retune_cmd) {
    status = RunRetune(retune_args, exit_code);
  } else if (*simulate_cmd) {
    status = RunSimulate(simulate);
  } else if (*replay_cmd) {
    status = RunReplay(replay);
  } else if (*space_cmd) {
    status = RunSpace(space);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tessel: error: %s\n", std::string(status.message()).c_str());
    return kExitFailure;
  }
  return exit_code;
}

}  // namespace
}  // namespace tessel::cli

int main(int argc, char** argv) {
  try {
    return tessel::cli::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "tessel: error: unexpected failure\n");
    return 1;
  }
}

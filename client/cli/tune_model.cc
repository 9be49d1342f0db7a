// `tessel tune-model FILE --target T[,T2] --budget N`: tune every kernel of a model description
// (docs/models.md) under one budget shared by a task scheduler (search/task_scheduler.h), then
// report the model's time per op, before and after, on each target.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/job_report.h"
#include "client/cli/model_file.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "search/strategy.h"
#include "search/task_scheduler.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kRoundLockstep = 4;  // v1::SubmitJobRequest.lockstep of every round

// The label of one tune-model run's jobs: "<model> on <targets> at <local time>", printable ASCII
// (other bytes become '?'), at most 128 bytes (the server's limit).
std::string ModelJobLabel(const std::string& model, const std::string& targets) {
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::string name = model.substr(0, 80);
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return StrCat(name, " on ", targets.substr(0, 16), " at ", when);
}

// The search seed of task `task`'s round `round` (splitmix64 of the three).
uint64_t RoundSeed(uint64_t seed, size_t task, int64_t round) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (1 + (uint64_t(task) << 32) + uint64_t(round));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A task's state during the tune.
struct TaskResult {
  double default_ns = 0;
  double best_ns = kInf;
  std::string best_config;
  int64_t rounds = 0;
  int64_t trials = 0;  // charged
  std::vector<int64_t> jobs;

  // The task's time with its tuned config: the best found, else the default's.
  double tuned_ns() const { return std::isfinite(best_ns) ? best_ns : default_ns; }
};

// One target's outcome.
struct TargetResult {
  std::string target;
  std::vector<ModelTask> tasks;
  std::vector<TaskResult> results;
  int64_t trials = 0;
  double seconds = 0;

  // The model's time (the tasks' times times their counts) with the defaults and tuned.
  double DefaultNs() const {
    return Sum([](const TaskResult& r) { return r.default_ns; });
  }
  double TunedNs() const {
    return Sum([](const TaskResult& r) { return r.tuned_ns(); });
  }

 private:
  template <typename Time>
  double Sum(Time time) const {
    double total = 0;
    for (size_t k = 0; k < tasks.size(); ++k) total += double(tasks[k].count) * time(results[k]);
    return total;
  }
};

class TuneModelCommand final : public Command {
 public:
  TuneModelCommand()
      : Command("tune-model",
                "tune every kernel of a model description under one budget (embedded server "
                "unless --server)",
                "tessel tune-model examples/models/bert_base.json --target snc3 --budget 500") {}

  absl::Status Run(int& exit_code) override;

 private:
  void AddOptions(CLI::App& command) override;
  // Tunes `tasks` on one target through `client`.
  absl::StatusOr<TargetResult> TuneOn(client::Client& client, const std::string& target,
                                      std::vector<ModelTask> tasks) const;
  json TargetJson(const TargetResult& result) const;
  void PrintTarget(const TargetResult& result) const;
  void PrintComparison(const std::vector<TargetResult>& results) const;

  std::string file_;
  std::string targets_ = kDefaultTarget;
  int budget_ = 1000;
  int round_trials_ = 16;
  std::string scheduler_ = "gradient";
  std::string strategy_;
  uint64_t seed_ = 1;
  int workers_ = 0;
  bool quiet_ = false;
  std::string model_job_;         // the label of this run's jobs (SubmitJobRequest.model)
  std::string time_limit_ = "0";  // per target; --time-limit as given
  int time_limit_s_ = 0;
  ServerArgs backend_;

  ModelFile model_;
  search::TaskRule rule_ = search::TaskRule::kGradient;
};

void TuneModelCommand::AddOptions(CLI::App& command) {
  command.add_option("file", file_, "model description (docs/models.md)")->required();
  command
      .add_option("--target", targets_,
                  "target, or targets separated by commas to compare generations side by side")
      ->capture_default_str();
  AddPositiveOption(command, "--budget", budget_, "trials in all, shared by the model's kernels");
  AddPositiveOption(command, "--round-trials", round_trials_,
                    "trials a kernel gets each time the scheduler picks it (at least 2: each round "
                    "re-measures the default config)");
  command
      .add_option("--scheduler", scheduler_,
                  "who gets the next round: gradient (Ansor's rule: the kernel whose share of "
                  "the model's time is expected to fall most) or round-robin")
      ->capture_default_str();
  command.add_option(
      "--strategy", strategy_,
      StrCat("search strategy within a round: ", StrJoin(search::StrategyNames(), ", "),
             " (default: the server's, auto)"));
  command.add_option("--seed", seed_, "seed of the scheduler and the searches")
      ->capture_default_str();
  command.add_option("--workers", workers_, "embedded worker threads (default: hardware threads)");
  command.add_flag("-q,--quiet", quiet_, "no progress on stderr");
  command.add_option("--time-limit", time_limit_,
                     "wall-clock limit per target: 90, 30s, 5m or 1h; no round starts after it, "
                     "and the round running then stops at it (0 = only the budget)");
  AddServerOptions(command, backend_);
}

absl::StatusOr<TargetResult> TuneModelCommand::TuneOn(client::Client& client,
                                                      const std::string& target,
                                                      std::vector<ModelTask> tasks) const {
  TargetResult out;
  out.target = target;
  out.tasks = std::move(tasks);
  out.results.resize(out.tasks.size());
  std::vector<search::TaskInfo> infos;
  for (const ModelTask& task : out.tasks) {
    const auto work = task.workload.kernel->MinimumWork(task.workload.problem);
    infos.push_back({.weight = double(task.count),
                     .flops = std::max(work.flops, 1.0),
                     .group = std::string(task.workload.kernel->name())});
  }
  search::TaskScheduler scheduler(rule_, infos, seed_);
  const auto start = std::chrono::steady_clock::now();
  const bool progress = !quiet_ && !json_;
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  while (budget_ - out.trials >= 2 && (time_limit_s_ == 0 || elapsed_s() < time_limit_s_)) {
    const std::optional<size_t> next = scheduler.Next();
    if (!next) break;  // every task's search is exhausted
    const size_t i = *next;
    const ModelTask& task = out.tasks[i];
    TaskResult& r = out.results[i];
    v1::SubmitJobRequest request;
    *request.mutable_workload() = task.workload.ToProto();
    request.set_strategy(strategy_ == "auto" ? "" : strategy_);
    request.set_budget(static_cast<int>(std::min<int64_t>(round_trials_, budget_ - out.trials)));
    // A task's k-th round has the same seed whatever the schedule (common random numbers: two
    // schedulers differ only in where they spend rounds).
    request.set_seed(RoundSeed(seed_, i, r.rounds));
    request.set_new_job(true);  // a round of its own, warm-started from the earlier ones
    request.set_model(model_job_);
    // Each round continues the task's own search (its measured configs are not measured again)
    // and is warm-started from the latest jobs of its kernel too: without them (tried on the
    // Llama prefill layer, seed 7) down_proj stayed at 554 us after 160 trials, with them the
    // best config of gate_proj carried over to 444 us.
    request.set_continue_search(true);
    // In lockstep, so that a seed gives one result whatever the workers' number and timing
    // (pipelined, the same seed at budget 2,000 ended at 1.853 and 1.905 ms on the Llama prefill
    // layer, and a scheduler comparison per seed measured that). Batches of 4: a round's 16
    // trials in four steps, enough to keep a few worker threads busy.
    request.set_lockstep(kRoundLockstep);
    if (time_limit_s_ > 0) {
      request.set_time_limit_s(std::max(1, time_limit_s_ - static_cast<int>(elapsed_s())));
    }
    TESSEL_ASSIGN_OR_RETURN(const v1::Job job,
                            SubmitAndWatch(client, request, /*progress=*/false, 0,
                                           /*stop_when_paused=*/true));
    if (job.state() != v1::JOB_COMPLETED) {
      return absl::InternalError(StrCat("op '", Shown(model_.ops[task.ops[0]].name, 64), "': job ",
                                        job.id(), " ended ", client::JobStateName(job.state()),
                                        ": ", Shown(job.message(), 300)));
    }
    r.jobs.push_back(job.id());
    ++r.rounds;
    const int64_t charged = std::max<int64_t>(1, job.trials().total());
    r.trials += charged;
    out.trials += charged;
    if (r.default_ns <= 0 && job.default_config().time_ns() > 0) {
      r.default_ns = job.default_config().time_ns();
    }
    if (job.has_best() && job.best().time_ns() > 0 && job.best().time_ns() < r.best_ns) {
      r.best_ns = job.best().time_ns();
      r.best_config = job.best().config();
    }
    if (job.roofline_ns() > 0) scheduler.SetFloor(i, job.roofline_ns());
    scheduler.Record(i, r.best_ns);
    if (job.stopped_by() == "exhausted") scheduler.MarkExhausted(i);
    if (progress) {
      const double before = out.DefaultNs(), after = out.TunedNs();
      const bool all_seen = std::all_of(out.results.begin(), out.results.end(),
                                        [](const TaskResult& t) { return t.rounds > 0; });
      std::fprintf(
          stderr, "%s [%lld/%d] %s %s %s x%lld: %s (%s) after %lld rounds%s\n", target.c_str(),
          static_cast<long long>(out.trials), budget_,
          Shown(model_.ops[task.ops[0]].name, 40).c_str(),
          std::string(task.workload.kernel->name()).c_str(), task.workload.shape.c_str(),
          static_cast<long long>(task.count), HumanTime(r.best_ns).c_str(),
          r.default_ns > 0 && std::isfinite(r.best_ns)
              ? fmt::format("{:.2f}x default", r.default_ns / r.best_ns).c_str()
              : "no default",
          static_cast<long long>(r.rounds),
          all_seen ? fmt::format("; model {} -> {}", HumanTime(before), HumanTime(after)).c_str()
                   : "");
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// Per op: the time its task's config takes, times its count.
json TuneModelCommand::TargetJson(const TargetResult& result) const {
  json ops = json::array();
  const double before = result.DefaultNs(), after = result.TunedNs();
  for (size_t k = 0; k < result.tasks.size(); ++k) {
    const ModelTask& task = result.tasks[k];
    const TaskResult& r = result.results[k];
    const double tuned = r.tuned_ns();
    const json bottleneck =
        r.best_config.empty() ? json(nullptr) : BottleneckJson(task.workload, r.best_config);
    for (size_t i : task.ops) {
      const ModelOp& op = model_.ops[i];
      ops.push_back({{"name", op.name},
                     {"kernel", op.kernel},
                     {"dims", task.workload.shape},
                     {"dtype", op.dtype},
                     {"count", op.count},
                     {"default_time_ns", r.default_ns},
                     {"tuned_time_ns", tuned},
                     {"speedup", tuned > 0 ? r.default_ns / tuned : 0.0},
                     {"bound", bottleneck.is_null() ? json(nullptr) : bottleneck["bound"]},
                     {"config", r.best_config},
                     {"rounds", r.rounds},
                     {"trials", r.trials},
                     {"jobs", r.jobs}});
    }
  }
  for (json& op : ops) {
    op["share"] =
        after > 0 ? op["count"].get<double>() * op["tuned_time_ns"].get<double>() / after : 0.0;
  }
  return {{"model", model_.name},
          {"target", result.target},
          {"budget", budget_},
          {"scheduler", search::TaskRuleName(rule_)},
          {"model_job", model_job_},
          {"trials", result.trials},
          {"seconds", result.seconds},
          {"default_time_ns", before},
          {"tuned_time_ns", after},
          {"speedup", after > 0 ? before / after : 0.0},
          {"ops", ops}};
}

void TuneModelCommand::PrintTarget(const TargetResult& result) const {
  const json data = TargetJson(result);
  std::vector<std::vector<std::string>> rows;
  for (const json& op : data["ops"]) {
    rows.push_back({op["name"].get<std::string>(), op["kernel"].get<std::string>(),
                    op["dims"].get<std::string>(), std::to_string(op["count"].get<int64_t>()),
                    HumanTime(op["default_time_ns"].get<double>()),
                    HumanTime(op["tuned_time_ns"].get<double>()),
                    fmt::format("{:.2f}x", op["speedup"].get<double>()),
                    fmt::format("{:.1f}%", 100 * op["share"].get<double>()),
                    op["bound"].is_null() ? "-" : op["bound"].get<std::string>()});
  }
  std::cout << fmt::format("{} on {}: {} trials, {} scheduler, {:.0f} s\n", model_.name,
                           result.target, result.trials, search::TaskRuleName(rule_),
                           result.seconds)
            << FormatTable({{"op"},
                            {"kernel"},
                            {"dims"},
                            {"count", true},
                            {"default", true},
                            {"tuned", true},
                            {"speedup", true},
                            {"share", true},
                            {"bound"}},
                           rows)
            << fmt::format(
                   "model: {} -> {} ({:.2f}x)\n", HumanTime(data["default_time_ns"].get<double>()),
                   HumanTime(data["tuned_time_ns"].get<double>()), data["speedup"].get<double>());
}

void TuneModelCommand::PrintComparison(const std::vector<TargetResult>& results) const {
  const TargetResult& a = results[0];
  const TargetResult& b = results[1];
  std::vector<std::vector<std::string>> rows;
  for (size_t k = 0; k < a.tasks.size(); ++k) {
    const TaskResult& ra = a.results[k];
    const TaskResult& rb = b.results[k];
    const double ta = ra.tuned_ns(), tb = rb.tuned_ns();
    rows.push_back({Shown(model_.ops[a.tasks[k].ops[0]].name, 40),
                    std::string(a.tasks[k].workload.kernel->name()), HumanTime(ta), HumanTime(tb),
                    fmt::format("{:.2f}x", tb > 0 ? ta / tb : 0.0),
                    ra.best_config == rb.best_config ? "same" : "differs"});
  }
  const double total_a = a.TunedNs(), total_b = b.TunedNs();
  rows.push_back({"model", "", HumanTime(total_a), HumanTime(total_b),
                  fmt::format("{:.2f}x", total_b > 0 ? total_a / total_b : 0.0), ""});
  std::cout << fmt::format("\n{} vs {} (tuned):\n", a.target, b.target)
            << FormatTable({{"op"},
                            {"kernel"},
                            {a.target, true},
                            {b.target, true},
                            {"speedup", true},
                            {"config"}},
                           rows);
}

absl::Status TuneModelCommand::Run(int& exit_code) {
  // Everything is checked before the database is opened: a bad file writes nothing.
  TESSEL_ASSIGN_OR_RETURN(model_, ReadModelFile(file_));
  TESSEL_ASSIGN_OR_RETURN(rule_, search::ParseTaskRule(scheduler_));
  TESSEL_ASSIGN_OR_RETURN(time_limit_s_, ParseTimeLimitSeconds(time_limit_, "--time-limit"));
  if (round_trials_ < 2) {
    return absl::InvalidArgumentError(
        "--round-trials must be at least 2 (a round re-measures the default config)");
  }
  if (!strategy_.empty()) TESSEL_RETURN_IF_ERROR(search::CheckStrategyName(strategy_));
  std::vector<std::string> targets;
  for (std::string_view t : StrSplit(targets_, ',')) {
    if (t.empty()) return absl::InvalidArgumentError("--target: an empty name in the list");
    if (std::find(targets.begin(), targets.end(), t) != targets.end()) {
      return absl::InvalidArgumentError(StrCat("--target: ", t, " is named twice"));
    }
    TESSEL_RETURN_IF_ERROR(LoadTargetOrExplain(std::string(t)).status());
    targets.emplace_back(t);
  }
  if (targets.size() > 2) {
    return absl::InvalidArgumentError("--target: at most two targets to compare");
  }
  std::vector<std::vector<ModelTask>> tasks;
  for (const std::string& target : targets) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<ModelTask> on, TasksOn(model_, target));
    tasks.push_back(std::move(on));
  }

  model_job_ = ModelJobLabel(model_.name, targets_);
  TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/false));
  const int workers =
      workers_ > 0 ? workers_ : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EmbeddedWorkers embedded;
  TESSEL_RETURN_IF_ERROR(embedded.Start(*backend, workers));
  if (!quiet_ && !json_) {
    std::fprintf(stderr,
                 "tuning %s: %zu ops, %zu distinct workloads, %d trials per target, %s; its jobs "
                 "are labelled '%s' (tessel jobs)\n",
                 model_.name.c_str(), model_.ops.size(), tasks[0].size(), budget_,
                 backend->server ? StrCat("embedded (db ", backend_.DbPath(), ")").c_str()
                                 : StrCat("server ", backend_.server).c_str(),
                 model_job_.c_str());
  }
  std::vector<TargetResult> results;
  for (size_t t = 0; t < targets.size(); ++t) {
    TESSEL_ASSIGN_OR_RETURN(TargetResult result,
                            TuneOn(*backend->client, targets[t], std::move(tasks[t])));
    results.push_back(std::move(result));
  }
  embedded.Stop();
  if (json_) {
    if (results.size() == 1) {
      PrintJson(TargetJson(results[0]));
    } else {
      json out = {{"model", model_.name}, {"targets", json::array()}};
      for (const TargetResult& r : results) out["targets"].push_back(TargetJson(r));
      PrintJson(out);
    }
  } else {
    for (const TargetResult& r : results) PrintTarget(r);
    if (results.size() == 2) PrintComparison(results);
  }
  (void)exit_code;
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Command> NewTuneModelCommand() { return std::make_unique<TuneModelCommand>(); }

}  // namespace tessel::cli

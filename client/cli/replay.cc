// `tessel replay`: benchmark search strategies on a recorded tuning space (Kernel Tuner cache).
#include "search/replay.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "search/strategy.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

json OptionalJson(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json SummaryJson(const std::string& strategy, const search::ReplaySummary& summary,
                 double seconds) {
  return {{"strategy", strategy},
          {"budget", summary.budget},
          {"runs", summary.runs},
          {"score_mean", summary.score_mean},
          {"score_p10", summary.score_p10},
          {"score_min", summary.score_min},
          {"score_stderr", summary.score_stderr},
          {"evals_to_5pct_median", OptionalJson(summary.evals_to_5pct_median)},
          {"evals_to_1pct_median", OptionalJson(summary.evals_to_1pct_median)},
          {"reached_5pct", summary.reached_5pct},
          {"reached_1pct", summary.reached_1pct},
          {"seconds", seconds}};
}

class ReplayCommand final : public Command {
 public:
  ReplayCommand()
      : Command(
            "replay", "benchmark search strategies on a recorded tuning space (Kernel Tuner cache)",
            "tessel replay --cache GTX_Titan_X.json.gz --budget 100 --runs 20 --strategy auto") {}

  // Runs it: one JSON object (or a table) on stdout. InvalidArgument / NotFound for bad input.
  absl::Status Run(int&) override;

 private:
  void AddOptions(CLI::App& command) override;
  // Prints the header and one row per strategy as a table (not --json).
  void PrintTable(const search::ReplayCache& cache, search::Protocol protocol,
                  const json& results) const;

  std::string cache_;
  std::string strategy_;  // empty: every strategy
  int budget_ = 200;
  int runs_ = 50;
  uint64_t seed_ = 1;
  std::string protocol_ = "constrained";
  bool noisy_ = false;
  std::string variant_ = "plain";
  int batch_ = 1;
  int threads_ = 1;
};

void ReplayCommand::AddOptions(CLI::App& command) {
  command.add_option("--cache", cache_, "Kernel Tuner cache file (.json or .json.gz)")->required();
  command.add_option("--strategy", strategy_,
                     StrCat("strategy: ", StrJoin(search::StrategyNames(), ", "),
                            " (default: every strategy, a table)"));
  AddPositiveOption(command, "--budget", budget_, "evaluations per run, failed ones included");
  AddPositiveOption(command, "--runs", runs_, "seeded runs");
  command.add_option("--seed", seed_, "seed of the first run")->capture_default_str();
  command
      .add_option("--protocol", protocol_,
                  "constrained (recorded configs only) or cartesian (full product; "
                  "unrecorded draws cost an evaluation and fail)")
      ->capture_default_str();
  command.add_flag("--noisy", noisy_, "return one recorded run at random, not the mean");
  command
      .add_option("--variant", variant_,
                  "robustness variant: plain; shuffled (each param's values relabelled at "
                  "random); monotone (times seen as log(1 + t/best)); noise (2% multiplicative "
                  "noise); failures (20% of the configs fail)")
      ->capture_default_str();
  AddPositiveOption(command, "--batch", batch_, "configs proposed at once");
  AddPositiveOption(command, "--threads", threads_,
                    "runs in parallel (results do not depend on it)");
}

absl::Status ReplayCommand::Run(int&) {
  TESSEL_ASSIGN_OR_RETURN(const search::Protocol protocol, search::ParseProtocol(protocol_));
  const std::vector<std::string> strategies =
      strategy_.empty() ? search::StrategyNames() : std::vector<std::string>{strategy_};
  TESSEL_ASSIGN_OR_RETURN(const search::Variant variant, search::ParseVariant(variant_));
  TESSEL_ASSIGN_OR_RETURN(const search::ReplayCache loaded, search::ReplayCache::Load(cache_));
  // The variant's cache: scores are relative to its best (a failed optimum is not findable).
  const search::ReplayCache cache = search::VariantCache(loaded, variant, seed_);

  json results = json::array();
  for (const std::string& name : strategies) {
    search::ReplayOptions options;
    options.strategy = name;
    options.budget = budget_;
    options.runs = runs_;
    options.seed = seed_;
    options.protocol = protocol;
    options.noisy = noisy_;
    options.variant = variant;
    options.batch = batch_;
    options.threads = threads_;
    auto start = std::chrono::steady_clock::now();
    TESSEL_ASSIGN_OR_RETURN(const std::vector<search::ReplayRun> runs,
                            search::RunReplay(cache, options));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    results.push_back(SummaryJson(name, search::Summarize(cache, runs, budget_), seconds));
  }
  if (!json_) {
    PrintTable(cache, protocol, results);
    return absl::OkStatus();
  }
  json out = {{"cache", cache_},
              {"kernel", std::string(cache.kernel_name())},
              {"device", std::string(cache.device_name())},
              {"protocol", std::string(search::ProtocolName(protocol))},
              {"noisy", noisy_},
              {"variant", variant_},
              {"configs", search::ReplaySpaceSize(cache, protocol)},
              {"recorded", cache.entries()},
              {"valid", cache.ok_entries()},
              {"best_time", cache.best_time()},
              {"seed", seed_}};
  if (strategy_.empty()) {
    out["budget"] = budget_;
    out["runs"] = runs_;
    out["strategies"] = results;
  } else {
    out.update(results[0]);
  }
  std::printf("%s\n", out.dump().c_str());
  return absl::OkStatus();
}

void ReplayCommand::PrintTable(const search::ReplayCache& cache, search::Protocol protocol,
                               const json& results) const {
  std::printf("%s on %s: %s protocol, %llu configs, %zu valid, best %.4g%s\n",
              std::string(cache.kernel_name()).c_str(), std::string(cache.device_name()).c_str(),
              std::string(search::ProtocolName(protocol)).c_str(),
              static_cast<unsigned long long>(search::ReplaySpaceSize(cache, protocol)),
              cache.ok_entries(), cache.best_time(), noisy_ ? " (noisy)" : "");
  std::printf("budget %d, %d runs, seed %llu\n\n", budget_, runs_,
              static_cast<unsigned long long>(seed_));
  std::printf("%-11s %10s %9s %9s %13s %13s %8s\n", "strategy", "score_mean", "score_p10",
              "score_min", "evals_to_5%", "evals_to_1%", "seconds");
  auto evals = [](const json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:g}", v.get<double>());
  };
  for (const json& r : results) {
    std::printf("%-11s %10.4f %9.4f %9.4f %13s %13s %8.2f\n",
                r["strategy"].get<std::string>().c_str(), r["score_mean"].get<double>(),
                r["score_p10"].get<double>(), r["score_min"].get<double>(),
                evals(r["evals_to_5pct_median"]).c_str(), evals(r["evals_to_1pct_median"]).c_str(),
                r["seconds"].get<double>());
  }
}

}  // namespace

std::unique_ptr<Command> NewReplayCommand() { return std::make_unique<ReplayCommand>(); }

}  // namespace tessel::cli

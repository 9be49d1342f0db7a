#include "client/cli/replay.h"

#include <chrono>
#include <cstdio>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "search/replay.h"
#include "search/strategy.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

json OptionalJson(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

CLI::App* AddReplayCommand(CLI::App& app, ReplayArgs& args) {
  CLI::App* command = app.add_subcommand(
      "replay", "benchmark search strategies on a recorded tuning space (Kernel Tuner cache)");
  command->add_option("--cache", args.cache, "Kernel Tuner cache file (.json or .json.gz)")
      ->required();
  command->add_option("--strategy", args.strategy, "strategy (default: every strategy, a table)");
  command->add_option("--budget", args.budget, "evaluations per run, failed ones included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--runs", args.runs, "seeded runs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", args.seed, "seed of the first run")->capture_default_str();
  command
      ->add_option("--protocol", args.protocol,
                   "constrained (recorded configs only) or cartesian (full product; "
                   "unrecorded draws cost an evaluation and fail)")
      ->capture_default_str();
  command->add_flag("--noisy", args.noisy, "return one recorded run at random, not the mean");
  command
      ->add_option("--variant", args.variant,
                   "robustness variant: plain; shuffled (each param's values relabelled at "
                   "random); monotone (times seen as log(1 + t/best)); noise (2% multiplicative "
                   "noise); failures (20% of the configs fail)")
      ->capture_default_str();
  command->add_option("--batch", args.batch, "configs proposed at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--threads", args.threads, "runs in parallel (results do not depend on it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--json", args.json, "print one JSON object");
  return command;
}

absl::Status RunReplay(const ReplayArgs& args) {
  absl::StatusOr<search::Protocol> protocol = search::ParseProtocol(args.protocol);
  if (!protocol.ok()) return protocol.status();
  std::vector<std::string> strategies;
  if (args.strategy.empty()) {
    strategies = search::StrategyNames();
  } else {
    strategies.push_back(args.strategy);
  }
  absl::StatusOr<search::Variant> variant = search::ParseVariant(args.variant);
  if (!variant.ok()) return variant.status();
  absl::StatusOr<search::ReplayCache> loaded = search::ReplayCache::Load(args.cache);
  if (!loaded.ok()) return loaded.status();
  // The variant's cache: scores are relative to its best (a failed optimum is not findable).
  absl::StatusOr<search::ReplayCache> cache = search::VariantCache(*loaded, *variant, args.seed);

  json results = json::array();
  for (const std::string& name : strategies) {
    search::ReplayOptions options;
    options.strategy = name;
    options.budget = args.budget;
    options.runs = args.runs;
    options.seed = args.seed;
    options.protocol = *protocol;
    options.noisy = args.noisy;
    options.variant = *variant;
    options.batch = args.batch;
    options.threads = args.threads;
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<search::ReplayRun>> runs = search::RunReplay(*cache, options);
    if (!runs.ok()) return runs.status();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    search::ReplaySummary summary = search::Summarize(*cache, *runs, args.budget);
    results.push_back({{"strategy", name},
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
                       {"seconds", seconds}});
  }

  json header = {{"cache", args.cache},
                 {"kernel", std::string(cache->kernel_name())},
                 {"device", std::string(cache->device_name())},
                 {"protocol", std::string(search::ProtocolName(*protocol))},
                 {"noisy", args.noisy},
                 {"variant", args.variant},
                 {"configs", search::ReplaySpaceSize(*cache, *protocol)},
                 {"recorded", cache->entries()},
                 {"valid", cache->ok_entries()},
                 {"best_time", cache->best_time()},
                 {"seed", args.seed}};
  if (args.json) {
    json out = header;
    if (args.strategy.empty()) {
      out["budget"] = args.budget;
      out["runs"] = args.runs;
      out["strategies"] = results;
    } else {
      out.update(results[0]);
    }
    std::printf("%s\n", out.dump().c_str());
    return absl::OkStatus();
  }
  std::printf("%s on %s: %s protocol, %llu configs, %zu valid, best %.4g%s\n",
              std::string(cache->kernel_name()).c_str(), std::string(cache->device_name()).c_str(),
              std::string(search::ProtocolName(*protocol)).c_str(),
              static_cast<unsigned long long>(search::ReplaySpaceSize(*cache, *protocol)),
              cache->ok_entries(), cache->best_time(), args.noisy ? " (noisy)" : "");
  std::printf("budget %d, %d runs, seed %llu\n\n", args.budget, args.runs,
              static_cast<unsigned long long>(args.seed));
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
  return absl::OkStatus();
}

}  // namespace tessel::cli

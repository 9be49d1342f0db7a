// The search benchmark behind BENCHMARKS.md "Search": every strategy on every recorded space in
// ../shared/datasets/kerneltuner, both protocols, several budgets, many seeded runs.
//
//   search_replay [--data DIR] [--runs 50] [--budgets 50,100,200,400,1600] [--threads 2]
//                 [--strategies a,b] [--spaces gemm,...] [--protocols constrained,cartesian]
//                 [--seed 1] [--noisy] [--json FILE] [--help]
//
// Each (space, protocol, strategy) is run once per seed at the largest budget; the figures at a
// smaller budget are read off the same runs (no strategy knows its budget, so a run cut at 200 is
// the run that would have been made with budget 200). Prints a Markdown table.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "search/replay.h"
#include "search/strategy.h"

namespace {

using nlohmann::json;
using tessel::StrSplit;
namespace search = tessel::search;

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : StrSplit(text, ',')) {
    if (!piece.empty()) out.emplace_back(piece);
  }
  return out;
}

int Run(int argc, char** argv) {
  std::string data = std::string(TESSEL_SOURCE_DIR) + "/../shared/datasets/kerneltuner";
  int runs = 50, threads = 2;
  uint64_t seed = 1;
  bool noisy = false;
  std::vector<int> budgets = {50, 100, 200, 400, 1600};
  std::vector<std::string> strategies = search::StrategyNames();
  std::vector<std::string> spaces = {"gemm_RTX_3090", "convolution_A4000", "dedispersion_A4000",
                                     "pnpoly_RTX_3090"};
  std::vector<std::string> protocols = {"constrained", "cartesian"};
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "search_replay [--data DIR] [--runs 50] [--budgets 50,100,200,400,1600] [--threads 2]\n"
          "              [--strategies a,b] [--spaces gemm_RTX_3090,...] [--seed 1]\n"
          "              [--protocols constrained,cartesian] [--noisy] [--json FILE]\n"
          "Every strategy on every recorded space (../shared/datasets/kerneltuner), run once per\n"
          "seed at the largest budget and read at each budget; prints Markdown tables.\n");
      return 0;
    }
    if (arg == "--data")
      data = value();
    else if (arg == "--runs")
      runs = std::stoi(value());
    else if (arg == "--threads")
      threads = std::stoi(value());
    else if (arg == "--seed")
      seed = std::stoull(value());
    else if (arg == "--noisy")
      noisy = true;
    else if (arg == "--json")
      json_out = value();
    else if (arg == "--strategies")
      strategies = Split(value());
    else if (arg == "--spaces")
      spaces = Split(value());
    else if (arg == "--protocols")
      protocols = Split(value());
    else if (arg == "--budgets") {
      budgets.clear();
      for (const std::string& b : Split(value())) budgets.push_back(std::stoi(b));
    } else {
      std::fprintf(stderr, "search_replay: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  if (!std::filesystem::exists(data)) {
    std::fprintf(stderr, "search_replay: no recorded spaces at %s (../shared/datasets absent)\n",
                 data.c_str());
    return 1;
  }
  int max_budget = 0;
  for (int b : budgets) max_budget = std::max(max_budget, b);

  json all = json::array();
  auto total_start = std::chrono::steady_clock::now();
  for (const std::string& space_name : spaces) {
    auto cache = search::ReplayCache::Load(data + "/" + space_name + ".json.gz");
    if (!cache.ok()) {
      std::fprintf(stderr, "search_replay: %s\n", std::string(cache.status().message()).c_str());
      return 1;
    }
    for (const std::string& protocol_name : protocols) {
      search::Protocol protocol = *search::ParseProtocol(protocol_name);
      std::printf("\n### %s, %s protocol (%llu configs, %zu valid)\n\n", space_name.c_str(),
                  protocol_name.c_str(),
                  static_cast<unsigned long long>(search::ReplaySpaceSize(*cache, protocol)),
                  cache->ok_entries());
      std::printf("| strategy |");
      for (int b : budgets) std::printf(" @%d |", b);
      std::printf(" evals to 5%% / 1%% (median, @%d) | s/run |\n|---|", max_budget);
      for (size_t k = 0; k <= budgets.size() + 1; ++k) std::printf("---|");
      std::printf("\n");
      for (const std::string& strategy : strategies) {
        search::ReplayOptions options;
        options.strategy = strategy;
        options.budget = max_budget;
        options.runs = runs;
        options.seed = seed;
        options.protocol = protocol;
        options.noisy = noisy;
        options.threads = threads;
        auto start = std::chrono::steady_clock::now();
        auto result = search::RunReplay(*cache, options);
        if (!result.ok()) {
          std::fprintf(stderr, "search_replay: %s\n",
                       std::string(result.status().message()).c_str());
          return 1;
        }
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("| %s |", strategy.c_str());
        json row = {{"space", space_name},
                    {"protocol", protocol_name},
                    {"strategy", strategy},
                    {"runs", runs},
                    {"seconds", seconds}};
        for (int b : budgets) {
          search::ReplaySummary s = search::Summarize(*cache, *result, b);
          std::printf(" %.3f (p10 %.3f) |", s.score_mean, s.score_p10);
          row["budgets"][std::to_string(b)] = {
              {"score_mean", s.score_mean},
              {"score_p10", s.score_p10},
              {"score_min", s.score_min},
              {"evals_to_5pct_median",
               s.evals_to_5pct_median ? json(*s.evals_to_5pct_median) : json(nullptr)},
              {"evals_to_1pct_median",
               s.evals_to_1pct_median ? json(*s.evals_to_1pct_median) : json(nullptr)}};
        }
        search::ReplaySummary s = search::Summarize(*cache, *result, max_budget);
        auto evals = [](const std::optional<double>& v) {
          return v ? fmt::format("{:g}", *v) : std::string("-");
        };
        std::printf(" %s / %s | %.2f |\n", evals(s.evals_to_5pct_median).c_str(),
                    evals(s.evals_to_1pct_median).c_str(), seconds / runs);
        std::fflush(stdout);
        all.push_back(row);
      }
    }
  }
  double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - total_start).count();
  std::printf("\ntotal %.1f s on %d threads\n", total, threads);
  if (!json_out.empty()) std::ofstream(json_out) << all.dump(1) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }

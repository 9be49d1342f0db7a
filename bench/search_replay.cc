// The search benchmark behind BENCHMARKS.md "Search": strategies on every recorded space in
// ../shared/datasets/kerneltuner, under robustness variants, at several budgets, many seeded runs,
// with a portfolio check (auto against its arms and random) and a leave-one-GPU-out table.
//
//   search_replay [--data DIR] [--runs 50] [--budgets 25,50,100,200,400] [--threads 2]
//                 [--strategies a,b] [--spaces gemm_RTX_3090,...] [--protocols constrained]
//                 [--variants plain,shuffled,monotone,noise,failures] [--seed 1] [--noisy]
//                 [--summary-budgets 50,100,200] [--logo SPEC;SPEC;...] [--logo-budget 200]
//                 [--tables] [--json FILE] [--help]
//
// Each (space, protocol, variant, strategy) is run once per seed at the largest budget; the
// figures at a smaller budget are read off the same runs (no strategy knows its budget, so a run
// cut at 200 is the run that would have been made with budget 200). Prints Markdown.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "search/evaluation.h"
#include "search/replay.h"
#include "search/strategy.h"

namespace {

using nlohmann::json;
using tessel::StrSplit;
namespace search = tessel::search;

std::vector<std::string> Split(const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  for (std::string_view piece : StrSplit(text, sep)) {
    if (!piece.empty()) out.emplace_back(piece);
  }
  return out;
}

std::vector<int> Ints(const std::string& text) {
  std::vector<int> out;
  for (const std::string& b : Split(text)) out.push_back(std::stoi(b));
  return out;
}

// Every *.json.gz cache in `dir`, by stem, sorted.
std::vector<std::string> AllSpaces(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 8 && name.ends_with(".json.gz"))
      out.push_back(name.substr(0, name.size() - 8));
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Args {
  std::string data = std::string(TESSEL_SOURCE_DIR) + "/../shared/datasets/kerneltuner";
  int runs = 50, threads = 2;
  uint64_t seed = 1;
  bool noisy = false, tables = false;
  std::vector<int> budgets = {25, 50, 100, 200, 400};
  std::vector<int> summary_budgets = {50, 100, 200};
  std::vector<std::string> strategies;
  std::vector<std::string> spaces;
  std::vector<std::string> protocols = {"constrained"};
  std::vector<std::string> variants = {"plain"};
  std::vector<std::string> logo;  // candidate specs for the leave-one-GPU-out table
  int logo_budget = 200;
  std::string json_out;
};

const char kHelp[] =
    "search_replay [--data DIR] [--runs 50] [--budgets 25,50,100,200,400] [--threads 2]\n"
    "              [--strategies a,b | 'SPEC;SPEC'] [--spaces gemm_RTX_3090,...]\n"
    "              [--protocols constrained] [--variants plain,shuffled,monotone,noise,failures] "
    "[--seed 1] [--noisy]\n"
    "              [--summary-budgets 50,100,200] [--logo 'SPEC;SPEC'] [--logo-budget 200]\n"
    "              [--tables] [--json FILE]\n"
    "Strategies on the recorded spaces (default: every *.json.gz in "
    "../shared/datasets/kerneltuner),\n"
    "run once per seed at the largest budget and read at each budget. Prints, per protocol and\n"
    "variant: each strategy's mean over spaces and its worst space, and auto against its best arm\n"
    "and random per space; --tables adds a table per space; --logo adds a leave-one-GPU-out table\n"
    "choosing among the given strategy specs on every GPU but one.\n";

int Parse(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg == "--data")
      args.data = value();
    else if (arg == "--runs")
      args.runs = std::stoi(value());
    else if (arg == "--threads")
      args.threads = std::stoi(value());
    else if (arg == "--seed")
      args.seed = std::stoull(value());
    else if (arg == "--noisy")
      args.noisy = true;
    else if (arg == "--tables")
      args.tables = true;
    else if (arg == "--json")
      args.json_out = value();
    else if (arg == "--strategies") {
      // Specs with options ("auto:design=8,floor=0.1") are separated by ';'.
      std::string list = value();
      args.strategies = Split(list, list.find(';') != std::string::npos ? ';' : ',');
    } else if (arg == "--spaces")
      args.spaces = Split(value());
    else if (arg == "--protocols")
      args.protocols = Split(value());
    else if (arg == "--variants")
      args.variants = Split(value());
    else if (arg == "--budgets")
      args.budgets = Ints(value());
    else if (arg == "--summary-budgets")
      args.summary_budgets = Ints(value());
    else if (arg == "--logo")
      args.logo = Split(value(), ';');
    else if (arg == "--logo-budget")
      args.logo_budget = std::stoi(value());
    else {
      std::fprintf(stderr, "search_replay: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  return -1;
}

std::string Evals(const std::optional<double>& v) {
  return v ? fmt::format("{:g}", *v) : std::string("-");
}

// The summary over spaces for one protocol and variant.
void PrintSummary(const std::vector<search::Cell>& cells, const Args& args,
                  const std::vector<std::string>& strategies, const std::string& protocol,
                  const std::string& variant) {
  std::printf("\n### %s protocol, %s: mean score over spaces (worst space)\n\n| strategy |",
              protocol.c_str(), variant.c_str());
  for (int b : args.budgets) std::printf(" @%d |", b);
  std::printf("\n|---|");
  for (size_t k = 0; k < args.budgets.size(); ++k) std::printf("---|");
  std::printf("\n");
  for (const std::string& strategy : strategies) {
    std::printf("| %s |", strategy.c_str());
    for (int b : args.budgets) {
      std::optional<double> mean = search::MeanScore(cells, strategy, b, variant);
      search::WorstSpace worst = search::Worst(cells, strategy, b, variant);
      std::printf(" %.3f (%.3f %s) |", mean.value_or(0), worst.score_mean, worst.space.c_str());
    }
    std::printf("\n");
  }
  std::vector<std::string> arms;
  for (const std::string& s : strategies) {
    if (s != "auto" && s != "exhaustive" && s.rfind("auto:", 0) != 0) arms.push_back(s);
  }
  if (arms.empty() || std::find(strategies.begin(), strategies.end(), "auto") == strategies.end())
    return;
  std::printf(
      "\nauto against its best arm (of %s; -0.015 allowed) and random (+0.01 where random < "
      "0.98):\n\n",
      tessel::StrJoin(arms, ", ").c_str());
  for (int b : args.summary_budgets) {
    search::PortfolioCheck check =
        search::ComparePortfolio(cells, "auto", arms, "random", b, variant);
    std::printf(
        "- @%d, %d spaces: below best arm on %zu (%s); below random on %zu (%s); "
        "worst gap to the best arm %+.3f (%s)\n",
        b, check.spaces, check.below_best_arm.size(),
        tessel::StrJoin(check.below_best_arm, ", ").c_str(), check.below_random.size(),
        tessel::StrJoin(check.below_random, ", ").c_str(), check.worst_gap_to_best_arm,
        check.worst_gap_space.c_str());
  }
}

void PrintLogo(const std::vector<search::Cell>& cells, const Args& args,
               const std::string& variant) {
  std::vector<search::HeldOut> held =
      search::LeaveOneGroupOut(cells, args.logo, args.logo_budget, variant);
  std::printf(
      "\n### Leave-one-GPU-out, %s, @%d: a spec chosen on the other GPUs, scored on the "
      "one left out\n\n| GPU left out | chosen | train mean | spaces: score |\n"
      "|---|---|---|---|\n",
      variant.c_str(), args.logo_budget);
  double sum = 0, worst = 2;
  int n = 0;
  for (const search::HeldOut& h : held) {
    std::string scores;
    for (const search::Cell& c : h.test) {
      scores += fmt::format("{}{} {:.3f}", scores.empty() ? "" : ", ", c.space, c.score_mean);
      sum += c.score_mean;
      worst = std::min(worst, c.score_mean);
      ++n;
    }
    std::printf("| %s | %s | %.3f | %s |\n", h.group.c_str(), h.chosen.c_str(), h.train_mean,
                scores.c_str());
  }
  if (n > 0) {
    std::printf("\nheld-out mean over %d spaces %.3f, worst %.3f; fixed specs' means:", n, sum / n,
                worst);
    for (const std::string& spec : args.logo) {
      std::printf(" %s %.3f;", spec.c_str(),
                  search::MeanScore(cells, spec, args.logo_budget, variant).value_or(0));
    }
    std::printf("\n");
  }
}

int Run(int argc, char** argv) {
  Args args;
  if (int rc = Parse(argc, argv, args); rc >= 0) return rc;
  if (!std::filesystem::exists(args.data)) {
    std::fprintf(stderr, "search_replay: no recorded spaces at %s (../shared/datasets absent)\n",
                 args.data.c_str());
    return 1;
  }
  if (args.spaces.empty()) args.spaces = AllSpaces(args.data);
  if (args.strategies.empty()) args.strategies = search::StrategyNames();
  std::vector<std::string> strategies = args.strategies;
  for (const std::string& spec : args.logo) {
    if (std::find(strategies.begin(), strategies.end(), spec) == strategies.end())
      strategies.push_back(spec);
  }
  std::vector<search::Variant> variants;
  for (const std::string& name : args.variants) {
    auto v = search::ParseVariant(name);
    if (!v.ok()) {
      std::fprintf(stderr, "search_replay: %s\n", std::string(v.status().message()).c_str());
      return 2;
    }
    variants.push_back(*v);
  }
  int max_budget = *std::max_element(args.budgets.begin(), args.budgets.end());

  json all = json::array();
  auto total_start = std::chrono::steady_clock::now();
  std::map<std::string, std::vector<search::Cell>> cells;  // by protocol
  for (const std::string& space_name : args.spaces) {
    auto cache = search::ReplayCache::Load(args.data + "/" + space_name + ".json.gz");
    if (!cache.ok()) {
      std::fprintf(stderr, "search_replay: %s\n", std::string(cache.status().message()).c_str());
      return 1;
    }
    const std::string group = search::SpaceGroup(*cache, space_name);
    for (const std::string& protocol_name : args.protocols) {
      auto protocol = search::ParseProtocol(protocol_name);
      if (!protocol.ok()) {
        std::fprintf(stderr, "search_replay: %s\n",
                     std::string(protocol.status().message()).c_str());
        return 2;
      }
      for (search::Variant variant : variants) {
        const std::string variant_name(search::VariantName(variant));
        const search::ReplayCache varied = search::VariantCache(*cache, variant, args.seed);
        if (args.tables) {
          std::printf("\n#### %s, %s protocol, %s (%llu configs, %zu valid)\n\n| strategy |",
                      space_name.c_str(), protocol_name.c_str(), variant_name.c_str(),
                      static_cast<unsigned long long>(search::ReplaySpaceSize(varied, *protocol)),
                      varied.ok_entries());
          for (int b : args.budgets) std::printf(" @%d |", b);
          std::printf(" evals to 5%% / 1%% (median, @%d) | s/run |\n|---|", max_budget);
          for (size_t k = 0; k <= args.budgets.size() + 1; ++k) std::printf("---|");
          std::printf("\n");
        }
        for (const std::string& strategy : strategies) {
          search::ReplayOptions options;
          options.strategy = strategy;
          options.budget = max_budget;
          options.runs = args.runs;
          options.seed = args.seed;
          options.protocol = *protocol;
          options.noisy = args.noisy;
          options.variant = variant;
          options.threads = args.threads;
          auto start = std::chrono::steady_clock::now();
          auto result = search::RunReplay(varied, options);
          if (!result.ok()) {
            std::fprintf(stderr, "search_replay: %s\n",
                         std::string(result.status().message()).c_str());
            return 1;
          }
          double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          json row = {{"space", space_name},       {"group", group},
                      {"protocol", protocol_name}, {"variant", variant_name},
                      {"strategy", strategy},      {"runs", args.runs},
                      {"seconds", seconds}};
          if (args.tables) std::printf("| %s |", strategy.c_str());
          for (int b : args.budgets) {
            search::ReplaySummary s = search::Summarize(varied, *result, b);
            cells[protocol_name].push_back({space_name, group, variant_name, strategy, b,
                                            s.score_mean, s.score_p10, s.score_min,
                                            s.score_stderr});
            if (args.tables) {
              std::printf(" %.3f ±%.3f (p10 %.3f, min %.3f) |", s.score_mean, s.score_stderr,
                          s.score_p10, s.score_min);
            }
            row["budgets"][std::to_string(b)] = {
                {"score_mean", s.score_mean},
                {"score_stderr", s.score_stderr},
                {"score_p10", s.score_p10},
                {"score_min", s.score_min},
                {"evals_to_5pct_median",
                 s.evals_to_5pct_median ? json(*s.evals_to_5pct_median) : json(nullptr)},
                {"evals_to_1pct_median",
                 s.evals_to_1pct_median ? json(*s.evals_to_1pct_median) : json(nullptr)}};
          }
          if (args.tables) {
            search::ReplaySummary s = search::Summarize(varied, *result, max_budget);
            std::printf(" %s / %s | %.2f |\n", Evals(s.evals_to_5pct_median).c_str(),
                        Evals(s.evals_to_1pct_median).c_str(), seconds / args.runs);
          }
          std::fflush(stdout);
          all.push_back(row);
        }
      }
    }
    std::fprintf(
        stderr, "search_replay: %s done (%.0f s)\n", space_name.c_str(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - total_start).count());
  }
  for (const auto& [protocol, protocol_cells] : cells) {
    for (const std::string& variant : args.variants) {
      PrintSummary(protocol_cells, args, strategies, protocol, variant);
      if (!args.logo.empty()) PrintLogo(protocol_cells, args, variant);
    }
    if (args.variants.size() > 1 &&
        std::find(strategies.begin(), strategies.end(), "auto") != strategies.end()) {
      std::printf("\nauto's mean against plain, by variant:");
      for (int b : args.summary_budgets) {
        std::optional<double> plain = search::MeanScore(protocol_cells, "auto", b, "plain");
        if (plain) {
          std::printf("\n- @%d: plain %.3f", b, *plain);
        } else {
          std::printf("\n- @%d: plain not run (add plain to --variants)", b);
        }
        for (const std::string& variant : args.variants) {
          if (variant == "plain") continue;
          double v = search::MeanScore(protocol_cells, "auto", b, variant).value_or(0);
          if (plain) {
            std::printf("; %s %.3f (%+.3f)", variant.c_str(), v, v - *plain);
          } else {
            std::printf("; %s %.3f", variant.c_str(), v);
          }
        }
      }
      std::printf("\n");
    }
  }
  double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - total_start).count();
  std::printf("\ntotal %.1f s on %d threads\n", total, args.threads);
  if (!args.json_out.empty()) std::ofstream(args.json_out) << all.dump(1) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }

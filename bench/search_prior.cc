// What the analytic prior buys the search: a kernel's Space::Estimate (docs/kernels.md "Analytic
// estimates") lets a strategy rank candidates before measuring them. For one kernel, shape and
// target, runs the strategy R seeded times on the space WITH its estimate and on a copy WITHOUT
// it, and reports for each: the median (and worst) number of evaluations until the best measured
// config is within 5% / 1% of a reference optimum, and the score (reference / best found) at
// budgets 10, 30, 100 and 300.
//
//   search_prior --kernel matmul --shape M=4096,N=4096,K=4096 [--dtype bf16] [--target snc2]
//                [--strategy auto] [--runs 20] [--seed 1] [--budget 300]
//                [--cache FILE | --reference-budget N] [--estimate-sample N] [--json]
//
// Times come from the simulator (kernels::Evaluate, memoised across runs) or, with --cache, from
// an exhaustive cache written by bench/space_cache (every valid config; its best is the
// reference). Without a cache the reference is the best of a long search (--reference-budget
// evaluations, default 2000, on the space with its estimate) and of everything the runs saw.
//
// Also reports how good the estimate is as a ranking: over --estimate-sample random valid configs
// (default 300) Spearman's rho between estimate and time, how long the estimate takes per call,
// and, with --cache, over the whole valid space: the estimate's rank of the true optimum, the
// share of the true top 10 / top 100 among the estimate's top 100 / 1000, and the best true time
// among the estimate's top 1, 10, 30, 100 and 300.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/workload_options.h"
#include "fmt/format.h"
#include "kernels/kernel.h"
#include "kernels/rank_correlation.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "search/replay.h"
#include "search/strategy.h"
#include "sim/target.h"

namespace tessel {
namespace {

using Clock = std::chrono::steady_clock;

struct Options : bench::WorkloadOptions {
  std::string strategy = "auto", cache;
  int runs = 20, budget = 300, reference_budget = 2000, estimate_sample = 300;
  uint64_t seed = 1;
  bool json = false;
};

int Usage(const char* error) {
  if (error != nullptr) std::fprintf(stderr, "search_prior: %s\n", error);
  std::fprintf(stderr,
               "usage: search_prior [--kernel K] [--shape DIMS] [--dtype T] [--target T] "
               "[--strategy S] [--runs R] [--seed S] [--budget N] [--cache FILE | "
               "--reference-budget N] [--estimate-sample N] [--json]\n");
  return 2;
}

// Times of configs: from the exhaustive cache, or simulated once and remembered.
class Times {
 public:
  Times(const kernels::Kernel& kernel, const kernels::Problem& problem, const sim::Target& target,
        const search::ReplayCache* cache)
      : kernel_(kernel), problem_(problem), target_(target), cache_(cache) {}

  // The config's time; nullopt when it fails (or is not in the cache).
  std::optional<double> Get(const Config& config) {
    if (cache_ != nullptr) {
      std::optional<uint64_t> index = cache_->IndexOf(config);
      const search::ReplayCache::Entry* e = index ? cache_->Find(*index) : nullptr;
      if (e == nullptr || !e->ok) return std::nullopt;
      return e->time;
    }
    auto it = memo_.find(config);
    if (it != memo_.end()) return it->second;
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(kernel_, problem_, config, target_);
    std::optional<double> t = r.ok() ? std::optional<double>(r->time_ns) : std::nullopt;
    ++simulated_;
    memo_.emplace(config, t);
    if (t) best_seen_ = std::min(best_seen_, *t);
    return t;
  }
  double best_seen() const { return best_seen_; }
  int simulated() const { return simulated_; }

 private:
  const kernels::Kernel& kernel_;
  const kernels::Problem& problem_;
  const sim::Target& target_;
  const search::ReplayCache* cache_;
  absl::flat_hash_map<Config, std::optional<double>> memo_;
  double best_seen_ = std::numeric_limits<double>::infinity();
  int simulated_ = 0;
};

// The best time after each evaluation of one seeded run.
std::vector<double> Run(const kernels::Space& space, const std::string& strategy_name,
                        uint64_t seed, int budget, Times& times) {
  std::vector<double> best_after;
  absl::StatusOr<std::unique_ptr<search::Strategy>> strategy =
      search::MakeStrategy(strategy_name, space, seed);
  if (!strategy.ok()) return best_after;
  double best = std::numeric_limits<double>::infinity();
  while (int(best_after.size()) < budget) {
    std::vector<Config> configs = (*strategy)->Propose(1);
    if (configs.empty()) break;
    std::optional<double> t = times.Get(configs[0]);
    search::Observation o{configs[0], t.has_value(), t.value_or(0)};
    if (t) best = std::min(best, *t);
    best_after.push_back(best);
    (*strategy)->Observe(std::span<const search::Observation>(&o, 1));
  }
  return best_after;
}

// Evaluations until best_after <= goal; nullopt when never.
std::optional<int> EvalsTo(const std::vector<double>& best_after, double goal) {
  for (size_t i = 0; i < best_after.size(); ++i) {
    if (best_after[i] <= goal) return int(i) + 1;
  }
  return std::nullopt;
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using kernels::Spearman;

constexpr int kScoreBudgets[] = {10, 30, 100, 300};

struct Variant {
  std::string name;
  std::vector<std::vector<double>> runs;  // best_after per run
  double seconds = 0;
};

nlohmann::json Summarise(const Variant& v, double reference, int budget) {
  nlohmann::json out = {{"variant", v.name}, {"runs", v.runs.size()}, {"seconds", v.seconds}};
  for (double pct : {5.0, 1.0}) {
    std::vector<double> reached;
    int missed = 0;
    for (const auto& run : v.runs) {
      std::optional<int> n = EvalsTo(run, reference * (1 + pct / 100));
      if (n) {
        reached.push_back(*n);
      } else {
        ++missed;
        reached.push_back(std::numeric_limits<double>::infinity());  // counts as beyond budget
      }
    }
    const std::string key = pct == 5.0 ? "5pct" : "1pct";
    const double median = Median(reached);
    const double worst = *std::max_element(reached.begin(), reached.end());
    out[StrCat("evals_to_", key, "_median")] =
        std::isfinite(median) ? nlohmann::json(median) : nlohmann::json(nullptr);
    out[StrCat("evals_to_", key, "_worst")] =
        std::isfinite(worst) ? nlohmann::json(worst) : nlohmann::json(nullptr);
    out[StrCat("runs_within_", key)] = int(v.runs.size()) - missed;
  }
  nlohmann::json scores = nlohmann::json::object();
  for (int b : kScoreBudgets) {
    if (b > budget) continue;
    std::vector<double> s;
    for (const auto& run : v.runs) {
      if (run.empty()) continue;
      const double best = run[std::min(run.size(), size_t(b)) - 1];
      s.push_back(std::isfinite(best) ? reference / best : 0.0);
    }
    if (s.empty()) continue;
    scores[std::to_string(b)] = {
        {"mean", std::accumulate(s.begin(), s.end(), 0.0) / double(s.size())},
        {"min", *std::min_element(s.begin(), s.end())},
        {"median", Median(s)}};
  }
  out["score_at"] = scores;
  return out;
}

std::string Cell(const nlohmann::json& j) {
  if (j.is_null()) return "not reached";
  const double v = j.get<double>();
  return v == std::floor(v) ? StrCat(int64_t(v)) : fmt::format("{:.1f}", v);
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return Usage(nullptr);
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(StrCat(arg, " needs a value").c_str());
    const std::string v = argv[++i];
    if (o.Take(arg, v)) {
      continue;
    } else if (arg == "--strategy") {
      o.strategy = v;
    } else if (arg == "--runs") {
      o.runs = std::max(1, std::atoi(v.c_str()));
    } else if (arg == "--seed") {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (arg == "--budget") {
      o.budget = std::max(1, std::atoi(v.c_str()));
    } else if (arg == "--cache") {
      o.cache = v;
    } else if (arg == "--reference-budget") {
      o.reference_budget = std::max(0, std::atoi(v.c_str()));
    } else if (arg == "--estimate-sample") {
      o.estimate_sample = std::max(0, std::atoi(v.c_str()));
    } else {
      return Usage(StrCat("unknown option ", arg).c_str());
    }
  }
  absl::StatusOr<bench::Workload> w = bench::ResolveWorkload(o);
  if (!w.ok()) return Usage(std::string(w.status().message()).c_str());
  const kernels::Kernel* kernel = w->kernel;
  const kernels::Problem& problem = w->problem;
  const sim::Target* target = &w->target;
  const kernels::Space* with = &w->space;
  if (!with->has_estimate()) {
    std::fprintf(stderr, "search_prior: %s has no analytic estimate\n", o.kernel.c_str());
    return 1;
  }
  kernels::Space without = *with;
  without.set_estimate(nullptr);

  std::optional<search::ReplayCache> cache;
  if (!o.cache.empty()) {
    absl::StatusOr<search::ReplayCache> c = search::ReplayCache::Load(o.cache);
    if (!c.ok()) {
      std::fprintf(stderr, "search_prior: %s\n", std::string(c.status().message()).c_str());
      return 1;
    }
    cache = std::move(*c);
  }
  Times times(*kernel, problem, *target, cache ? &*cache : nullptr);
  nlohmann::json report = {{"kernel", o.kernel}, {"shape", o.shape},       {"dtype", o.dtype},
                           {"target", o.target}, {"strategy", o.strategy}, {"runs", o.runs},
                           {"budget", o.budget}, {"seed", o.seed}};

  // The estimate as a ranking, on random valid configs.
  {
    std::mt19937_64 rng(o.seed);
    std::vector<double> est, truth;
    double est_seconds = 0;
    int64_t calls = 0;
    for (int attempt = 0; attempt < 1000 * o.estimate_sample && int(est.size()) < o.estimate_sample;
         ++attempt) {
      const Config c = with->Decode(rng() % with->Size());
      if (!with->Validate(c).ok()) continue;
      const auto t0 = Clock::now();
      std::optional<double> e;
      for (int rep = 0; rep < 10; ++rep) e = with->EstimateNs(c);
      est_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      calls += 10;
      std::optional<double> t = times.Get(c);
      if (!e || !t) continue;
      est.push_back(*e);
      truth.push_back(*t);
    }
    report["estimate"] = {{"sample", est.size()},
                          {"spearman", Spearman(est, truth)},
                          {"us_per_call", calls > 0 ? 1e6 * est_seconds / double(calls) : 0.0}};
  }
  // Over the whole valid space, when the cache has it.
  if (cache) {
    std::vector<std::pair<double, double>> all;  // (estimate, time)
    for (uint64_t i = 0; i < with->Size(); ++i) {
      const Config c = with->Decode(i);
      std::optional<double> t = times.Get(c);
      if (!t) continue;
      std::optional<double> e = with->EstimateNs(c);
      if (e) all.push_back({*e, *t});
    }
    std::vector<size_t> by_est(all.size()), by_time(all.size());
    std::iota(by_est.begin(), by_est.end(), size_t(0));
    std::iota(by_time.begin(), by_time.end(), size_t(0));
    std::stable_sort(by_est.begin(), by_est.end(),
                     [&](size_t a, size_t b) { return all[a].first < all[b].first; });
    std::stable_sort(by_time.begin(), by_time.end(),
                     [&](size_t a, size_t b) { return all[a].second < all[b].second; });
    const double best = all.empty() ? 0 : all[by_time[0]].second;
    size_t rank_of_best = 0;
    for (size_t r = 0; r < by_est.size(); ++r) {
      if (by_est[r] == by_time[0]) rank_of_best = r + 1;
    }
    auto overlap = [&](size_t top_true, size_t top_est) {
      std::vector<char> in_est(all.size(), 0);
      for (size_t r = 0; r < std::min(top_est, by_est.size()); ++r) in_est[by_est[r]] = 1;
      size_t hits = 0;
      for (size_t r = 0; r < std::min(top_true, by_time.size()); ++r) hits += in_est[by_time[r]];
      return double(hits) / double(std::min(top_true, by_time.size()));
    };
    nlohmann::json best_in_top = nlohmann::json::object();
    double running = std::numeric_limits<double>::infinity();
    for (size_t r = 0; r < std::min<size_t>(300, by_est.size()); ++r) {
      running = std::min(running, all[by_est[r]].second);
      if (r + 1 == 1 || r + 1 == 10 || r + 1 == 30 || r + 1 == 100 || r + 1 == 300) {
        best_in_top[std::to_string(r + 1)] = best / running;
      }
    }
    report["estimate"]["valid_configs"] = all.size();
    report["estimate"]["rank_of_optimum"] = rank_of_best;
    report["estimate"]["true_top10_in_est_top100"] = overlap(10, 100);
    report["estimate"]["true_top100_in_est_top1000"] = overlap(100, 1000);
    report["estimate"]["score_of_est_top"] = best_in_top;
  }

  std::vector<Variant> variants = {{"with estimate", {}, 0}, {"without estimate", {}, 0}};
  for (Variant& v : variants) {
    const kernels::Space& space = v.name == "with estimate" ? *with : without;
    const auto t0 = Clock::now();
    for (int r = 0; r < o.runs; ++r) {
      v.runs.push_back(Run(space, o.strategy, o.seed + uint64_t(r), o.budget, times));
    }
    v.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  double reference = 0;
  if (cache) {
    reference = cache->best_time();
    report["reference"] = {{"from", "exhaustive cache"}, {"time_ns", reference}};
  } else {
    std::vector<double> long_run =
        o.reference_budget > 0 ? Run(*with, o.strategy, o.seed + 1000003, o.reference_budget, times)
                               : std::vector<double>{};
    reference = times.best_seen();
    report["reference"] = {
        {"from", StrCat("best of a ", o.reference_budget, "-evaluation search and of every run")},
        {"time_ns", reference},
        {"long_search_best_ns", long_run.empty() ? 0.0 : long_run.back()},
        {"simulated_configs", times.simulated()}};
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const Variant& v : variants) rows.push_back(Summarise(v, reference, o.budget));
  report["variants"] = rows;

  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("%s %s %s on %s, %s, %d runs of %d evaluations; reference %.1f ns (%s)\n",
              o.kernel.c_str(), o.shape.c_str(), o.dtype.c_str(), o.target.c_str(),
              o.strategy.c_str(), o.runs, o.budget, reference,
              report["reference"]["from"].get<std::string>().c_str());
  const nlohmann::json& est = report["estimate"];
  std::printf("estimate: Spearman %.3f over %d random valid configs, %.2f us per call\n",
              est["spearman"].get<double>(), est["sample"].get<int>(),
              est["us_per_call"].get<double>());
  if (est.contains("rank_of_optimum")) {
    std::printf(
        "estimate over all %zu valid configs: optimum ranked %zu; true top 10 in estimate's top "
        "100: %.0f%%; true top 100 in top 1000: %.0f%%; best score in the estimate's top 1/10/30/"
        "100/300: %s\n",
        est["valid_configs"].get<size_t>(), est["rank_of_optimum"].get<size_t>(),
        100 * est["true_top10_in_est_top100"].get<double>(),
        100 * est["true_top100_in_est_top1000"].get<double>(),
        [&] {
          std::vector<std::string> s;
          for (const auto& [k, v] : est["score_of_est_top"].items()) {
            s.push_back(fmt::format("{:.3f}", v.get<double>()));
          }
          return StrJoin(s, " / ");
        }()
            .c_str());
  }
  std::printf(
      "\n| %s | evals to 5%%: median (worst) | evals to 1%%: median (worst) | runs within 1%% |",
      "space");
  for (int b : kScoreBudgets) {
    if (b <= o.budget) std::printf(" score at %d: mean (min) |", b);
  }
  std::printf("\n|---|---|---|---|");
  for (int b : kScoreBudgets) {
    if (b <= o.budget) std::printf("---|");
  }
  std::printf("\n");
  for (const nlohmann::json& row : rows) {
    std::printf("| %s | %s (%s) | %s (%s) | %d of %d |", row["variant"].get<std::string>().c_str(),
                Cell(row["evals_to_5pct_median"]).c_str(), Cell(row["evals_to_5pct_worst"]).c_str(),
                Cell(row["evals_to_1pct_median"]).c_str(), Cell(row["evals_to_1pct_worst"]).c_str(),
                row["runs_within_1pct"].get<int>(), o.runs);
    for (int b : kScoreBudgets) {
      const std::string key = std::to_string(b);
      if (!row["score_at"].contains(key)) continue;
      std::printf(" %.3f (%.3f) |", row["score_at"][key]["mean"].get<double>(),
                  row["score_at"][key]["min"].get<double>());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Main(argc, argv); }

// Warm start on the simulator: does tuning a workload after its neighbours (same kernel, other
// shapes) were tuned reach the same result in fewer evaluations?
//
//   search_warm [--kernel matmul] [--shape M=4096,N=4096,K=4096]
//               [--neighbours "M=2048,N=4096,K=4096;M=4096,N=4096,K=2048"] [--target snc2]
//               [--budget 200] [--neighbour-budget 100] [--seeds 20] [--strategy auto]
//
// For each seed: tune each neighbour (budget --neighbour-budget), then tune the workload cold and
// warm (the neighbours' results passed to ObservePrior, one call per neighbour). Reports, over
// seeds, the median number of evaluations to get within 2% and 5% of the best time any run found,
// and to reach the cold runs' median final time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "schema/strings.h"
#include "search/strategy.h"
#include "sim/target.h"

namespace tessel {
namespace {

struct Tuned {
  std::vector<search::Observation> observations;
  std::vector<double> best_after;  // best time after each evaluation
};

Tuned Tune(const kernels::Kernel& kernel, const kernels::Problem& problem,
           const sim::Target& target, const std::string& strategy_name, uint64_t seed, int budget,
           const std::vector<std::vector<search::Observation>>& priors) {
  absl::StatusOr<kernels::Space> space = kernel.SpaceFor(problem, target);
  Tuned tuned;
  if (!space.ok()) return tuned;
  auto strategy = *search::MakeStrategy(strategy_name, *space, seed);
  for (const auto& prior : priors) strategy->ObservePrior(prior);
  double best = std::numeric_limits<double>::infinity();
  while (static_cast<int>(tuned.best_after.size()) < budget) {
    std::vector<Config> configs = strategy->Propose(1);
    if (configs.empty()) break;
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(kernel, problem, configs[0], target);
    search::Observation o{configs[0], r.ok(), r.ok() ? r->time_ns : 0};
    if (o.ok) best = std::min(best, o.time_ns);
    tuned.best_after.push_back(best);
    tuned.observations.push_back(o);
    strategy->Observe(std::span<const search::Observation>(&o, 1));
  }
  return tuned;
}

// Evaluations until best_after <= goal; budget + 1 when never.
int EvalsTo(const std::vector<double>& best_after, double goal) {
  for (size_t i = 0; i < best_after.size(); ++i) {
    if (best_after[i] <= goal) return static_cast<int>(i) + 1;
  }
  return static_cast<int>(best_after.size()) + 1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int Run(int argc, char** argv) {
  std::string kernel_name = "matmul", shape = "M=4096,N=4096,K=4096", target_name = "snc2";
  std::string neighbours = "M=2048,N=4096,K=4096;M=4096,N=4096,K=2048", strategy = "auto";
  int budget = 200, neighbour_budget = 100, seeds = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--kernel")
      kernel_name = value;
    else if (arg == "--shape")
      shape = value;
    else if (arg == "--neighbours")
      neighbours = value;
    else if (arg == "--target")
      target_name = value;
    else if (arg == "--budget")
      budget = std::stoi(value);
    else if (arg == "--neighbour-budget")
      neighbour_budget = std::stoi(value);
    else if (arg == "--seeds")
      seeds = std::stoi(value);
    else if (arg == "--strategy")
      strategy = value;
  }
  const kernels::Kernel* kernel = kernels::FindKernel(kernel_name);
  absl::StatusOr<sim::Target> target = sim::LoadTarget(target_name);
  absl::StatusOr<Dims> dims = Dims::Parse(shape);
  if (kernel == nullptr || !target.ok() || !dims.ok()) {
    std::fprintf(stderr, "search_warm: bad kernel, target or shape\n");
    return 2;
  }
  const kernels::Problem problem{*dims, "bf16"};
  std::vector<kernels::Problem> neighbour_problems;
  for (std::string_view piece : StrSplit(neighbours, ';')) {
    absl::StatusOr<Dims> d = Dims::Parse(piece);
    if (!d.ok()) {
      std::fprintf(stderr, "search_warm: bad neighbour shape\n");
      return 2;
    }
    neighbour_problems.push_back({*d, "bf16"});
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<Tuned> cold, warm;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::vector<std::vector<search::Observation>> priors;
    for (const kernels::Problem& n : neighbour_problems) {
      priors.push_back(
          Tune(*kernel, n, *target, strategy, 1000 + seed, neighbour_budget, {}).observations);
    }
    cold.push_back(Tune(*kernel, problem, *target, strategy, seed, budget, {}));
    warm.push_back(Tune(*kernel, problem, *target, strategy, seed, budget, priors));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> cold_final;
  for (const auto* runs : {&cold, &warm}) {
    for (const Tuned& t : *runs) {
      if (!t.best_after.empty()) best = std::min(best, t.best_after.back());
    }
  }
  for (const Tuned& t : cold) cold_final.push_back(t.best_after.back());
  const double cold_median_final = Median(cold_final);
  std::printf("%s %s on %s, strategy %s, budget %d, %d seeds, neighbours %s (budget %d each)\n",
              kernel_name.c_str(), shape.c_str(), target_name.c_str(), strategy.c_str(), budget,
              seeds, neighbours.c_str(), neighbour_budget);
  std::printf("best found by any run: %.0f ns; cold runs' median final: %.0f ns (%.4f of best)\n",
              best, cold_median_final, best / cold_median_final);
  std::printf("| goal | cold: median evals | warm: median evals | saved |\n|---|---|---|---|\n");
  struct Goal {
    const char* name;
    double time;
  };
  for (const Goal& goal :
       {Goal{"within 5% of best", best * 1.05}, Goal{"within 2% of best", best * 1.02},
        Goal{"cold median final time", cold_median_final}}) {
    std::vector<double> c, w;
    for (const Tuned& t : cold) c.push_back(EvalsTo(t.best_after, goal.time));
    for (const Tuned& t : warm) w.push_back(EvalsTo(t.best_after, goal.time));
    double mc = Median(c), mw = Median(w);
    std::printf("| %s | %g | %g | %.0f%% |\n", goal.name, mc, mw, 100.0 * (1.0 - mw / mc));
  }
  std::printf("(%d = not reached within the budget)\ntook %.1f s\n", budget + 1,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) { return tessel::Run(argc, argv); }

// Evaluations per second of the simulator on random valid 4096^3 bf16 matmul configs (snc2):
// Lower + Simulate per evaluation, as a worker runs them.
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/kernel.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel {
namespace {

// A fixed, seeded sample of valid configs so runs are comparable.
std::vector<Config> ValidConfigs(const kernels::Space& space, int count) {
  std::mt19937_64 rng(2024);
  std::vector<Config> configs;
  while (int(configs.size()) < count) {
    Config c = space.Decode(rng() % space.Size());
    if (space.Validate(c).ok()) configs.push_back(c);
  }
  return configs;
}

void BM_EvaluateMatmul4096(benchmark::State& state) {
  const bool exact = state.range(0) != 0;
  sim::Target target = *sim::LoadTarget("snc2");
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  kernels::Problem problem{Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, "bf16"};
  kernels::Space space = *kernel.SpaceFor(problem, target);
  std::vector<Config> configs = ValidConfigs(space, 64);
  sim::SimOptions options;
  options.exact = exact;
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<sim::SimResult> r =
        kernels::Evaluate(kernel, problem, configs[i++ % configs.size()], target, options);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EvaluateMatmul4096)->Arg(0)->Arg(1)->ArgName("exact")->Unit(benchmark::kMicrosecond);

// The default (plain compiler) config alone: 8192 matmuls, ~25k instructions.
void BM_EvaluateMatmul4096Default(benchmark::State& state) {
  sim::Target target = *sim::LoadTarget("snc2");
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  kernels::Problem problem{Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, "bf16"};
  Config config = kernel.Default(problem, target);
  for (auto _ : state) {
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(kernel, problem, config, target);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EvaluateMatmul4096Default)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessel

BENCHMARK_MAIN();

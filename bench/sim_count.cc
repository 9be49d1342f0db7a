// A fixed amount of simulator work for machine-independent instruction counts: Lower + Simulate of
// sim_bench's 64 seeded random valid 4096^3 bf16 matmul configs on snc2, once each.
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null ./bench/sim_count [--exact]
//
// `--kernel K --shape DIMS --dtype T --target T` name another workload (the same seeded sample of
// its space); `--default` evaluates the kernel's default config `--count` times instead, and
// `--config C` the config C (unnamed params at their defaults).
//
// Run it with `--count 0` too and subtract, to leave out start-up. Prints the sum of the simulated
// times so the work cannot be optimised away (and so two builds can be checked to agree).
// `--estimate` prints the sum of the configs' analytic estimates instead of simulating them.
// `--each` also prints each config's wall time (the cost of a random config is heavy-tailed);
// `--repeat N` evaluates all the configs in turn N times and prints each one's fastest (warm
// scratch buffers and heap, as in a worker that has run a few trials).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/sim_configs.h"
#include "bench/workload_options.h"
#include "kernels/kernel.h"
#include "schema/process.h"
#include "sim/simulate.h"
#include "sim/target.h"

int main(int argc, char** argv) {
  using namespace tessel;
  KeepFreedHeapMemory();  // as tessel-worker does
  sim::SimOptions options;
  int count = 64;
  bool each = false;
  int repeat = 1;
  bool use_default = false;
  bool estimate = false;
  std::string config_text;
  bench::WorkloadOptions workload;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--exact") {
      options.exact = true;
    } else if (arg == "--default") {
      use_default = true;
    } else if (i + 1 < argc && workload.Take(arg, argv[i + 1])) {
      ++i;
    } else if (arg == "--each") {
      each = true;
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--estimate") {
      estimate = true;
    } else if (arg == "--config" && i + 1 < argc) {
      config_text = argv[++i];
    } else if (arg == "--count" && i + 1 < argc) {
      count = std::atoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: sim_count [--kernel K] [--shape DIMS] [--dtype T] [--target T] "
          "[--exact] [--default] [--config C] [--estimate] [--count N] [--each] [--repeat N]\n");
      return 2;
    }
  }
  absl::StatusOr<bench::Workload> w = bench::ResolveWorkload(workload);
  if (!w.ok()) {
    std::fprintf(stderr, "sim_count: %s\n", std::string(w.status().message()).c_str());
    return 2;
  }
  const kernels::Kernel& kernel = *w->kernel;
  const kernels::Problem& problem = w->problem;
  const sim::Target& target = w->target;
  // With --repeat, the configs are evaluated in turn, `repeat` rounds of all of them (as a
  // worker meets them: the previous evaluation was another config's), each keeping its fastest.
  std::vector<Config> configs;
  if (use_default || !config_text.empty()) {
    Config one = kernel.Default(problem, target);
    if (!config_text.empty()) {
      absl::StatusOr<Config> given = Config::Parse(config_text);
      if (!given.ok()) {
        std::fprintf(stderr, "sim_count: --config: %s\n",
                     std::string(given.status().message()).c_str());
        return 2;
      }
      for (const auto& [name, value] : given->items()) one.Set(name, value);
    }
    configs.assign(size_t(std::max(0, count)), one);
  } else {
    configs = bench::ValidConfigs(w->space, count);
  }
  if (estimate) {  // the analytic estimates' sum instead (two builds' estimates agree)
    double sum = 0;
    for (const Config& config : configs) sum += w->space.EstimateNs(config).value_or(0);
    std::printf("%zu configs, sum of the estimates %.6f ns\n", configs.size(), sum);
    return 0;
  }
  std::vector<double> fastest_us(configs.size(), 0);
  double total_ns = 0;
  for (int k = 0; k < repeat; ++k) {
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<sim::SimResult> r =
          kernels::Evaluate(kernel, problem, configs[i], target, options);
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - start;
      fastest_us[i] = k == 0 ? took.count() : std::min(fastest_us[i], took.count());
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", configs[i].ToString().c_str(),
                     std::string(r.status().message()).c_str());
        return 1;
      }
      if (k == 0) total_ns += r->time_ns;
    }
  }
  for (size_t i = 0; each && i < configs.size(); ++i) {
    std::printf("%9.1f us  %s\n", fastest_us[i], configs[i].ToString().c_str());
  }
  std::printf("%d configs, total simulated time %.1f ns\n", count, total_ns);
  return 0;
}

// A fixed amount of simulator work for machine-independent instruction counts: Lower + Simulate of
// sim_bench's 64 seeded random valid 4096^3 bf16 matmul configs on snc2, once each.
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null ./bench/sim_count [--exact]
//
// Run it with `--count 0` too and subtract, to leave out start-up. Prints the sum of the simulated
// times so the work cannot be optimised away (and so two builds can be checked to agree).
// `--each` also prints each config's wall time (the cost of a random config is heavy-tailed).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/sim_configs.h"
#include "kernels/kernel.h"
#include "sim/simulate.h"
#include "sim/target.h"

int main(int argc, char** argv) {
  using namespace tessel;
  sim::SimOptions options;
  int count = 64;
  bool each = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--exact") {
      options.exact = true;
    } else if (arg == "--each") {
      each = true;
    } else if (arg == "--count" && i + 1 < argc) {
      count = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: sim_count [--exact] [--count N] [--each]\n");
      return 2;
    }
  }
  const sim::Target target = *sim::LoadTarget("snc2");
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  const kernels::Problem problem{Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, "bf16"};
  const kernels::Space space = *kernel.SpaceFor(problem, target);
  double total_ns = 0;
  for (const Config& c : bench::ValidConfigs(space, count)) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(kernel, problem, c, target, options);
    if (each) {
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - start;
      std::printf("%9.1f us  %s\n", took.count(), c.ToString().c_str());
    }
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.ToString().c_str(),
                   std::string(r.status().message()).c_str());
      return 1;
    }
    total_ns += r->time_ns;
  }
  std::printf("%d configs, total simulated time %.1f ns\n", count, total_ns);
  return 0;
}

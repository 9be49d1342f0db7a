// The seeded sample of valid configs that the simulator benchmarks evaluate (sim_bench,
// sim_count), so their figures describe the same work.
#ifndef TESSEL_BENCH_SIM_CONFIGS_H_
#define TESSEL_BENCH_SIM_CONFIGS_H_

#include <random>
#include <vector>

#include "kernels/kernel.h"

namespace tessel::bench {

// The first `count` valid configs of a uniform draw (seed 2024) over `space`'s product.
inline std::vector<Config> ValidConfigs(const kernels::Space& space, int count) {
  std::mt19937_64 rng(2024);
  std::vector<Config> configs;
  while (static_cast<int>(configs.size()) < count) {
    Config c = space.Decode(rng() % space.Size());
    if (space.Validate(c).ok()) configs.push_back(c);
  }
  return configs;
}

}  // namespace tessel::bench

#endif  // TESSEL_BENCH_SIM_CONFIGS_H_

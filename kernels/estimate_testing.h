// Test support for the kernels' analytic estimates (header-only, included by *_test.cc only):
// random valid configs of a space, their estimates beside their simulated times, and the rank
// correlation between the two.
#ifndef TESSEL_KERNELS_ESTIMATE_TESTING_H_
#define TESSEL_KERNELS_ESTIMATE_TESTING_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "kernels/rank_correlation.h"
#include "sim/target.h"

namespace tessel::kernels::test_support {

using kernels::Spearman;

// `n` random valid configs of `space` with their estimates and simulated times.
struct EstimateSample {
  std::vector<Config> configs;
  std::vector<double> estimate_ns, sim_ns;
};
inline EstimateSample SampleEstimates(const Kernel& kernel, const Problem& problem,
                                      const sim::Target& target, const Space& space, int n,
                                      uint64_t seed) {
  EstimateSample s;
  std::mt19937_64 rng(seed);
  for (int attempt = 0; attempt < 10000 * n && int(s.configs.size()) < n; ++attempt) {
    Config c = space.Decode(rng() % space.Size());
    if (!space.Validate(c).ok()) continue;
    std::optional<double> e = space.EstimateNs(c);
    EXPECT_TRUE(e.has_value()) << c.ToString();
    absl::StatusOr<sim::SimResult> r = Evaluate(kernel, problem, c, target);
    EXPECT_TRUE(r.ok()) << c.ToString() << ": " << r.status();
    if (!e || !r.ok()) continue;
    s.configs.push_back(std::move(c));
    s.estimate_ns.push_back(*e);
    s.sim_ns.push_back(r->time_ns);
  }
  // TESSEL_ESTIMATE_DUMP=FILE writes the sample (estimate, simulated, config) for inspection.
  if (const char* dump = std::getenv("TESSEL_ESTIMATE_DUMP")) {
    if (FILE* f = std::fopen(dump, "w")) {
      for (size_t i = 0; i < s.configs.size(); ++i) {
        std::fprintf(f, "%.1f %.1f %s\n", s.estimate_ns[i], s.sim_ns[i],
                     s.configs[i].ToString().c_str());
      }
      std::fclose(f);
    }
  }
  return s;
}

// The share of the `k` fastest simulated configs that are among the `k` lowest estimates.
inline double TopKOverlap(const EstimateSample& s, size_t k) {
  std::vector<size_t> by_sim(s.sim_ns.size()), by_est(s.sim_ns.size());
  std::iota(by_sim.begin(), by_sim.end(), size_t(0));
  std::iota(by_est.begin(), by_est.end(), size_t(0));
  std::sort(by_sim.begin(), by_sim.end(),
            [&](size_t a, size_t b) { return s.sim_ns[a] < s.sim_ns[b]; });
  std::sort(by_est.begin(), by_est.end(),
            [&](size_t a, size_t b) { return s.estimate_ns[a] < s.estimate_ns[b]; });
  k = std::min(k, s.sim_ns.size());
  size_t hits = 0;
  for (size_t i = 0; i < k; ++i) {
    hits += std::find(by_est.begin(), by_est.begin() + ptrdiff_t(k), by_sim[i]) !=
            by_est.begin() + ptrdiff_t(k);
  }
  return k > 0 ? double(hits) / double(k) : 0.0;
}

// Expects `s`'s estimate to rank its configs as the simulator does (Spearman above
// `min_spearman`), and a constant or a random estimate not to, so that the bound means something.
inline void ExpectRanksAbove(const EstimateSample& s, double min_spearman) {
  EXPECT_GT(Spearman(s.estimate_ns, s.sim_ns), min_spearman);
  std::vector<double> constant(s.sim_ns.size(), 1.0), random(s.sim_ns.size());
  std::mt19937_64 rng(7);
  for (double& x : random) x = double(rng() % 1000000);
  EXPECT_LE(Spearman(constant, s.sim_ns), min_spearman);
  EXPECT_LE(Spearman(random, s.sim_ns), min_spearman);
}

// One kernel's ranking check: `samples` random valid configs (seed 13) of `dims` (bf16) on
// `target`, whose estimates must rank as the simulator does with Spearman's rho >= min_spearman
// (measured, see the tests' comments, with a margin).
struct RankCase {
  const Kernel* kernel;
  const char* target;
  Dims dims;
  int samples;
  double min_spearman;
};

// Runs `c` (ExpectRanksAbove on its sample), printing the estimate's cost per call, rho and the
// top-10% overlap.
inline void ExpectEstimateRanks(const RankCase& c) {
  const sim::Target t = Load(c.target);
  const Problem p{c.dims, "bf16"};
  absl::StatusOr<Space> space = c.kernel->SpaceFor(p, t);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_TRUE(space->has_estimate());
  const auto t0 = std::chrono::steady_clock::now();
  const EstimateSample s = SampleEstimates(*c.kernel, p, t, *space, c.samples, 13);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(int(s.configs.size()), c.samples);
  {
    const auto e0 = std::chrono::steady_clock::now();
    for (const Config& config : s.configs) (void)space->EstimateNs(config);
    const double us = 1e6 *
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count() /
                      double(s.configs.size());
    std::printf("  estimate: %.1f us per call\n", us);
  }
  const double rho = Spearman(s.estimate_ns, s.sim_ns);
  std::printf("%s %s %s: spearman %.3f, top-10%% overlap %.2f (%.1f s)\n", c.kernel->name().data(),
              c.target, c.dims.ToString().c_str(), rho, TopKOverlap(s, size_t(c.samples / 10)),
              secs);
  SCOPED_TRACE(std::string(c.kernel->name()) + " " + c.target);
  ExpectRanksAbove(s, c.min_spearman);
}

}  // namespace tessel::kernels::test_support

#endif  // TESSEL_KERNELS_ESTIMATE_TESTING_H_

// Test support for the kernels' analytic estimates (header-only, included by *_test.cc only):
// random valid configs of a space, their estimates beside their simulated times, and the rank
// correlation between the two.
#ifndef TESSEL_KERNELS_ESTIMATE_TESTING_H_
#define TESSEL_KERNELS_ESTIMATE_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "sim/target.h"

namespace tessel::kernels::test_support {

// Ranks of `x` (0-based, ties get their mean rank).
inline std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = 0.5 * double(i + j);
    i = j + 1;
  }
  return rank;
}

// Spearman's rank correlation of `a` and `b` (same length): the Pearson correlation of their
// ranks. 0 when either is constant.
inline double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = double(ra.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

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

}  // namespace tessel::kernels::test_support

#endif  // TESSEL_KERNELS_ESTIMATE_TESTING_H_

// Rank correlation, for judging an estimate as a ranking (tests and bench/search_prior).
#ifndef TESSEL_KERNELS_RANK_CORRELATION_H_
#define TESSEL_KERNELS_RANK_CORRELATION_H_

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tessel::kernels {

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

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_RANK_CORRELATION_H_

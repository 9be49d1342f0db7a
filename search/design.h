// Initial designs: where a search looks before it has learned anything.
#ifndef TESSEL_SEARCH_DESIGN_H_
#define TESSEL_SEARCH_DESIGN_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "search/space.h"

namespace tessel::search {

// Distance between two points for space filling: per parameter, the difference of the values'
// ranks scaled to [0, 1] for numeric parameters (integer, power of two), 0 or 1 (same value or
// not) for categorical and permutation ones; summed over parameters. Ranks, not feature
// differences, so that a parameter with one outlying value still spreads points over all values.
class DesignMetric {
 public:
  // `space` must outlive the metric.
  explicit DesignMetric(const SearchSpace& space);
  double operator()(uint64_t a, uint64_t b) const;

  // For many distances from the same points: a point's rank per parameter, appended to `out`
  // (num_params values), and the distance between two such rank rows. Distance(ranks of a,
  // ranks of b) equals (*this)(a, b) to the last bit; it skips decoding the points' values.
  void AppendRanks(uint64_t point, std::vector<int>& out) const;
  double Distance(const int* a, const int* b) const;
  // Smallest distance from `point` to any of `others`; +inf when `others` is empty.
  template <typename Range>
  double Closest(uint64_t point, const Range& others) const {
    double closest = std::numeric_limits<double>::infinity();
    for (uint64_t other : others) closest = std::min(closest, (*this)(point, other));
    return closest;
  }

 private:
  const SearchSpace& space_;
  std::vector<std::vector<int>> ranks_;  // per parameter, per value index
  std::vector<double> scale_;            // per parameter: 1/(radix-1) if numeric, else 0
};

// A space-filling design of at most `n` distinct valid points for which `usable` holds (the
// caller passes "not seen"). It is a maximin Latin hypercube over the parameters' value ranks:
// each parameter's values are split into `n` equal strata and every stratum is used once (a
// parameter with fewer than `n` values has each value floor(n/radix) or ceil(n/radix) times); of
// several such designs drawn at random the one whose closest two points are farthest apart is kept.
// A target point that is not usable (it breaks a constraint, or was seen) is replaced by the
// closest usable point among its valid neighbours and a few random draws, or dropped when none is
// found, so the result can be shorter than `n`. Deterministic for a given `rng` state.
std::vector<uint64_t> SpaceFillingDesign(const SearchSpace& space, int n, std::mt19937_64& rng,
                                         const std::function<bool(uint64_t)>& usable);

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_DESIGN_H_

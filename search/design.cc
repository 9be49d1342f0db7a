#include "search/design.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_set.h"

namespace tessel::search {
namespace {

// Latin hypercubes drawn per design; the most spread out one is kept.
constexpr int kCandidateDesigns = 16;
// Random draws per target point that is not usable, on top of its valid neighbours.
constexpr int kRepairDraws = 64;

bool Numeric(const SearchSpace& space, int param) {
  return space.kind(param) == ParamKind::kInteger || space.kind(param) == ParamKind::kPowerOfTwo;
}

// Value indices of `param` in rank order: by feature for numeric parameters, as listed otherwise.
std::vector<int> RankOrder(const SearchSpace& space, int param) {
  std::vector<int> order(space.radix(param));
  std::iota(order.begin(), order.end(), 0);
  if (Numeric(space, param)) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return space.Feature(param, a) < space.Feature(param, b);
    });
  }
  return order;
}

// Rank of each value index of `param` (inverse of RankOrder).
std::vector<int> Ranks(const SearchSpace& space, int param) {
  std::vector<int> order = RankOrder(space, param), rank(order.size());
  for (int r = 0; r < static_cast<int>(order.size()); ++r) rank[order[r]] = r;
  return rank;
}

}  // namespace

DesignMetric::DesignMetric(const SearchSpace& space) : space_(space) {
  for (int p = 0; p < space.num_params(); ++p) {
    ranks_.push_back(Ranks(space, p));
    scale_.push_back(Numeric(space, p) && space.radix(p) > 1 ? 1.0 / (space.radix(p) - 1) : 0.0);
  }
}

double DesignMetric::operator()(uint64_t a, uint64_t b) const {
  double d = 0;
  for (int p = 0; p < space_.num_params(); ++p) {
    int va = space_.ValueAt(a, p), vb = space_.ValueAt(b, p);
    if (va == vb) continue;
    d += scale_[p] > 0 ? std::abs(ranks_[p][va] - ranks_[p][vb]) * scale_[p] : 1.0;
  }
  return d;
}

void DesignMetric::AppendRanks(uint64_t point, std::vector<int>& out) const {
  for (int p = 0; p < space_.num_params(); ++p) out.push_back(ranks_[p][space_.ValueAt(point, p)]);
}

double DesignMetric::Distance(const int* a, const int* b) const {
  // The same sum as operator(), in the same order: ranks are a permutation of the value
  // indices, so equal ranks mean equal values.
  double d = 0;
  for (size_t p = 0; p < scale_.size(); ++p) {
    if (a[p] == b[p]) continue;
    d += scale_[p] > 0 ? std::abs(a[p] - b[p]) * scale_[p] : 1.0;
  }
  return d;
}

std::vector<uint64_t> SpaceFillingDesign(const SearchSpace& space, int n, std::mt19937_64& rng,
                                         const std::function<bool(uint64_t)>& usable) {
  std::vector<uint64_t> out;
  if (n <= 0 || space.size() == 0) return out;
  const int params = space.num_params();
  const DesignMetric distance(space);
  std::vector<std::vector<int>> orders(params);
  for (int p = 0; p < params; ++p) orders[p] = RankOrder(space, p);

  // Candidate Latin hypercubes as lists of target points; keep the maximin one.
  std::vector<uint64_t> targets;
  double best_spread = -1;
  for (int c = 0; c < kCandidateDesigns; ++c) {
    std::vector<uint64_t> points(n, 0);
    for (int p = 0; p < params; ++p) {
      const int radix = space.radix(p);
      std::vector<int> levels(n);
      if (radix >= n) {
        // Stratum i of n over the ranks [0, radix), one rank drawn inside it.
        for (int i = 0; i < n; ++i) {
          double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
          levels[i] = orders[p][std::min(radix - 1, static_cast<int>((i + u) * radix / n))];
        }
      } else {
        // Fewer values than points: each value floor(n/radix) or ceil(n/radix) times, which
        // values get the extra point chosen by a random offset.
        const int offset = std::uniform_int_distribution<int>(0, radix - 1)(rng);
        for (int i = 0; i < n; ++i) levels[i] = orders[p][(i * radix + offset) / n];
      }
      std::shuffle(levels.begin(), levels.end(), rng);
      for (int i = 0; i < n; ++i) points[i] = space.WithValue(points[i], p, levels[i]);
    }
    double spread = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        spread = std::min(spread, distance(points[i], points[j]));
      }
    }
    if (spread > best_spread) {
      best_spread = spread;
      targets = std::move(points);
    }
  }

  // Repair: each target, or the usable point closest to it.
  absl::flat_hash_set<uint64_t> taken;
  auto ok = [&](uint64_t i) { return space.Valid(i) && !taken.contains(i) && usable(i); };
  std::uniform_int_distribution<uint64_t> pick(0, space.size() - 1);
  for (uint64_t target : targets) {
    std::optional<uint64_t> chosen;
    if (ok(target)) {
      chosen = target;
    } else {
      std::vector<uint64_t> candidates = space.Neighbours(target, 1);
      if (candidates.empty()) candidates = space.Neighbours(target, 2);
      for (int draw = 0; draw < kRepairDraws; ++draw) candidates.push_back(pick(rng));
      double closest = std::numeric_limits<double>::infinity();
      for (uint64_t candidate : candidates) {
        if (!ok(candidate)) continue;
        double d = distance(target, candidate);
        if (d < closest) {
          closest = d;
          chosen = candidate;
        }
      }
    }
    if (!chosen) continue;
    taken.insert(*chosen);
    out.push_back(*chosen);
  }
  return out;
}

}  // namespace tessel::search

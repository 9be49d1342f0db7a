#include "search/design.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tessel::search {
namespace {

std::vector<std::string> Numbers(int from, int count, int step) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(std::to_string(from + i * step));
  return out;
}

// 16 x 11 x 4 x 3 = 2112 points, no constraint.
kernels::Space OpenSpace() {
  return kernels::Space({{"block", Numbers(32, 16, 32), ""},
                         {"tile", Numbers(1, 11, 2), ""},
                         {"method", {"a", "b", "c", "d"}, ""},
                         {"order", {"mnk", "mkn", "nmk"}, ""}},
                        [](const Config&) { return absl::OkStatus(); });
}

// The same, valid only when block * tile <= 2048 (about half the points).
kernels::Space ConstrainedSpace() {
  kernels::Space open = OpenSpace();
  return kernels::Space(open.params(), [](const Config& config) -> absl::Status {
    if (*config.GetInt("block") * *config.GetInt("tile") > 2048) {
      return absl::InvalidArgumentError("block * tile > 2048");
    }
    return absl::OkStatus();
  });
}

TEST(DesignMetricTest, NumericParamsByRankCategoricalByMismatch) {
  kernels::Space space = OpenSpace();
  SearchSpace search(space);
  DesignMetric distance(search);
  uint64_t origin = 0;
  EXPECT_EQ(distance(origin, origin), 0);
  // block: 15 steps of 15 is 1; tile: 5 steps of 10 is 0.5; method: another value is 1.
  EXPECT_DOUBLE_EQ(distance(origin, search.WithValue(origin, 0, 15)), 1.0);
  EXPECT_DOUBLE_EQ(distance(origin, search.WithValue(origin, 1, 5)), 0.5);
  EXPECT_DOUBLE_EQ(distance(origin, search.WithValue(origin, 2, 3)), 1.0);
  EXPECT_DOUBLE_EQ(distance(origin, search.WithValue(origin, 2, 1)), 1.0);
  uint64_t far = search.WithValue(search.WithValue(origin, 0, 15), 3, 2);
  EXPECT_DOUBLE_EQ(distance(origin, far), 2.0);
  EXPECT_DOUBLE_EQ(distance(far, origin), 2.0);
}

TEST(DesignMetricTest, DistanceOfRanksEqualsTheDistanceOfPointsToTheLastBit) {
  kernels::Space space = OpenSpace();
  SearchSpace search(space);
  DesignMetric distance(search);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> pick(0, search.size() - 1);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t a = pick(rng), b = pick(rng);
    std::vector<int> ranks;
    distance.AppendRanks(a, ranks);
    distance.AppendRanks(b, ranks);
    ASSERT_EQ(ranks.size(), 2u * search.num_params());
    EXPECT_EQ(distance.Distance(ranks.data(), ranks.data() + search.num_params()), distance(a, b))
        << a << " " << b;
  }
}

TEST(SpaceFillingDesignTest, IsALatinHypercubeWithoutRepeats) {
  kernels::Space space = OpenSpace();
  SearchSpace search(space);
  std::mt19937_64 rng(3);
  const int n = 16;
  std::vector<uint64_t> design = SpaceFillingDesign(search, n, rng, [](uint64_t) { return true; });
  ASSERT_EQ(static_cast<int>(design.size()), n);
  EXPECT_EQ(std::set<uint64_t>(design.begin(), design.end()).size(), design.size());
  // block has exactly n values: each once. tile (11), method (4), order (3): each value
  // floor(n/radix) or ceil(n/radix) times.
  std::vector<std::vector<int>> counts(search.num_params());
  for (int p = 0; p < search.num_params(); ++p) counts[p].assign(search.radix(p), 0);
  for (uint64_t point : design) {
    for (int p = 0; p < search.num_params(); ++p) ++counts[p][search.ValueAt(point, p)];
  }
  for (int c : counts[0]) EXPECT_EQ(c, 1);
  for (int c : counts[1]) EXPECT_TRUE(c == 1 || c == 2) << c;
  for (int c : counts[2]) EXPECT_EQ(c, 4);
  for (int c : counts[3]) EXPECT_TRUE(c == 5 || c == 6) << c;
}

TEST(SpaceFillingDesignTest, OnlyUsableValidPointsAndTheSameSeedGivesTheSameDesign) {
  kernels::Space space = ConstrainedSpace();
  SearchSpace search(space);
  // Not usable: every point with method "a" (as if seen).
  auto usable = [&](uint64_t i) { return search.ValueAt(i, 2) != 0; };
  std::mt19937_64 rng(7), same(7), other(8);
  std::vector<uint64_t> design = SpaceFillingDesign(search, 12, rng, usable);
  EXPECT_GE(design.size(), 10u);  // repairs find a usable point nearly always here
  EXPECT_LE(design.size(), 12u);
  EXPECT_EQ(std::set<uint64_t>(design.begin(), design.end()).size(), design.size());
  for (uint64_t point : design) {
    EXPECT_TRUE(search.Valid(point)) << search.ToConfig(point).ToString();
    EXPECT_TRUE(usable(point)) << search.ToConfig(point).ToString();
  }
  EXPECT_EQ(SpaceFillingDesign(search, 12, same, usable), design);
  EXPECT_NE(SpaceFillingDesign(search, 12, other, usable), design);
}

TEST(SpaceFillingDesignTest, SpreadsWiderThanRandomPoints) {
  kernels::Space space = OpenSpace();
  SearchSpace search(space);
  DesignMetric distance(search);
  auto spread = [&](const std::vector<uint64_t>& points) {
    double closest = 1e9;
    for (size_t i = 0; i < points.size(); ++i) {
      for (size_t j = i + 1; j < points.size(); ++j) {
        closest = std::min(closest, distance(points[i], points[j]));
      }
    }
    return closest;
  };
  // Mean closest-pair distance over seeds: the design against uniform random points.
  double design_spread = 0, random_spread = 0;
  const int seeds = 20;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed);
    design_spread += spread(SpaceFillingDesign(search, 8, rng, [](uint64_t) { return true; }));
    std::vector<uint64_t> random;
    std::uniform_int_distribution<uint64_t> pick(0, search.size() - 1);
    while (random.size() < 8) random.push_back(pick(rng));
    random_spread += spread(random);
  }
  EXPECT_GT(design_spread, 1.5 * random_spread)
      << design_spread / seeds << " vs " << random_spread / seeds;
}

TEST(SpaceFillingDesignTest, EmptyForNoPointsAndShortWhenTooFewAreUsable) {
  kernels::Space space = OpenSpace();
  SearchSpace search(space);
  std::mt19937_64 rng(1);
  EXPECT_TRUE(SpaceFillingDesign(search, 0, rng, [](uint64_t) { return true; }).empty());
  // Only two usable points: the design cannot be longer.
  auto two = [](uint64_t i) { return i == 5 || i == 700; };
  std::vector<uint64_t> design = SpaceFillingDesign(search, 8, rng, two);
  EXPECT_LE(design.size(), 2u);
  for (uint64_t point : design) EXPECT_TRUE(two(point));
}

}  // namespace
}  // namespace tessel::search

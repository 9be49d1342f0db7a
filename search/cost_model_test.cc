#include "search/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "search/omp_inline.h"

namespace tessel::search {
namespace {

// Rows of `features` values drawn from a few levels (as search features are), some missing.
std::vector<float> Rows(int rows, int features, double missing, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> level(0, 7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x;
  for (int i = 0; i < rows * features; ++i) {
    x.push_back(u(rng) < missing ? NAN : static_cast<float>(level(rng)) * 0.37f);
  }
  return x;
}

TEST(CostModelTest, ItsScoresAreXgboostsToTheLastBit) {
  for (const char* method : {"exact", "hist"}) {
    for (uint64_t seed : {1, 2, 3}) {
      std::mt19937_64 rng(seed);
      constexpr int kFeatures = 9;
      const std::vector<float> x = Rows(300, kFeatures, seed == 3 ? 0.1 : 0, rng);
      std::vector<float> labels;
      for (int i = 0; i < 300; ++i) {
        const float* row = &x[static_cast<size_t>(i) * kFeatures];
        const float v = row[0] * 3 + row[1] * row[2];
        labels.push_back(std::isnan(v) ? 0.0f : std::floor(std::fmod(std::fabs(v), 31.0f)));
      }
      CostModel model(kFeatures, seed, 30, method);
      ASSERT_TRUE(model.Fit(x, labels, {200, 100}));
      ASSERT_TRUE(model.flat())
          << "the trees were not copied: this would compare XGBoost to itself";
      const std::vector<float> asked = Rows(2000, kFeatures, 0.05, rng);
      const std::vector<float> mine = model.Predict(asked);
      const std::vector<float> theirs = model.PredictWithXgboost(asked);
      ASSERT_EQ(mine.size(), 2000u);
      ASSERT_EQ(theirs.size(), 2000u);
      int differ = 0;
      float spread_low = mine[0], spread_high = mine[0];
      for (size_t i = 0; i < mine.size(); ++i) {
        differ += std::memcmp(&mine[i], &theirs[i], sizeof(float)) != 0;
        spread_low = std::min(spread_low, mine[i]);
        spread_high = std::max(spread_high, mine[i]);
      }
      EXPECT_EQ(differ, 0) << method << " seed " << seed;
      EXPECT_LT(spread_low, spread_high) << "a model that scores everything alike tests nothing";
    }
  }
}

// XGBoost's single-thread OpenMP regions run inline (omp_inline.cc): the fit must reach that
// definition, and give the same model as through libgomp.
TEST(CostModelTest, InlinedSingleThreadRegionsFitTheSameModel) {
  std::mt19937_64 rng(7);
  constexpr int kFeatures = 6;
  const std::vector<float> x = Rows(250, kFeatures, 0.05, rng);
  std::vector<float> labels;
  for (int i = 0; i < 250; ++i) labels.push_back(float(i % 17));
  const std::vector<float> asked = Rows(1000, kFeatures, 0.05, rng);
  std::vector<float> scores[2];
  long inlined[2] = {};
  for (int on = 0; on < 2; ++on) {
    SetOmpRegionsInline(on == 1);
    const long before = OmpRegionsInlined();
    CostModel model(kFeatures, 5, 20, "exact");
    ASSERT_TRUE(model.Fit(x, labels, {150, 100}));
    inlined[on] = OmpRegionsInlined() - before;
    scores[on] = model.Predict(asked);
  }
  SetOmpRegionsInline(true);
  EXPECT_EQ(inlined[0], 0);
  EXPECT_GT(inlined[1], 100) << "libxgboost's GOMP_parallel calls do not reach omp_inline.cc";
  ASSERT_EQ(scores[0].size(), asked.size() / kFeatures);
  EXPECT_EQ(std::memcmp(scores[0].data(), scores[1].data(), scores[0].size() * sizeof(float)), 0);
}

TEST(CostModelTest, WithoutAFitThereAreNoScores) {
  CostModel model(3, 1, 30, "exact");
  EXPECT_TRUE(model.Predict({1, 2, 3}).empty());
}

}  // namespace
}  // namespace tessel::search

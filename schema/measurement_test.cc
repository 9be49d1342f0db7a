#include "schema/measurement.h"

#include "gtest/gtest.h"

namespace tessel {
namespace {

TEST(MedianTest, OddCountIsTheMiddleSample) { EXPECT_EQ(Median({5, 1, 3}), 3); }
TEST(MedianTest, EvenCountIsTheMeanOfTheMiddleTwo) { EXPECT_EQ(Median({4, 1, 3, 2}), 2.5); }
TEST(MedianTest, NoSamplesIsZero) { EXPECT_EQ(Median({}), 0); }

TEST(MedianTest, MiddleValueOrMeanOfTheMiddleTwo) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_EQ(Median({9, 1, 5}), 5);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({0.1, 0.2}), (0.1 + 0.2) / 2);
}

TEST(PlausibleNoiseFloorTest, OneWithoutNoiseAndNeverBelowTheSimulatorsClamp) {
  EXPECT_EQ(PlausibleNoiseFloor(0), 1);
  EXPECT_EQ(PlausibleNoiseFloor(-1), 1);
  EXPECT_DOUBLE_EQ(PlausibleNoiseFloor(0.05), 0.7);
  EXPECT_EQ(PlausibleNoiseFloor(0.5), 0.5);
}

TEST(MediansAgreeTest, ExactWithoutNoiseWithinSixSigmaOfTheDifferenceWithNoise) {
  EXPECT_TRUE(MediansAgree(1000, 1000, 0, 1));
  EXPECT_FALSE(MediansAgree(1000, 1000.01, 0, 1));
  EXPECT_FALSE(MediansAgree(700, 1000, 0, 1));
  // sigma 0.05, medians of 5: tolerance 6 * sqrt(2) * 1.2533 * 0.05 / sqrt(5) = 0.238.
  EXPECT_TRUE(MediansAgree(1000, 1200, 0.05, 5));
  EXPECT_FALSE(MediansAgree(1000, 1300, 0.05, 5));
  EXPECT_FALSE(MediansAgree(700, 1000, 0.05, 5));  // a 30% too fast report
  EXPECT_FALSE(MediansAgree(0, 1000, 0.05, 5));
  EXPECT_FALSE(MediansAgree(1000, 3000, 0.9, 1));  // never more than a factor of 2
}

TEST(EstimateTimeTest, MedianAndAConfidenceIntervalThatShrinksWithMoreSamples) {
  const TimeEstimate none = EstimateTime({});
  EXPECT_EQ(none.samples, 0);
  EXPECT_EQ(none.ci_ns, 0);
  const TimeEstimate same = EstimateTime({100, 100, 100});
  EXPECT_EQ(same.median_ns, 100);
  EXPECT_EQ(same.ci_ns, 0);
  const TimeEstimate few = EstimateTime({90, 100, 110, 100});
  const TimeEstimate many =
      EstimateTime({90, 100, 110, 100, 90, 100, 110, 100, 90, 100, 110, 100, 90, 100, 110, 100});
  EXPECT_EQ(few.median_ns, 100);
  EXPECT_GT(few.ci_ns, 0);
  EXPECT_NEAR(many.ci_ns, few.ci_ns / 2, few.ci_ns * 0.1) << "4x the samples, about half the CI";
  EXPECT_NEAR(RelativeSpread({90, 100, 110, 100}), 0.0816, 1e-3);
  EXPECT_EQ(RelativeSpread({5}), 0);
}

TEST(TrimmedMeanTest, DropsTheExtremesAndItsErrorShrinksWithMoreSamples) {
  EXPECT_EQ(TrimmedMean({}).mean_ns, 0);
  EXPECT_EQ(TrimmedMean({100}).se_ns, 0);
  // 10 samples: one dropped at each end, so a single slow outlier does not move the mean.
  const Location robust = TrimmedMean({100, 100, 100, 100, 100, 100, 100, 100, 100, 5000});
  EXPECT_EQ(robust.mean_ns, 100);
  EXPECT_EQ(robust.se_ns, 0);
  std::vector<double> few, many;
  for (int i = 0; i < 10; ++i) few.push_back(90 + 20 * (i % 2));
  for (int i = 0; i < 40; ++i) many.push_back(90 + 20 * (i % 2));
  EXPECT_NEAR(TrimmedMean(few).mean_ns, 100, 1e-9);
  EXPECT_GT(TrimmedMean(few).se_ns, 0);
  EXPECT_NEAR(TrimmedMean(many).se_ns, TrimmedMean(few).se_ns / 2, TrimmedMean(few).se_ns * 0.1)
      << "4x the samples, about half the standard error";
}

TEST(StillRacingTest, AConfigLeavesOnlyWhenItsIntervalLiesWhollyAboveTheLeaders) {
  EXPECT_TRUE(StillRacing({}).empty());
  // Leader 100 +- 1.96 * 2 = [96.1, 103.9]; 106 +- 3.9 overlaps it, 110 +- 3.9 does not.
  const std::vector<bool> racing = StillRacing({{106, 2}, {100, 2}, {110, 2}});
  EXPECT_EQ(racing, (std::vector<bool>{true, true, false}));
  // Without spread, any difference separates.
  EXPECT_EQ(StillRacing({{100, 0}, {100.5, 0}}), (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace tessel

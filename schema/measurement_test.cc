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

}  // namespace
}  // namespace tessel

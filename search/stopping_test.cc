#include "search/stopping.h"

#include <gtest/gtest.h>

namespace tessel::search {
namespace {

using std::chrono::milliseconds;

TEST(StopTrackerTest, NoLimitsNeverStops) {
  StopTracker tracker(StopRule{});
  for (int i = 0; i < 1000; ++i) tracker.Record(true, 100.0 - i * 0.01);
  EXPECT_EQ(tracker.Check(), StopReason::kNone);
  EXPECT_EQ(tracker.evaluations(), 1000);
}

TEST(StopTrackerTest, BudgetCountsFailedEvaluations) {
  StopTracker tracker(StopRule{.max_evaluations = 3});
  tracker.Record(false, 0);
  tracker.Record(true, 5);
  EXPECT_EQ(tracker.Check(), StopReason::kNone);
  tracker.Record(false, 0);
  EXPECT_EQ(tracker.Check(), StopReason::kBudget);
}

TEST(StopTrackerTest, NoImprovementResetsOnABetterResult) {
  StopTracker tracker(StopRule{.no_improvement = 2});
  tracker.Record(true, 10);
  tracker.Record(true, 11);
  EXPECT_EQ(tracker.Check(), StopReason::kNone);
  tracker.Record(true, 9);  // better: the count restarts
  tracker.Record(false, 0);
  EXPECT_EQ(tracker.Check(), StopReason::kNone);
  tracker.Record(true, 9);  // equal is not better
  EXPECT_EQ(tracker.Check(), StopReason::kNoImprovement);
}

TEST(StopTrackerTest, TargetReachedWinsOverOtherLimits) {
  StopTracker tracker(StopRule{.max_evaluations = 2, .target_time_ns = 50});
  tracker.Record(true, 60);
  tracker.Record(true, 50);
  EXPECT_EQ(tracker.Check(), StopReason::kTargetReached);
  EXPECT_EQ(tracker.best_time_ns(), 50);
}

TEST(StopTrackerTest, TimeLimitUsesTheGivenClock) {
  auto start = StopTracker::Clock::now();
  StopTracker tracker(StopRule{.time_limit = milliseconds(100)}, start);
  EXPECT_EQ(tracker.Check(start + milliseconds(99)), StopReason::kNone);
  EXPECT_EQ(tracker.Check(start + milliseconds(100)), StopReason::kTimeLimit);
  EXPECT_EQ(StopReasonName(StopReason::kTimeLimit), "time_limit");
}

}  // namespace
}  // namespace tessel::search

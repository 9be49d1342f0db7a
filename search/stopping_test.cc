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

TEST(EffortPresetTest, EachPresetIsFoundByItsNameAndUnknownNamesAreNot) {
  for (const EffortPreset& preset : kEffortPresets) {
    const EffortPreset* found = FindEffortPreset(preset.name);
    ASSERT_NE(found, nullptr) << preset.name;
    EXPECT_EQ(found, &preset);
    EXPECT_FALSE(preset.summary.empty()) << preset.name << " needs its --help line";
  }
  EXPECT_EQ(FindEffortPreset("Quick"), nullptr);
  EXPECT_EQ(FindEffortPreset(""), nullptr);
  EXPECT_EQ(EffortPresetNames(), "quick, default, full");
}

TEST(EffortPresetTest, TheDefaultPresetIsTheOldDefaultAndEffortBuysTrials) {
  // `tessel tune` without --effort ran 64 trials with no early stop before presets existed.
  const EffortPreset* standard = FindEffortPreset(kDefaultEffort);
  ASSERT_NE(standard, nullptr);
  EXPECT_EQ(standard->budget, 64);
  EXPECT_EQ(standard->no_improvement, 0);
  const EffortPreset* quick = FindEffortPreset("quick");
  const EffortPreset* full = FindEffortPreset("full");
  ASSERT_NE(quick, nullptr);
  ASSERT_NE(full, nullptr);
  EXPECT_LT(quick->budget, standard->budget);
  EXPECT_GT(full->budget, standard->budget);
  // An early stop may end a preset before its budget, never demand more than it.
  for (const EffortPreset& preset : kEffortPresets) {
    EXPECT_GT(preset.budget, 0) << preset.name;
    EXPECT_LT(preset.no_improvement, preset.budget) << preset.name;
  }
}

}  // namespace
}  // namespace tessel::search

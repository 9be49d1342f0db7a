// Tests for the shared vocabulary: every enum value round-trips through its string and proto form.
#include "schema/vocab.h"

#include <gtest/gtest.h>

#include <string>

namespace tessel {
namespace {

TEST(VocabTest, JobStatesRoundTripThroughTheirStoreNamesAndProtos) {
  const JobState all[] = {JobState::kQueued, JobState::kRunning, JobState::kCompleted,
                          JobState::kCancelled, JobState::kFailed};
  const char* names[] = {"queued", "running", "completed", "cancelled", "failed"};
  const v1::JobState protos[] = {v1::JOB_QUEUED, v1::JOB_RUNNING, v1::JOB_COMPLETED,
                                 v1::JOB_CANCELLED, v1::JOB_FAILED};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(JobStateName(all[i]), names[i]);
    EXPECT_EQ(ParseJobState(names[i]), all[i]);
    EXPECT_EQ(ToProto(all[i]), protos[i]);
    EXPECT_EQ(JobStateFromProto(protos[i]), all[i]);
  }
  EXPECT_FALSE(ParseJobState("Queued").has_value());
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_FALSE(JobStateFromProto(v1::JOB_STATE_UNSPECIFIED).has_value());
}

TEST(VocabTest, OnlyCompletedCancelledAndFailedAreFinal) {
  EXPECT_FALSE(IsFinal(JobState::kQueued));
  EXPECT_FALSE(IsFinal(JobState::kRunning));
  EXPECT_TRUE(IsFinal(JobState::kCompleted));
  EXPECT_TRUE(IsFinal(JobState::kCancelled));
  EXPECT_TRUE(IsFinal(JobState::kFailed));
}

TEST(VocabTest, TrialStatusesRoundTripThroughTheirStoreNamesAndProtos) {
  const TrialStatus all[] = {TrialStatus::kOk,          TrialStatus::kInvalidConfig,
                             TrialStatus::kWrongAnswer, TrialStatus::kRuntimeError,
                             TrialStatus::kTimeout,     TrialStatus::kWorkerLost,
                             TrialStatus::kCancelled};
  const char* names[] = {"OK",      "INVALID_CONFIG", "WRONG_ANSWER", "RUNTIME_ERROR",
                         "TIMEOUT", "WORKER_LOST",    "CANCELLED"};
  const v1::TrialStatus protos[] = {
      v1::TRIAL_OK,      v1::TRIAL_INVALID_CONFIG, v1::TRIAL_WRONG_ANSWER, v1::TRIAL_RUNTIME_ERROR,
      v1::TRIAL_TIMEOUT, v1::TRIAL_WORKER_LOST,    v1::TRIAL_CANCELLED};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(TrialStatusName(all[i]), names[i]);
    EXPECT_EQ(ParseTrialStatus(names[i]), all[i]);
    EXPECT_EQ(ToProto(all[i]), protos[i]);
    EXPECT_EQ(TrialStatusFromProto(protos[i]), all[i]);
  }
  EXPECT_FALSE(ParseTrialStatus("ok").has_value());
  EXPECT_FALSE(TrialStatusFromProto(v1::TRIAL_STATUS_UNSPECIFIED).has_value());
}

TEST(VocabTest, OnlyWorkerLostAndCancelledAreNotChargedToTheBudget) {
  EXPECT_TRUE(IsChargedToBudget(TrialStatus::kOk));
  EXPECT_TRUE(IsChargedToBudget(TrialStatus::kInvalidConfig));
  EXPECT_TRUE(IsChargedToBudget(TrialStatus::kWrongAnswer));
  EXPECT_TRUE(IsChargedToBudget(TrialStatus::kRuntimeError));
  EXPECT_TRUE(IsChargedToBudget(TrialStatus::kTimeout));
  EXPECT_FALSE(IsChargedToBudget(TrialStatus::kWorkerLost));
  EXPECT_FALSE(IsChargedToBudget(TrialStatus::kCancelled));
}

TEST(VocabTest, MatchLevelsRoundTripThroughTheirWireNames) {
  const MatchLevel all[] = {MatchLevel::kExact, MatchLevel::kNearest, MatchLevel::kOtherTarget,
                            MatchLevel::kDefault};
  const char* names[] = {"exact", "nearest", "other_target", "default"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(MatchLevelName(all[i]), names[i]);
    EXPECT_EQ(ParseMatchLevel(names[i]), all[i]);
  }
  EXPECT_FALSE(ParseMatchLevel("other-target").has_value());
}

TEST(VocabTest, DefaultsAreTheDocumentedOnes) {
  EXPECT_EQ(std::string(kDefaultTarget), "snc2");
  EXPECT_EQ(std::string(kDefaultDtype), "bf16");
  EXPECT_EQ(std::string(kDefaultStrategy), "auto");
}

}  // namespace
}  // namespace tessel

// Tests for the shared vocabulary: every enum value round-trips through its string and proto form.
#include "schema/vocab.h"

#include <gtest/gtest.h>

#include <string>

namespace tessel {
namespace {

// One enum value's expected forms.
template <typename Enum, typename Proto>
struct Forms {
  Enum value;
  const char* name;
  Proto proto;
};

// Every value's name and proto convert both ways, and `unknown` parses to nothing.
template <typename Enum, typename Proto, size_t N, typename NameFn, typename ParseFn,
          typename FromProtoFn>
void ExpectRoundTrips(const Forms<Enum, Proto> (&all)[N], NameFn name, ParseFn parse,
                      FromProtoFn from_proto, const char* unknown) {
  for (const auto& forms : all) {
    EXPECT_EQ(name(forms.value), forms.name);
    EXPECT_EQ(parse(forms.name), forms.value) << forms.name;
    EXPECT_EQ(ToProto(forms.value), forms.proto) << forms.name;
    EXPECT_EQ(from_proto(forms.proto), forms.value) << forms.name;
  }
  EXPECT_FALSE(parse(unknown).has_value()) << unknown;
  EXPECT_FALSE(parse("").has_value());
  EXPECT_FALSE(from_proto(static_cast<Proto>(0)).has_value()) << "UNSPECIFIED";
}

TEST(VocabTest, JobStatesRoundTripThroughTheirStoreNamesAndProtos) {
  const Forms<JobState, v1::JobState> all[] = {
      {JobState::kQueued, "queued", v1::JOB_QUEUED},
      {JobState::kRunning, "running", v1::JOB_RUNNING},
      {JobState::kCompleted, "completed", v1::JOB_COMPLETED},
      {JobState::kCancelled, "cancelled", v1::JOB_CANCELLED},
      {JobState::kFailed, "failed", v1::JOB_FAILED},
  };
  ExpectRoundTrips(all, JobStateName, ParseJobState, JobStateFromProto, "Queued");
}

TEST(VocabTest, TrialStatusesRoundTripThroughTheirStoreNamesAndProtos) {
  const Forms<TrialStatus, v1::TrialStatus> all[] = {
      {TrialStatus::kOk, "OK", v1::TRIAL_OK},
      {TrialStatus::kInvalidConfig, "INVALID_CONFIG", v1::TRIAL_INVALID_CONFIG},
      {TrialStatus::kWrongAnswer, "WRONG_ANSWER", v1::TRIAL_WRONG_ANSWER},
      {TrialStatus::kRuntimeError, "RUNTIME_ERROR", v1::TRIAL_RUNTIME_ERROR},
      {TrialStatus::kTimeout, "TIMEOUT", v1::TRIAL_TIMEOUT},
      {TrialStatus::kWorkerLost, "WORKER_LOST", v1::TRIAL_WORKER_LOST},
      {TrialStatus::kCancelled, "CANCELLED", v1::TRIAL_CANCELLED},
  };
  ExpectRoundTrips(all, TrialStatusName, ParseTrialStatus, TrialStatusFromProto, "ok");
}

TEST(VocabTest, OnlyCompletedCancelledAndFailedAreFinal) {
  EXPECT_FALSE(IsFinal(JobState::kQueued));
  EXPECT_FALSE(IsFinal(JobState::kRunning));
  EXPECT_TRUE(IsFinal(JobState::kCompleted));
  EXPECT_TRUE(IsFinal(JobState::kCancelled));
  EXPECT_TRUE(IsFinal(JobState::kFailed));
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

// Tests for the shared vocabulary: every enum value round-trips through its string and proto form.
#include "schema/vocab.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace tessel {
namespace {

// The enum's values in order, as the names the store and the CLI contract use; each proto value is
// the name upper-cased behind `proto_prefix` (JOB_QUEUED, TRIAL_WORKER_LOST), so the test states
// the spelling rule instead of copying vocab.cc's table. Every form converts both ways, and
// `unknown` and UNSPECIFIED convert to nothing.
template <typename Enum, typename NameFn, typename ParseFn, typename FromProtoFn,
          typename ProtoNameFn>
void ExpectRoundTrips(std::vector<std::string> names, NameFn name, ParseFn parse,
                      FromProtoFn from_proto, ProtoNameFn proto_name, const std::string& prefix,
                      const char* unknown) {
  for (size_t i = 0; i < names.size(); ++i) {
    const Enum value = static_cast<Enum>(i);
    std::string upper = names[i];
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(name(value), names[i]);
    EXPECT_EQ(parse(names[i]), value) << names[i];
    EXPECT_EQ(proto_name(ToProto(value)), prefix + upper) << names[i];
    EXPECT_EQ(from_proto(ToProto(value)), value) << names[i];
  }
  EXPECT_FALSE(parse(unknown).has_value()) << unknown;
  EXPECT_FALSE(parse("").has_value());
  EXPECT_FALSE(from_proto(decltype(ToProto(Enum{})){}).has_value()) << "UNSPECIFIED";
}

TEST(VocabTest, JobStatesRoundTripThroughTheirStoreNamesAndProtos) {
  ExpectRoundTrips<JobState>(
      {"queued", "running", "completed", "cancelled", "failed"}, JobStateName, ParseJobState,
      JobStateFromProto, [](v1::JobState s) { return v1::JobState_Name(s); }, "JOB_", "Queued");
}

TEST(VocabTest, TrialStatusesRoundTripThroughTheirStoreNamesAndProtos) {
  ExpectRoundTrips<TrialStatus>(
      {"OK", "INVALID_CONFIG", "WRONG_ANSWER", "RUNTIME_ERROR", "TIMEOUT", "WORKER_LOST",
       "CANCELLED"},
      TrialStatusName, ParseTrialStatus, TrialStatusFromProto,
      [](v1::TrialStatus s) { return v1::TrialStatus_Name(s); }, "TRIAL_", "ok");
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

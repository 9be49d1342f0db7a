// Tests for the graded-lookup rule: exact > nearest > other_target > default.
#include "schema/graded_match.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessel {
namespace {

struct Stored {
  std::string dims;
  std::string dtype;
  std::string target;
};

// Offers every stored best, in order, to a matcher for the query and returns its result.
GradedMatch Match(const std::string& dims, const std::string& dtype, const std::string& target,
                  const std::vector<Stored>& stored) {
  GradedMatcher matcher(*Dims::Parse(dims), dtype, target);
  for (size_t i = 0; i < stored.size(); ++i) {
    const Dims d = *Dims::Parse(stored[i].dims);
    matcher.Offer(i, d.Canonical(), stored[i].dtype, stored[i].target, DimsLogs(d));
  }
  return matcher.Result();
}

TEST(GradedMatchTest, ExactWinsOverEverythingAndIgnoresDimOrder) {
  const std::vector<Stored> stored = {{"M=512,N=512,K=512", "bf16", "snc2"},
                                      {"M=1024,N=512,K=256", "bf16", "snc3"},
                                      {"K=256,M=1024,N=512", "bf16", "snc2"}};
  GradedMatch match = Match("M=1024,N=512,K=256", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kExact);
  EXPECT_EQ(match.candidate, 2u);
}

TEST(GradedMatchTest, NearestIsTheSmallestLogDistanceOnTheSameTargetAndDtype) {
  const std::vector<Stored> stored = {{"M=4096,N=4096,K=4096", "bf16", "snc2"},   // distance 6
                                      {"M=1024,N=1024,K=2048", "bf16", "snc2"},   // distance 1
                                      {"M=1024,N=1024,K=1024", "fp32", "snc2"},   // other dtype
                                      {"M=1024,N=1024,K=1024", "bf16", "snc3"}};  // other target
  GradedMatch match = Match("M=1024,N=1024,K=1024", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kNearest);
  EXPECT_EQ(match.candidate, 1u);
}

TEST(GradedMatchTest, TheFirstOfTwoEquallyNearCandidatesWins) {
  const std::vector<Stored> stored = {{"M=512,N=1024,K=1024", "bf16", "snc2"},
                                      {"M=2048,N=1024,K=1024", "bf16", "snc2"}};
  GradedMatch match = Match("M=1024,N=1024,K=1024", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kNearest);
  EXPECT_EQ(match.candidate, 0u);
}

TEST(GradedMatchTest, OtherTargetNeedsTheSameDimsAndDtype) {
  const std::vector<Stored> stored = {{"M=512,N=512,K=512", "bf16", "snc3"},     // other dims
                                      {"M=1024,N=1024,K=1024", "fp32", "snc3"},  // other dtype
                                      {"K=1024,N=1024,M=1024", "bf16", "snc3"},
                                      {"M=1024,N=1024,K=1024", "bf16", "systolic-8x8-ws"}};
  GradedMatch match = Match("M=1024,N=1024,K=1024", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kOtherTarget);
  EXPECT_EQ(match.candidate, 2u);
}

TEST(GradedMatchTest, NearestBeatsOtherTarget) {
  const std::vector<Stored> stored = {{"M=1024,N=1024,K=1024", "bf16", "snc3"},
                                      {"M=8192,N=8192,K=8192", "bf16", "snc2"}};
  GradedMatch match = Match("M=1024,N=1024,K=1024", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kNearest);
  EXPECT_EQ(match.candidate, 1u);
}

TEST(GradedMatchTest, OtherDimNamesAreNeverNearest) {
  const std::vector<Stored> stored = {{"M=1024,N=1024", "bf16", "snc2"},
                                      {"M=1024,N=1024,B=2", "bf16", "snc2"}};
  GradedMatch match = Match("M=1024,N=1024,K=1024", "bf16", "snc2", stored);
  EXPECT_EQ(match.level, MatchLevel::kDefault);
  EXPECT_FALSE(match.candidate.has_value());
}

TEST(GradedMatchTest, NothingOfferedIsDefault) {
  GradedMatch match = Match("M=1,N=1,K=1", "bf16", "snc2", {});
  EXPECT_EQ(match.level, MatchLevel::kDefault);
  EXPECT_FALSE(match.candidate.has_value());
}

TEST(GradedMatchTest, OfferSaysWhenItWasExactAndTheDimsOverloadAgrees) {
  GradedMatcher matcher(*Dims::Parse("M=8,N=8,K=8"), "bf16", "snc2");
  EXPECT_FALSE(matcher.Offer(7, *Dims::Parse("M=8,N=8,K=16"), "bf16", "snc2"));
  EXPECT_EQ(matcher.Result().level, MatchLevel::kNearest);
  EXPECT_TRUE(matcher.Offer(9, *Dims::Parse("K=8,N=8,M=8"), "bf16", "snc2"));
  EXPECT_EQ(matcher.Result().level, MatchLevel::kExact);
  EXPECT_EQ(matcher.Result().candidate, 9u);
}

}  // namespace
}  // namespace tessel

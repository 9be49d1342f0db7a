// Tests for the graded-lookup rule: exact > nearest > other_target > default.
#include "schema/graded_match.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace tessel {
namespace {

struct Stored {
  std::string dims;
  std::string dtype;
  std::string target;
};

// A query for M=1024,N=1024,K=1024 in bf16 on snc2 against stored bests offered in order, and
// the expected answer.
struct Case {
  const char* what;
  std::vector<Stored> stored;
  MatchLevel level;
  std::optional<size_t> candidate;
};

GradedMatch Match(const std::vector<Stored>& stored) {
  GradedMatcher matcher(*Dims::Parse("M=1024,N=1024,K=1024"), "bf16", "snc2");
  for (size_t i = 0; i < stored.size(); ++i) {
    const Dims d = *Dims::Parse(stored[i].dims);
    matcher.Offer(i, d.Canonical(), stored[i].dtype, stored[i].target, DimsLogs(d));
  }
  return matcher.Result();
}

std::vector<GradedMatch> Ranked(const std::vector<Stored>& stored) {
  GradedMatcher matcher(*Dims::Parse("M=1024,N=1024,K=1024"), "bf16", "snc2");
  for (size_t i = 0; i < stored.size(); ++i) {
    const Dims d = *Dims::Parse(stored[i].dims);
    matcher.Offer(i, d.Canonical(), stored[i].dtype, stored[i].target, DimsLogs(d));
  }
  return matcher.Ranked();
}

TEST(GradedMatchTest, ChoosesTheBestLevelAndTheFirstBestCandidate) {
  const Case cases[] = {
      {"exact wins over everything and ignores dim order",
       {{"M=512,N=512,K=512", "bf16", "snc2"},
        {"M=1024,N=1024,K=1024", "bf16", "snc3"},
        {"K=1024,M=1024,N=1024", "bf16", "snc2"}},
       MatchLevel::kExact,
       2},
      {"nearest: the smallest log distance on the same target and dtype",
       {{"M=4096,N=4096,K=4096", "bf16", "snc2"},   // distance 6
        {"M=1024,N=1024,K=2048", "bf16", "snc2"},   // distance 1
        {"M=1024,N=1024,K=1024", "fp32", "snc2"},   // other dtype
        {"M=1024,N=1024,K=1024", "bf16", "snc3"}},  // other target
       MatchLevel::kNearest,
       1},
      {"the first of two equally near candidates",
       {{"M=512,N=1024,K=1024", "bf16", "snc2"}, {"M=2048,N=1024,K=1024", "bf16", "snc2"}},
       MatchLevel::kNearest,
       0},
      {"other_target needs the same dims and dtype; the first wins",
       {{"M=512,N=512,K=512", "bf16", "snc3"},
        {"M=1024,N=1024,K=1024", "fp32", "snc3"},
        {"K=1024,N=1024,M=1024", "bf16", "snc3"},
        {"M=1024,N=1024,K=1024", "bf16", "systolic-8x8-ws"}},
       MatchLevel::kOtherTarget,
       2},
      {"nearest beats other_target",
       {{"M=1024,N=1024,K=1024", "bf16", "snc3"}, {"M=8192,N=8192,K=8192", "bf16", "snc2"}},
       MatchLevel::kNearest,
       1},
      {"other dim names are never nearest",
       {{"M=1024,N=1024", "bf16", "snc2"}, {"M=1024,N=1024,B=2", "bf16", "snc2"}},
       MatchLevel::kDefault,
       std::nullopt},
      {"nothing offered", {}, MatchLevel::kDefault, std::nullopt},
  };
  for (const Case& c : cases) {
    const GradedMatch match = Match(c.stored);
    EXPECT_EQ(match.level, c.level) << c.what;
    EXPECT_EQ(match.candidate, c.candidate) << c.what;
    // Ranked() starts with Result().
    const std::vector<GradedMatch> ranked = Ranked(c.stored);
    if (c.candidate) {
      ASSERT_FALSE(ranked.empty()) << c.what;
      EXPECT_EQ(ranked.front().level, c.level) << c.what;
      EXPECT_EQ(ranked.front().candidate, c.candidate) << c.what;
    } else {
      EXPECT_TRUE(ranked.empty()) << c.what;
    }
  }
}

TEST(GradedMatchTest, RankedListsEveryMatchBestFirstWithTiesInOfferOrder) {
  const std::vector<Stored> stored = {
      {"M=1024,N=1024,K=1024", "bf16", "snc3"},  // 0: other_target
      {"M=4096,N=1024,K=1024", "bf16", "snc2"},  // 1: nearest, distance 2
      {"M=2048,N=1024,K=1024", "bf16", "snc2"},  // 2: nearest, distance 1
      {"M=1024,N=1024,K=1024", "fp32", "snc2"},  // 3: another dtype, never
      {"M=512,N=1024,K=1024", "bf16", "snc2"},   // 4: nearest, distance 1 (after 2)
      {"M=1024,N=1024,K=1024", "bf16", "snc2"},  // 5: exact
      {"rows=4,cols=4", "bf16", "snc2"},         // 6: other dim names, never
  };
  std::vector<std::pair<MatchLevel, size_t>> got;
  for (const GradedMatch& m : Ranked(stored)) got.emplace_back(m.level, *m.candidate);
  const std::vector<std::pair<MatchLevel, size_t>> want = {
      {MatchLevel::kExact, 5},   {MatchLevel::kNearest, 2},     {MatchLevel::kNearest, 4},
      {MatchLevel::kNearest, 1}, {MatchLevel::kOtherTarget, 0},
  };
  EXPECT_EQ(got, want);
}

TEST(GradedMatchTest, OfferSaysWhenItWasExactAndTheDimsOverloadAgrees) {
  GradedMatcher matcher(*Dims::Parse("M=8,N=8,K=8"), "bf16", "snc2");
  EXPECT_FALSE(matcher.Offer(7, *Dims::Parse("M=8,N=8,K=16"), "bf16", "snc2"));
  EXPECT_EQ(matcher.Result().level, MatchLevel::kNearest);
  EXPECT_EQ(matcher.Result().candidate, 7u);
  EXPECT_TRUE(matcher.Offer(9, *Dims::Parse("K=8,N=8,M=8"), "bf16", "snc2"));
  EXPECT_EQ(matcher.Result().level, MatchLevel::kExact);
  EXPECT_EQ(matcher.Result().candidate, 9u);
}

}  // namespace
}  // namespace tessel

#include "search/random.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/container/flat_hash_set.h"
#include "search/strategy.h"

namespace tessel::search {
namespace {

// 4 x 4 x 3 = 48 points; valid when a * b <= 6 and c != "z".
kernels::Space SmallSpace() {
  return kernels::Space({{"a", {"1", "2", "3", "4"}, ""},
                         {"b", {"1", "2", "3", "4"}, ""},
                         {"c", {"x", "y", "z"}, ""}},
                        [](const Config& config) -> absl::Status {
                          if (*config.GetInt("a") * *config.GetInt("b") > 6) {
                            return absl::InvalidArgumentError("a*b > 6");
                          }
                          if (config.Get("c") == "z") return absl::InvalidArgumentError("c is z");
                          return absl::OkStatus();
                        });
}

int CountValid(const kernels::Space& space) {
  int valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) valid += space.Validate(space.Decode(i)).ok();
  return valid;
}

TEST(RandomStrategyTest, ProposesEveryValidConfigExactlyOnceThenStops) {
  kernels::Space space = SmallSpace();
  RandomStrategy strategy(space, 7);
  std::set<std::string> seen;
  for (int round = 0; round < 100; ++round) {
    auto batch = strategy.Propose(5);
    if (batch.empty()) break;
    for (const Config& config : batch) {
      EXPECT_TRUE(space.Validate(config).ok()) << config.ToString();
      EXPECT_TRUE(seen.insert(config.ToString()).second) << "repeated " << config.ToString();
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), CountValid(space));
  EXPECT_TRUE(strategy.Propose(5).empty());
}

TEST(RandomStrategyTest, SameSeedGivesTheSameSequence) {
  kernels::Space space = SmallSpace();
  RandomStrategy a(space, 42), b(space, 42), c(space, 43);
  std::string seq_a, seq_b, seq_c;
  for (int i = 0; i < 4; ++i) {
    for (const Config& x : a.Propose(3)) seq_a += x.ToString() + ";";
    for (const Config& x : b.Propose(3)) seq_b += x.ToString() + ";";
    for (const Config& x : c.Propose(3)) seq_c += x.ToString() + ";";
  }
  EXPECT_EQ(seq_a, seq_b);
  EXPECT_NE(seq_a, seq_c);
}

TEST(RandomStrategyTest, NeverProposesAnObservedConfig) {
  kernels::Space space = SmallSpace();
  RandomStrategy strategy(space, 1);
  Config observed{{"a", "1"}, {"b", "1"}, {"c", "x"}};
  strategy.Observe(std::vector<Observation>{{observed, true, 10.0}});
  auto all = strategy.Propose(1000);
  EXPECT_EQ(static_cast<int>(all.size()), CountValid(space) - 1);
  for (const Config& config : all) EXPECT_FALSE(config == observed);
}

TEST(MakeStrategyTest, UnknownNameListsTheKnownOnes) {
  kernels::Space space = SmallSpace();
  auto strategy = MakeStrategy("bogus", space, 0);
  ASSERT_FALSE(strategy.ok());
  EXPECT_EQ(strategy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(strategy.status().message()).find("random"), std::string::npos);
}

}  // namespace
}  // namespace tessel::search

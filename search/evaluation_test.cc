#include "search/evaluation.h"

#include <gtest/gtest.h>

namespace tessel::search {
namespace {

Cell C(std::string space, std::string group, std::string strategy, double score, int budget = 200,
       std::string variant = "plain") {
  Cell cell;
  cell.space = std::move(space);
  cell.group = std::move(group);
  cell.strategy = std::move(strategy);
  cell.score_mean = score;
  cell.budget = budget;
  cell.variant = std::move(variant);
  return cell;
}

TEST(EvaluationTest, MeanScoreLeavesOutTheExcludedGroupAndOtherBudgets) {
  std::vector<Cell> cells = {C("a1", "A", "s", 0.9), C("a2", "A", "s", 0.7), C("b1", "B", "s", 0.5),
                             C("b1", "B", "s", 0.1, 100), C("b1", "B", "s", 0.2, 200, "noise")};
  EXPECT_NEAR(*MeanScore(cells, "s", 200, "plain"), 0.7, 1e-12);
  EXPECT_NEAR(*MeanScore(cells, "s", 200, "plain", "A"), 0.5, 1e-12);
  EXPECT_NEAR(*MeanScore(cells, "s", 200, "plain", "B"), 0.8, 1e-12);
  EXPECT_FALSE(MeanScore(cells, "other", 200, "plain").has_value());
  WorstSpace worst = Worst(cells, "s", 200, "plain");
  EXPECT_EQ(worst.space, "b1");
  EXPECT_EQ(worst.score_mean, 0.5);
}

TEST(EvaluationTest, PortfolioCheckNamesTheSpacesWhereItFallsBehind) {
  std::vector<Cell> cells = {
      // x: auto within the margin of its best arm, clearly above random.
      C("x", "G", "auto", 0.990), C("x", "G", "ga", 1.0), C("x", "G", "ils", 0.9),
      C("x", "G", "random", 0.95),
      // y: auto behind its best arm by 0.05, and below random + 0.01 (random under 0.98).
      C("y", "H", "auto", 0.90), C("y", "H", "ga", 0.95), C("y", "H", "ils", 0.7),
      C("y", "H", "random", 0.895),
      // z: random at 0.99 needs no margin; auto ties it.
      C("z", "H", "auto", 0.99), C("z", "H", "ga", 0.99), C("z", "H", "ils", 0.99),
      C("z", "H", "random", 0.99),
      // w: an arm is missing, so the space is not compared.
      C("w", "H", "auto", 0.1), C("w", "H", "ga", 1.0)};
  PortfolioCheck check = ComparePortfolio(cells, "auto", {"ga", "ils"}, "random", 200, "plain");
  EXPECT_EQ(check.spaces, 3);
  EXPECT_EQ(check.below_best_arm, std::vector<std::string>{"y"});
  EXPECT_EQ(check.below_random, std::vector<std::string>{"y"});
  EXPECT_NEAR(check.worst_gap_to_best_arm, -0.05, 1e-12);
  EXPECT_EQ(check.worst_gap_space, "y");
}

TEST(EvaluationTest, LeaveOneGroupOutNeverChoosesOnTheHeldOutGroup) {
  // Spec "p" is far better on group A only; "q" is better on B and C. Held out A, the choice is
  // made on B and C (q), even though p would score better on A itself.
  std::vector<Cell> cells = {C("a", "A", "p", 1.0),  C("a", "A", "q", 0.6), C("b", "B", "p", 0.8),
                             C("b", "B", "q", 0.85), C("c", "C", "p", 0.8), C("c", "C", "q", 0.85)};
  std::vector<HeldOut> held = LeaveOneGroupOut(cells, {"p", "q"}, 200, "plain");
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].group, "A");
  EXPECT_EQ(held[0].chosen, "q");
  EXPECT_NEAR(held[0].train_mean, 0.85, 1e-12);
  ASSERT_EQ(held[0].test.size(), 1u);
  EXPECT_EQ(held[0].test[0].score_mean, 0.6);
  // Held out B: p averages 0.9 over A and C, q 0.725.
  EXPECT_EQ(held[1].chosen, "p");
  EXPECT_EQ(held[1].test[0].score_mean, 0.8);
}

}  // namespace
}  // namespace tessel::search

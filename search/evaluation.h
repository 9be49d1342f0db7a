// Judging strategies across many recorded spaces without fitting to them.
//
//   cells (space, group, variant, strategy, budget -> ReplaySummary)
//     --> Compare: per strategy, the mean over spaces and the worst space; how often a portfolio
//         (auto) falls below its best arm or below random
//     --> LeaveOneGroupOut: a knob (a strategy spec among candidates) chosen on every group
//         (GPU) but one and scored on the one left out
#ifndef TESSEL_SEARCH_EVALUATION_H_
#define TESSEL_SEARCH_EVALUATION_H_

#include <string>
#include <vector>

#include "search/replay.h"

namespace tessel::search {

// One strategy's figures on one space, at one budget.
struct Cell {
  std::string space;     // e.g. "convolution_A4000"
  std::string group;     // what is held out together: the device (GPU) that measured it
  std::string variant;   // VariantName
  std::string strategy;  // a strategy spec as MakeStrategy takes it
  int budget = 0;
  double score_mean = 0, score_p10 = 0, score_min = 0, score_stderr = 0;
};

// The mean score of `strategy` at `budget` and `variant` over the cells of spaces whose group is
// not `excluded_group` (pass "" to include all); nullopt when there is no such cell.
std::optional<double> MeanScore(const std::vector<Cell>& cells, const std::string& strategy,
                                int budget, const std::string& variant,
                                const std::string& excluded_group = "");

// A portfolio against its parts, at one budget and variant, over the spaces that have cells of
// every strategy named.
struct PortfolioCheck {
  int spaces = 0;
  // Spaces where the portfolio's mean is below the best arm's mean by more than `arm_margin`.
  std::vector<std::string> below_best_arm;
  // Spaces where it is below random (by less than `random_margin` when random is under
  // `random_ceiling`, see Compare).
  std::vector<std::string> below_random;
  double worst_gap_to_best_arm = 0;  // min over spaces of portfolio - best arm (negative: behind)
  std::string worst_gap_space;
};
// `arms` are the strategies the portfolio is compared with (its arms; exhaustive excluded by the
// caller); `random` names the random strategy.
PortfolioCheck ComparePortfolio(const std::vector<Cell>& cells, const std::string& portfolio,
                                const std::vector<std::string>& arms, const std::string& random,
                                int budget, const std::string& variant, double arm_margin = 0.015,
                                double random_margin = 0.01, double random_ceiling = 0.98);

// The worst space of a strategy: the lowest mean score over spaces.
struct WorstSpace {
  std::string space;
  double score_mean = 0;
};
WorstSpace Worst(const std::vector<Cell>& cells, const std::string& strategy, int budget,
                 const std::string& variant);

// Leave-one-group-out choice among candidate specs: for each group, the candidate with the best
// mean over the other groups' spaces (ties: the earlier candidate), and that candidate's score on
// each space of the held-out group.
struct HeldOut {
  std::string group;
  std::string chosen;      // candidate spec chosen without this group
  double train_mean = 0;   // its mean over the other groups' spaces
  std::vector<Cell> test;  // its cells on this group's spaces
};
std::vector<HeldOut> LeaveOneGroupOut(const std::vector<Cell>& cells,
                                      const std::vector<std::string>& candidates, int budget,
                                      const std::string& variant);

// The group a recorded space is held out with: its device name, or the file stem when the
// cache names no device.
std::string SpaceGroup(const ReplayCache& cache, const std::string& space_name);

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_EVALUATION_H_

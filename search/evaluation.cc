#include "search/evaluation.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace tessel::search {
namespace {

// Cells of one budget and variant, by space then strategy.
std::map<std::string, std::map<std::string, const Cell*>> BySpace(const std::vector<Cell>& cells,
                                                                  int budget,
                                                                  const std::string& variant) {
  std::map<std::string, std::map<std::string, const Cell*>> out;
  for (const Cell& cell : cells) {
    if (cell.budget == budget && cell.variant == variant) out[cell.space][cell.strategy] = &cell;
  }
  return out;
}

}  // namespace

std::optional<double> MeanScore(const std::vector<Cell>& cells, const std::string& strategy,
                                int budget, const std::string& variant,
                                const std::string& excluded_group) {
  double sum = 0;
  int n = 0;
  for (const Cell& cell : cells) {
    if (cell.strategy != strategy || cell.budget != budget || cell.variant != variant) continue;
    if (!excluded_group.empty() && cell.group == excluded_group) continue;
    sum += cell.score_mean;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

PortfolioCheck ComparePortfolio(const std::vector<Cell>& cells, const std::string& portfolio,
                                const std::vector<std::string>& arms, const std::string& random,
                                int budget, const std::string& variant, double arm_margin,
                                double random_margin, double random_ceiling) {
  PortfolioCheck check;
  check.worst_gap_to_best_arm = std::numeric_limits<double>::infinity();
  for (const auto& [space, by_strategy] : BySpace(cells, budget, variant)) {
    auto it = by_strategy.find(portfolio);
    if (it == by_strategy.end()) continue;
    const double score = it->second->score_mean;
    double best_arm = -1;
    bool complete = true;
    for (const std::string& arm : arms) {
      auto a = by_strategy.find(arm);
      if (a == by_strategy.end()) {
        complete = false;
        break;
      }
      best_arm = std::max(best_arm, a->second->score_mean);
    }
    if (!complete) continue;
    ++check.spaces;
    if (score < best_arm - arm_margin) check.below_best_arm.push_back(space);
    if (score - best_arm < check.worst_gap_to_best_arm) {
      check.worst_gap_to_best_arm = score - best_arm;
      check.worst_gap_space = space;
    }
    if (auto r = by_strategy.find(random); r != by_strategy.end()) {
      const double random_score = r->second->score_mean;
      const double needed =
          random_score < random_ceiling ? random_score + random_margin : random_score;
      if (score < needed) check.below_random.push_back(space);
    }
  }
  if (check.spaces == 0) check.worst_gap_to_best_arm = 0;
  return check;
}

WorstSpace Worst(const std::vector<Cell>& cells, const std::string& strategy, int budget,
                 const std::string& variant) {
  WorstSpace worst{"", std::numeric_limits<double>::infinity()};
  for (const Cell& cell : cells) {
    if (cell.strategy != strategy || cell.budget != budget || cell.variant != variant) continue;
    if (cell.score_mean < worst.score_mean) worst = {cell.space, cell.score_mean};
  }
  if (worst.space.empty()) worst.score_mean = 0;
  return worst;
}

std::vector<HeldOut> LeaveOneGroupOut(const std::vector<Cell>& cells,
                                      const std::vector<std::string>& candidates, int budget,
                                      const std::string& variant) {
  std::set<std::string> groups;
  for (const Cell& cell : cells) {
    if (cell.budget == budget && cell.variant == variant) groups.insert(cell.group);
  }
  std::vector<HeldOut> out;
  for (const std::string& group : groups) {
    HeldOut held{group, "", -1, {}};
    for (const std::string& candidate : candidates) {
      std::optional<double> mean = MeanScore(cells, candidate, budget, variant, group);
      if (mean && *mean > held.train_mean) {
        held.train_mean = *mean;
        held.chosen = candidate;
      }
    }
    if (held.chosen.empty()) continue;
    for (const Cell& cell : cells) {
      if (cell.group == group && cell.strategy == held.chosen && cell.budget == budget &&
          cell.variant == variant) {
        held.test.push_back(cell);
      }
    }
    out.push_back(std::move(held));
  }
  return out;
}

std::string SpaceGroup(const ReplayCache& cache, const std::string& space_name) {
  return cache.device_name().empty() ? space_name : std::string(cache.device_name());
}

}  // namespace tessel::search

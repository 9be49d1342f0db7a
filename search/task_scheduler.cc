#include "search/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "schema/strings.h"

namespace tessel::search {
namespace {

// Ansor's defaults (Zheng et al. 2020, section 6.2 and its released code).
constexpr double kAlpha = 0.2;
constexpr double kBeta = 2;
constexpr int kWindow = 3;  // dt, in rounds
constexpr double kEpsilon = 0.05;
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

absl::StatusOr<TaskRule> ParseTaskRule(std::string_view name) {
  if (name == "gradient") return TaskRule::kGradient;
  if (name == "round-robin") return TaskRule::kRoundRobin;
  return absl::InvalidArgumentError(
      StrCat("unknown task scheduler '", name, "' (known: gradient, round-robin)"));
}

std::string_view TaskRuleName(TaskRule rule) {
  return rule == TaskRule::kGradient ? "gradient" : "round-robin";
}

TaskScheduler::TaskScheduler(TaskRule rule, std::vector<TaskInfo> tasks, uint64_t seed)
    : rule_(rule),
      tasks_(std::move(tasks)),
      history_(tasks_.size()),
      floors_(tasks_.size(), 0.0),
      exhausted_(tasks_.size(), false),
      rng_(seed) {}

double TaskScheduler::Objective() const {
  double total = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (history_[i].empty()) return kInf;
    total += tasks_[i].weight * history_[i].back();
  }
  return total;
}

double TaskScheduler::Gradient(size_t i) const {
  const std::vector<double>& g = history_[i];
  const double now = g.back();
  if (!std::isfinite(now)) return -kInf;  // nothing valid yet: it must be found first
  const int64_t t = static_cast<int64_t>(g.size());
  // What the last rounds gained (a backward difference over up to kWindow rounds).
  const int64_t back = std::min<int64_t>(kWindow, t - 1);
  double recent = 0;
  if (back > 0) {
    const double before = g[static_cast<size_t>(t - 1 - back)];
    recent = std::isfinite(before) ? (now - before) / double(back) : -now / double(back);
  }
  // What more rounds could gain: optimistically all of it down to the floor at the rate so far,
  // or down to beta times the time the fastest similar task's speed would give. The rate so far
  // is discounted by the rounds since the best last improved (s): each round that found nothing
  // is evidence that the task has stalled, and Ansor's term alone, decaying as 1 / t only, kept
  // giving a stalled task far from a loose floor round after round (decode attention, ~3x its
  // roofline, took 8 of the Llama decode layer's 32 rounds at budget 500, seed 3, its last 4
  // finding nothing, while matmuls with basins still to find waited). 1 / (s + 1) leaves a task
  // that is still improving as Ansor has it.
  const double floor = std::min(floors_[i], now);
  const double optimistic = -(now - floor) / double(t) / double(RoundsSinceImprovement(i) + 1);
  // The similar tasks' best speed. Ansor measures work in FLOPs; where the floors are known it is
  // measured here in floor time (the roofline's), so a memory-bound shape (a decode matmul, M=8)
  // is not held to the FLOP rate of a compute-bound one and fed rounds it cannot use.
  const bool by_floor = floors_[i] > 0;
  const double work_i = by_floor ? floors_[i] : tasks_[i].flops;
  double best_speed = 0;  // work per ns
  for (size_t k = 0; k < tasks_.size(); ++k) {
    if (tasks_[k].group != tasks_[i].group || history_[k].empty()) continue;
    if (by_floor && floors_[k] <= 0) continue;
    // Only what a similar task reached in at least as many rounds as this one has had: a task
    // that has had more rounds and still lags has shown it cannot follow (in the decode layer
    // M=8 k_proj, 7x its roofline, took 337 of 375 rounds on the promise of gate_proj's 50%).
    if (history_[k].size() < history_[i].size()) continue;
    const double gk = history_[k].back();
    const double work_k = by_floor ? floors_[k] : tasks_[k].flops;
    if (std::isfinite(gk) && gk > 0) best_speed = std::max(best_speed, work_k / gk);
  }
  const double similar =
      best_speed > 0 ? std::max(floor, kBeta * work_i / best_speed) - now : optimistic;
  return tasks_[i].weight * (kAlpha * recent + (1 - kAlpha) * std::min(optimistic, similar));
}

std::optional<size_t> TaskScheduler::Next() {
  const size_t n = tasks_.size();
  std::vector<size_t> live;
  for (size_t i = 0; i < n; ++i) {
    if (!exhausted_[i]) live.push_back(i);
  }
  if (live.empty()) return std::nullopt;
  if (rule_ == TaskRule::kRoundRobin) {
    for (;; ++next_in_turn_) {
      const size_t i = next_in_turn_ % n;
      if (!exhausted_[i]) {
        ++next_in_turn_;
        return i;
      }
    }
  }
  for (size_t i : live) {
    if (history_[i].empty()) return i;  // every task's first round
  }
  if (std::uniform_real_distribution<double>(0, 1)(rng_) < kEpsilon) {
    return live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng_)];
  }
  size_t best = live[0];
  double best_gradient = kInf;
  for (size_t i : live) {
    const double gradient = Gradient(i);
    if (gradient < best_gradient) {
      best = i;
      best_gradient = gradient;
    }
  }
  return best;
}

int64_t TaskScheduler::RoundsSinceImprovement(size_t task) const {
  const std::vector<double>& g = history_[task];
  int64_t since = 0;
  for (size_t j = g.size(); j-- > 1 && !(g[j] < g[j - 1]);) ++since;
  return since;
}

void TaskScheduler::Record(size_t task, double best_ns) {
  std::vector<double>& g = history_[task];
  // A task's best never gets worse: a round that found nothing faster keeps the previous best.
  g.push_back(g.empty() ? best_ns : std::min(g.back(), best_ns));
}

}  // namespace tessel::search

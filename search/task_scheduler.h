// Shares one trial budget among the tasks of a model (one task per distinct workload) in rounds:
// which task gets the next round. Two rules:
//   - round robin: the tasks in turn (the baseline);
//   - gradient: Ansor's task scheduler (Zheng et al., OSDI 2020, section 6). The objective is the
//     model's time f = sum_i w_i g_i, with w_i the task's weight (how often the model runs it) and
//     g_i its best time after t_i rounds. The next round goes to the task whose f is expected to
//     fall fastest:
//       df/dt_i ~ w_i [ alpha (g_i(t_i) - g_i(t_i - dt)) / dt
//                       + (1 - alpha) min(-g_i(t_i) / t_i, beta C_i / max_k V_k - g_i(t_i)) ]
//     the first term what the last dt rounds gained, the second an optimistic and a similarity
//     bound on what more rounds can gain (C_i the task's FLOPs, V_k = C_k / g_k the speed reached
//     by the tasks k of the same kernel). The optimistic term is divided by s_i + 1, s_i the rounds
//     since the task's best last improved: a task that has stalled is not promised its average
//     rate (Ansor's -g_i / t_i decays as 1 / t_i only); one still improving is as in Ansor. Where a
//     task's floor L_i is known (the simulator's roofline: no config is faster), both bounds stop
//     there: g_i - L_i replaces g_i in the optimistic term and the similarity target is at least
//     L_i; and work is measured in floor time instead of FLOPs (C = L, so V_k = L_k / g_k is the
//     fraction of its roofline a similar task reached): a memory-bound shape is not held to a
//     compute-bound one's FLOP rate. Ansor has no such floor; with none (0) the rule is Ansor's.
//     The similar tasks k counted are those that have had at least as many rounds as task i: a
//     speed reached in more rounds than i has had is a promise i has not yet been given the rounds
//     to keep, a speed reached in fewer is one i has failed to follow (Ansor counts every similar
//     task, and a task that cannot reach its neighbours' speed then takes rounds without end).
// Under both rules a task whose search is exhausted (its strategy has nothing left to propose)
// gets no more rounds, as TVM's implementation of Ansor marks such tasks dead. Every task first
// gets one round; then, with probability
//     epsilon, a random task (exploration). alpha, beta, dt and epsilon are Ansor's published
//     defaults (0.2, 2, 3 rounds, 0.05), not fitted here.
#ifndef TESSEL_SEARCH_TASK_SCHEDULER_H_
#define TESSEL_SEARCH_TASK_SCHEDULER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessel::search {

enum class TaskRule { kRoundRobin, kGradient };

// "gradient" or "round-robin"; InvalidArgument naming the known ones otherwise.
absl::StatusOr<TaskRule> ParseTaskRule(std::string_view name);
std::string_view TaskRuleName(TaskRule rule);

struct TaskInfo {
  double weight = 1;  // how many times one run of the model runs the task (> 0)
  double flops = 0;   // work of one run of the task (> 0)
  std::string group;  // similar tasks share it (the kernel)
};

class TaskScheduler {
 public:
  TaskScheduler(TaskRule rule, std::vector<TaskInfo> tasks, uint64_t seed);

  // The task that gets the next round; nullopt once every task is exhausted.
  std::optional<size_t> Next();
  // Task `task`'s search has nothing left to propose: it gets no more rounds.
  void MarkExhausted(size_t task) { exhausted_[task] = true; }
  // Records task `task`'s best time (ns; +inf when nothing valid yet) after a round it was given.
  void Record(size_t task, double best_ns);
  // Task `task` can run no faster than `floor_ns` (its roofline); 0: unknown.
  void SetFloor(size_t task, double floor_ns) { floors_[task] = floor_ns; }

  // The rounds each task has had.
  int64_t rounds(size_t task) const { return static_cast<int64_t>(history_[task].size()); }
  // The weighted sum of the tasks' best times (+inf until every task has one).
  double Objective() const;

 private:
  // df/dt_i of the gradient rule (more negative: more to gain).
  double Gradient(size_t task) const;
  // How many of the task's last rounds left its best where it was (0: the last one improved it).
  int64_t RoundsSinceImprovement(size_t task) const;

  TaskRule rule_;
  std::vector<TaskInfo> tasks_;
  std::vector<std::vector<double>> history_;  // per task, its best after each of its rounds
  std::vector<double> floors_;                // per task, its floor (0: unknown)
  std::vector<bool> exhausted_;
  size_t next_in_turn_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_TASK_SCHEDULER_H_

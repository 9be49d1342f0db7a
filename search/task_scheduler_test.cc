#include "search/task_scheduler.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tessel::search {
namespace {

// A task whose best time after r rounds falls from `start` towards `floor` by `rate` per round.
struct Curve {
  double start, floor, rate;
  double After(int64_t rounds) const {
    return floor + (start - floor) * std::pow(1 - rate, double(rounds - 1));
  }
};

// Runs `rounds` rounds of `rule` over the curves; returns the weighted objective at the end.
double Simulate(TaskRule rule, const std::vector<TaskInfo>& tasks, const std::vector<Curve>& curves,
                int rounds, std::vector<int64_t>* given = nullptr) {
  TaskScheduler scheduler(rule, tasks, 7);
  for (int r = 0; r < rounds; ++r) {
    const size_t i = *scheduler.Next();
    scheduler.Record(i, curves[i].After(scheduler.rounds(i) + 1));
  }
  if (given != nullptr) {
    for (size_t i = 0; i < tasks.size(); ++i) given->push_back(scheduler.rounds(i));
  }
  return scheduler.Objective();
}

// Two tasks, one stuck and one that improves whenever it gets a round.
struct StuckAndImproving {
  double stuck;    // task 0's best, whatever its rounds
  double start;    // task 1's best before the rounds below
  double step;     // how much each of its rounds improves it ...
  double floor;    // ... down to this
  int from_round;  // and only from this round on (earlier ones leave it as it is)
};
// Gives 40 rounds; returns how many went to task 1.
int RoundsToTheImprovingTask(TaskScheduler& scheduler, const StuckAndImproving& tasks) {
  double second = tasks.start;
  int to_second = 0;
  for (int r = 0; r < 40; ++r) {
    const size_t i = *scheduler.Next();
    if (i == 1 && r >= tasks.from_round) {
      ++to_second;
      second = std::max(tasks.floor, second - tasks.step);
    }
    scheduler.Record(i, i == 0 ? tasks.stuck : second);
  }
  return to_second;
}

TEST(TaskSchedulerTest, ParsesItsRuleNames) {
  EXPECT_EQ(*ParseTaskRule("gradient"), TaskRule::kGradient);
  EXPECT_EQ(*ParseTaskRule("round-robin"), TaskRule::kRoundRobin);
  EXPECT_FALSE(ParseTaskRule("ansor").ok());
}

TEST(TaskSchedulerTest, RoundRobinTakesTheTasksInTurn) {
  TaskScheduler scheduler(TaskRule::kRoundRobin, {{}, {}, {}}, 1);
  std::vector<size_t> order;
  for (int r = 0; r < 6; ++r) order.push_back(*scheduler.Next());
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(TaskSchedulerTest, GradientGivesEveryTaskARoundFirst) {
  TaskScheduler scheduler(TaskRule::kGradient, {{}, {}, {}}, 1);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(*scheduler.Next(), i);
    scheduler.Record(i, 100);
  }
  EXPECT_DOUBLE_EQ(scheduler.Objective(), 300);
}

TEST(TaskSchedulerTest, ATaskWithNothingValidYetComesFirst) {
  TaskScheduler scheduler(TaskRule::kGradient, {{}, {}}, 1);
  scheduler.Record(*scheduler.Next(), 100);
  scheduler.Record(*scheduler.Next(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*scheduler.Next(), 1u);
}

// The rounds go where the model's time falls most: to the task the model runs 8 times and that
// still improves, not to the one run once or the one that has converged.
TEST(TaskSchedulerTest, GradientSpendsWhereTheModelGainsMost) {
  const std::vector<TaskInfo> tasks = {{.weight = 8, .flops = 1e9, .group = "matmul"},
                                       {.weight = 1, .flops = 1e9, .group = "matmul"},
                                       {.weight = 2, .flops = 1e8, .group = "softmax"}};
  const std::vector<Curve> curves = {{1000, 200, 0.15}, {1000, 200, 0.15}, {100, 99, 0.5}};
  std::vector<int64_t> given;
  const double gradient = Simulate(TaskRule::kGradient, tasks, curves, 30, &given);
  const double round_robin = Simulate(TaskRule::kRoundRobin, tasks, curves, 30);
  EXPECT_GT(given[0], given[1]);
  EXPECT_GT(given[0], given[2]);
  EXPECT_LT(gradient, round_robin);
}

// A task at its floor (the roofline) has nothing left to gain: the rounds go to the other one,
// although the model runs the first more often.
TEST(TaskSchedulerTest, ATaskAtItsFloorGetsNoMoreRounds) {
  const std::vector<TaskInfo> tasks = {{.weight = 4, .flops = 1e9, .group = "matmul"},
                                       {.weight = 1, .flops = 1e9, .group = "softmax"}};
  TaskScheduler scheduler(TaskRule::kGradient, tasks, 3);
  scheduler.SetFloor(0, 100);
  scheduler.Record(*scheduler.Next(), 100);  // task 0 reaches its floor at once
  scheduler.Record(*scheduler.Next(), 300);
  int to_second = 0;
  for (int r = 0; r < 20; ++r) {
    const size_t i = *scheduler.Next();
    to_second += i == 1;
    scheduler.Record(i, i == 0 ? 100 : 300 - 5 * r);
  }
  EXPECT_GE(to_second, 18);  // all but epsilon's random picks
}

// Two matmuls: a memory-bound one stuck at 7x its roofline (the decode layer's M=8 k_proj) and a
// compute-bound one at 2x its roofline, still improving. Ansor's similarity term promises the
// first the second's speed forever (a gain that never decays) and gives it nearly every round;
// counted only from similar tasks that have had as many rounds, the promise ends once the stuck
// task has had more rounds than the other, and the improving task gets its share.
TEST(TaskSchedulerTest, ALaggingTaskIsNotPromisedItsNeighboursSpeedForever) {
  const std::vector<TaskInfo> tasks = {{.weight = 2, .flops = 6.7e7, .group = "matmul"},
                                       {.weight = 2, .flops = 9.4e8, .group = "matmul"}};
  TaskScheduler scheduler(TaskRule::kGradient, tasks, 11);
  scheduler.SetFloor(0, 3);
  scheduler.SetFloor(1, 40);
  EXPECT_GE(RoundsToTheImprovingTask(
                scheduler, {.stuck = 20, .start = 80, .step = 0.5, .floor = 40, .from_round = 2}),
            15);
}

// A task stalled far from a loose floor (the decode layer's attention, ~3x its roofline
// whatever its config) is not promised its average rate forever: each round that finds nothing
// divides what it is expected to gain, and the rounds go to a task that still improves, though
// its gap to its own floor is smaller. (With Ansor's -(g - floor) / t alone the stalled task's
// claim decays as 1 / t only and it takes four rounds in five here.)
TEST(TaskSchedulerTest, AStalledTasksPromiseFades) {
  const std::vector<TaskInfo> tasks = {{.weight = 1, .flops = 1e9, .group = "attention"},
                                       {.weight = 1, .flops = 1e9, .group = "matmul"}};
  TaskScheduler scheduler(TaskRule::kGradient, tasks, 13);
  scheduler.SetFloor(0, 100);
  scheduler.SetFloor(1, 40);
  scheduler.Record(*scheduler.Next(), 300);  // stuck at 300 from its first round
  scheduler.Record(*scheduler.Next(), 100);
  // 28 of the 40 rounds go to the improving task with the discount, 8 without it.
  EXPECT_GE(RoundsToTheImprovingTask(
                scheduler, {.stuck = 300, .start = 100, .step = 1, .floor = 40, .from_round = 0}),
            24);
}

// A task whose search has nothing left gets no more rounds under either rule, however much the
// rule expects from it; with every task exhausted there is no next round.
TEST(TaskSchedulerTest, AnExhaustedTaskGetsNoMoreRounds) {
  for (TaskRule rule : {TaskRule::kGradient, TaskRule::kRoundRobin}) {
    const std::vector<TaskInfo> tasks = {{.weight = 100, .flops = 1e6, .group = "matmul"},
                                         {.weight = 1, .flops = 1e9, .group = "matmul"}};
    TaskScheduler scheduler(rule, tasks, 5);
    scheduler.Record(*scheduler.Next(), 1000);  // the heavy, slow task
    scheduler.Record(*scheduler.Next(), 100);
    scheduler.MarkExhausted(0);
    for (int r = 0; r < 30; ++r) {
      const std::optional<size_t> i = scheduler.Next();
      ASSERT_TRUE(i.has_value());
      EXPECT_EQ(*i, 1u) << TaskRuleName(rule);
      scheduler.Record(*i, 100);
    }
    scheduler.MarkExhausted(1);
    EXPECT_FALSE(scheduler.Next().has_value());
  }
}

TEST(TaskSchedulerTest, TheSameSeedGivesTheSameRounds) {
  const std::vector<TaskInfo> tasks = {{.weight = 3, .flops = 1e9, .group = "a"},
                                       {.weight = 1, .flops = 1e9, .group = "b"}};
  const std::vector<Curve> curves = {{500, 100, 0.1}, {400, 300, 0.2}};
  std::vector<int64_t> first, second;
  Simulate(TaskRule::kGradient, tasks, curves, 40, &first);
  Simulate(TaskRule::kGradient, tasks, curves, 40, &second);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace tessel::search

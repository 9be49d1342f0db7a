// Stopping rules for a tuning job: budget, time limit, no improvement, target reached.
#ifndef TESSEL_SEARCH_STOPPING_H_
#define TESSEL_SEARCH_STOPPING_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

namespace tessel::search {

// When a job stops. A zero field means "no such limit". Whichever limit is reached first wins.
struct StopRule {
  int64_t max_evaluations = 0;              // evaluations charged (failed ones included)
  std::chrono::milliseconds time_limit{0};  // wall time since the tracker started
  int64_t no_improvement = 0;               // evaluations in a row without a better best
  double target_time_ns = 0;                // stop once a result is at least this fast
};

// Why a job stopped.
enum class StopReason { kNone, kBudget, kTimeLimit, kNoImprovement, kTargetReached, kExhausted };
std::string_view StopReasonName(StopReason reason);

// Tracks one job against a StopRule. Feed every charged evaluation to Record; Check says whether
// to stop. Not thread-safe. The clock is injectable for tests.
class StopTracker {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StopTracker(StopRule rule, Clock::time_point start = Clock::now());

  // Records one evaluation: `ok` with `time_ns` when it succeeded.
  void Record(bool ok, double time_ns);
  // The first limit reached at `now`, or kNone.
  StopReason Check(Clock::time_point now = Clock::now()) const;

  int64_t evaluations() const { return evaluations_; }
  double best_time_ns() const { return best_; }

 private:
  StopRule rule_;
  Clock::time_point start_;
  int64_t evaluations_ = 0;
  int64_t since_improvement_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_STOPPING_H_

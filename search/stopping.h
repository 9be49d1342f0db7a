// Stopping rules for a tuning job: budget, time limit, no improvement, target reached; and the
// effort presets that pick a budget and stopping rules by name.
#ifndef TESSEL_SEARCH_STOPPING_H_
#define TESSEL_SEARCH_STOPPING_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

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

// ---- Effort presets ----
//
// `tessel tune --effort NAME` and SubmitJobRequest.effort name one row of kEffortPresets: a budget
// and early stops. This table is the one place they are defined; the server resolves a request's
// effort with FindEffortPreset, the CLI prints the rows in --help. A request's own non-zero budget
// or stop_after_no_improvement overrides the row's. No preset sets a time limit: a preset is the
// same search (the same trials for the same seed) on any machine; --time-limit caps the wall time.
//
// Costs and results below: `tessel tune matmul --shape M=4096,N=4096,K=4096 --effort NAME` on
// snc2 (embedded server, 2 worker threads, seeds 1-3), from BENCHMARKS.md "Effort presets"; the
// best known time there is the exhaustive optimum, 774,949 ns.
struct EffortPreset {
  std::string_view name;
  int budget = 0;            // trials charged to the budget, the default config included
  int no_improvement = 0;    // stop after this many charged trials without a faster one; 0 = never
  std::string_view summary;  // one line for --help: what it costs and what it reaches
};

inline constexpr EffortPreset kEffortPresets[] = {
    // quick: PRESET_QUICK_COMMENT
    {.name = "quick",
     .budget = 32,
     .no_improvement = 0,
     .summary = "the cheapest search, for a first answer; often well short of the best"},
    // default: what `tessel tune` ran before presets (64 trials, no early stop), so its results
    // are unchanged. PRESET_DEFAULT_COMMENT
    {.name = "default",
     .budget = 64,
     .no_improvement = 0,
     .summary = "what tune ran before presets; close to the best on many workloads"},
    // full: PRESET_FULL_COMMENT
    {.name = "full",
     .budget = 1000,
     .no_improvement = 250,
     .summary = "searches until a long run of trials finds nothing faster"},
};
inline constexpr std::string_view kDefaultEffort = "default";

// The preset named `name`, or nullptr when there is none.
const EffortPreset* FindEffortPreset(std::string_view name);
// "quick, default, full": the preset names in table order.
std::string EffortPresetNames();

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_STOPPING_H_

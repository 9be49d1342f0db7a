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
// or stop_after_no_improvement overrides the row's. No preset sets a time limit: a preset spends
// the same trials on a slow machine as on a fast one; --time-limit caps the wall time.
//
// Costs and results below are from BENCHMARKS.md "Effort presets" (`tessel tune ... --effort NAME
// --seed 1|2|3`, embedded server with 2 worker threads, at db5837d, on a loaded machine): wall
// time, and the published time as a fraction of the best known, on 4096^3 bf16 matmul (snc2) and
// the N=16,C=256,H=56,W=56,K=256 3x3 conv2d (snc2), both against their exhaustive optimum, and on
// causal attention 1x16x4096x4096x128 (snc3) against its best known config (252,971 ns).
struct EffortPreset {
  std::string_view name;
  int budget = 0;            // trials charged to the budget, the default config included
  int no_improvement = 0;    // stop after this many charged trials without a faster one; 0 = never
  std::string_view summary;  // one line for --help: what it costs and what it reaches
};

inline constexpr EffortPreset kEffortPresets[] = {
    // quick: 32 trials, no early stop. 0.7-1.0 s on matmul and conv2d, 6-9 s on attention;
    // reaches 0.995-1.000 of the best on matmul, 1.000 on conv2d, 0.62-0.70 on attention.
    {.name = "quick",
     .budget = 32,
     .no_improvement = 0,
     .summary = "half the default's trials, for a first answer; short of the best on large spaces"},
    // default: what `tessel tune` ran before presets (64 trials, no early stop), so its results
    // are unchanged. 1.0-1.3 s on matmul and conv2d, 7-9 s on attention; reaches 1.000 of the
    // best on matmul and conv2d, 0.71-0.95 on attention.
    {.name = "default",
     .budget = 64,
     .no_improvement = 0,
     .summary = "as before presets; enough for matmul and conv2d, not for attention"},
    // full: up to 1,000 trials, ending after 250 in a row without a faster one (it ended that
    // way in every measured run). 2.1-2.7 s and 273-288 trials on matmul and conv2d (the
    // exhaustive optimum every time), 14-15 s and 360-475 trials on attention (0.999-1.000).
    {.name = "full",
     .budget = 1000,
     .no_improvement = 250,
     .summary = "for large spaces such as attention; 4-8x the default's trials"},
};
inline constexpr std::string_view kDefaultEffort = "default";

// The preset named `name`, or nullptr when there is none.
const EffortPreset* FindEffortPreset(std::string_view name);
// "quick, default, full": the preset names in table order.
std::string EffortPresetNames();

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_STOPPING_H_

// The replay evaluator: searches run against recorded tuning spaces (Kernel Tuner cache files)
// instead of a simulator, so strategies can be benchmarked on real measured landscapes.
//
//   ReplayCache::Load(file) --> MakeReplaySpace(cache, protocol) --> any Strategy
//                           --> ReplayEvaluator: config -> recorded mean (or one recorded run)
//
// RunReplay repeats a seeded search `runs` times and records, after each evaluation, the true
// (mean) time of the config the strategy would publish: the best it has observed.
#ifndef TESSEL_SEARCH_REPLAY_H_
#define TESSEL_SEARCH_REPLAY_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "search/replay_cache.h"
#include "search/strategy.h"

namespace tessel::search {

// How a replayed search sees the space.
enum class Protocol {
  kConstrained,  // the recorded configurations only (restrictions known to the search)
  kCartesian,    // the full product; a point not recorded costs an evaluation and fails
};
absl::StatusOr<Protocol> ParseProtocol(std::string_view name);
std::string_view ProtocolName(Protocol protocol);

// The space a strategy searches under `protocol`. `cache` must outlive the space.
kernels::Space MakeReplaySpace(const ReplayCache& cache, Protocol protocol);
// Number of points the search can draw under `protocol`.
uint64_t ReplaySpaceSize(const ReplayCache& cache, Protocol protocol);

// What a replayed search observes of a recorded time. Scores always use the recorded mean.
struct ObservationModel {
  bool recorded_runs = false;  // one of the recorded runs at random instead of the mean
  double noise = 0;            // multiplicative noise: time x exp(noise x N(0, 1))
  bool monotone = false;       // time t seen as log(1 + t / best): same order, another shape
};

// Evaluates configs against a cache: the recorded mean as `model` shows it (seeded). Not
// thread-safe; `cache` must outlive it.
class ReplayEvaluator {
 public:
  ReplayEvaluator(const ReplayCache& cache, const ObservationModel& model, uint64_t seed);
  ReplayEvaluator(const ReplayCache& cache, bool noisy, uint64_t seed)
      : ReplayEvaluator(cache, ObservationModel{.recorded_runs = noisy}, seed) {}
  // The observation a worker would report, and the recorded mean (the true time; nullopt when
  // the config failed or is not recorded).
  Observation Evaluate(const Config& config, std::optional<double>* true_time = nullptr);

 private:
  const ReplayCache& cache_;
  ObservationModel model_;
  std::mt19937_64 rng_;
};

// A robustness variant of a recorded space (see ReplayCache::With*, ObservationModel).
enum class Variant {
  kPlain,
  kShuffledValues,  // ReplayCache::WithShuffledValues
  kMonotone,        // ObservationModel::monotone
  kNoise,           // ObservationModel::noise = 0.02
  kFailures,        // ReplayCache::WithFailedEntries(0.2)
};
// "plain", "shuffled", "monotone", "noise", "failures"; InvalidArgument listing them otherwise.
absl::StatusOr<Variant> ParseVariant(std::string_view name);
std::string_view VariantName(Variant variant);
std::vector<Variant> AllVariants();
// The noise level and failed share the variants use.
inline constexpr double kVariantNoise = 0.02;
inline constexpr double kVariantFailedShare = 0.2;

struct ReplayOptions {
  std::string strategy = "auto";
  int budget = 200;  // evaluations per run, failed ones included
  int runs = 50;
  uint64_t seed = 1;
  Protocol protocol = Protocol::kConstrained;
  bool noisy = false;  // ObservationModel::recorded_runs
  Variant variant = Variant::kPlain;
  int batch = 1;    // configs per Propose call (parallel workers)
  int threads = 1;  // runs in parallel; results do not depend on it
};

// One run: after evaluation i (1-based), published[i-1] is the true time of the best config
// observed so far (+inf while none succeeded). Shorter than the budget when the strategy ran out
// of configs.
struct ReplayRun {
  std::vector<double> published;
};

// Runs `options.runs` seeded searches (run r seeded from options.seed and r). `cache` must already
// have the variant's structural change applied (VariantCache); RunReplay applies its observation
// model.
absl::StatusOr<std::vector<ReplayRun>> RunReplay(const ReplayCache& cache,
                                                 const ReplayOptions& options);
// The cache a variant's runs replay: `cache` itself (a copy) unless the variant changes the
// recorded entries (shuffled values, failures), seeded from `seed`.
ReplayCache VariantCache(const ReplayCache& cache, Variant variant, uint64_t seed);

// Figures over runs at `budget` evaluations. score = best recorded time / true time of the
// published config (0 while none succeeded).
struct ReplaySummary {
  int budget = 0;
  int runs = 0;
  double score_mean = 0, score_p10 = 0, score_min = 0;
  double score_stderr = 0;  // standard error of score_mean (sample sd / sqrt(runs))
  // Median evaluations until the published config is within 5% / 1% of the best; nullopt when
  // fewer than half the runs got there within the budget. reached_* is the share that did.
  std::optional<double> evals_to_5pct_median, evals_to_1pct_median;
  double reached_5pct = 0, reached_1pct = 0;
};
ReplaySummary Summarize(const ReplayCache& cache, const std::vector<ReplayRun>& runs, int budget);

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_REPLAY_H_

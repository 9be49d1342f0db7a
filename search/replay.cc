#include "search/replay.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "schema/measurement.h"
#include "schema/strings.h"
#include "sim/enum_names.h"

namespace tessel::search {

constexpr sim::EnumName<Variant> kVariantNames[] = {{Variant::kPlain, "plain"},
                                                    {Variant::kShuffledValues, "shuffled"},
                                                    {Variant::kMonotone, "monotone"},
                                                    {Variant::kNoise, "noise"},
                                                    {Variant::kFailures, "failures"}};

absl::StatusOr<Variant> ParseVariant(std::string_view name) {
  return sim::ParseNameIn(kVariantNames, name, "variant");
}

std::string_view VariantName(Variant variant) {
  return sim::NameIn(kVariantNames, variant, "plain");
}

std::vector<Variant> AllVariants() {
  std::vector<Variant> variants;
  for (const auto& row : kVariantNames) variants.push_back(row.value);
  return variants;
}

ReplayCache VariantCache(const ReplayCache& cache, Variant variant, uint64_t seed) {
  if (variant == Variant::kShuffledValues) return cache.WithShuffledValues(seed);
  if (variant == Variant::kFailures) return cache.WithFailedEntries(kVariantFailedShare, seed);
  return cache;
}

constexpr sim::EnumName<Protocol> kProtocolNames[] = {{Protocol::kConstrained, "constrained"},
                                                      {Protocol::kCartesian, "cartesian"}};

absl::StatusOr<Protocol> ParseProtocol(std::string_view name) {
  return sim::ParseNameIn(kProtocolNames, name, "protocol");
}

std::string_view ProtocolName(Protocol protocol) {
  return sim::NameIn(kProtocolNames, protocol, "cartesian");
}

kernels::Space MakeReplaySpace(const ReplayCache& cache, Protocol protocol) {
  if (protocol == Protocol::kCartesian) {
    return kernels::Space(cache.params(), [](const Config&) { return absl::OkStatus(); });
  }
  const ReplayCache* recorded = &cache;
  return kernels::Space(cache.params(), [recorded](const Config& config) -> absl::Status {
    std::optional<uint64_t> index = recorded->IndexOf(config);
    if (!index || recorded->Find(*index) == nullptr) {
      return absl::InvalidArgumentError("not a recorded configuration (outside the space)");
    }
    return absl::OkStatus();
  });
}

uint64_t ReplaySpaceSize(const ReplayCache& cache, Protocol protocol) {
  return protocol == Protocol::kCartesian ? cache.product_size() : cache.entries();
}

ReplayEvaluator::ReplayEvaluator(const ReplayCache& cache, const ObservationModel& model,
                                 uint64_t seed)
    : cache_(cache), model_(model), rng_(seed) {}

Observation ReplayEvaluator::Evaluate(const Config& config, std::optional<double>* true_time) {
  Observation observation{config, false, 0};
  if (true_time != nullptr) true_time->reset();
  std::optional<uint64_t> index = cache_.IndexOf(config);
  const ReplayCache::Entry* entry = index ? cache_.Find(*index) : nullptr;
  if (entry == nullptr || !entry->ok) return observation;
  observation.ok = true;
  observation.time_ns = entry->time;
  if (model_.recorded_runs && !entry->runs.empty()) {
    observation.time_ns = entry->runs[rng_() % entry->runs.size()];
  }
  if (model_.noise > 0) {
    observation.time_ns *= std::exp(model_.noise * std::normal_distribution<double>()(rng_));
  }
  if (model_.monotone) observation.time_ns = std::log1p(observation.time_ns / cache_.best_time());
  if (true_time != nullptr) *true_time = entry->time;
  return observation;
}

absl::StatusOr<std::vector<ReplayRun>> RunReplay(const ReplayCache& cache,
                                                 const ReplayOptions& options) {
  if (options.budget < 1 || options.runs < 1 || options.batch < 1) {
    return absl::InvalidArgumentError("budget, runs and batch must be at least 1");
  }
  const kernels::Space space = MakeReplaySpace(cache, options.protocol);
  // Fail early on an unknown strategy name.
  if (auto probe = MakeStrategy(options.strategy, space, 0); !probe.ok()) return probe.status();

  std::vector<ReplayRun> runs(options.runs);
  auto run_one = [&](int r) {
    const uint64_t seed = MixSeed(options.seed, r);
    std::unique_ptr<Strategy> strategy = *MakeStrategy(options.strategy, space, seed);
    ObservationModel model{.recorded_runs = options.noisy,
                           .noise = options.variant == Variant::kNoise ? kVariantNoise : 0.0,
                           .monotone = options.variant == Variant::kMonotone};
    ReplayEvaluator evaluator(cache, model, MixSeed(seed, 0x5eed));
    double observed_best = std::numeric_limits<double>::infinity();
    double published = std::numeric_limits<double>::infinity();
    std::vector<double>& trace = runs[r].published;
    trace.reserve(options.budget);
    while (static_cast<int>(trace.size()) < options.budget) {
      int want = std::min<int>(options.batch, options.budget - static_cast<int>(trace.size()));
      std::vector<Config> configs = strategy->Propose(want);
      if (configs.empty()) break;
      std::vector<Observation> results;
      for (const Config& config : configs) {
        std::optional<double> true_time;
        results.push_back(evaluator.Evaluate(config, &true_time));
        if (results.back().ok && results.back().time_ns < observed_best) {
          observed_best = results.back().time_ns;
          published = *true_time;
        }
        trace.push_back(published);
      }
      strategy->Observe(results);
    }
  };
  const int threads = std::max(1, std::min(options.threads, options.runs));
  if (threads == 1) {
    for (int r = 0; r < options.runs; ++r) run_one(r);
  } else {
    std::atomic<int> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int r = next++; r < options.runs; r = next++) run_one(r);
      });
    }
    for (std::thread& t : pool) t.join();
  }
  return runs;
}

ReplaySummary Summarize(const ReplayCache& cache, const std::vector<ReplayRun>& runs, int budget) {
  ReplaySummary summary;
  summary.budget = budget;
  summary.runs = static_cast<int>(runs.size());
  if (runs.empty()) return summary;
  const double best = cache.best_time();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> scores, to5, to1;
  for (const ReplayRun& run : runs) {
    double at_budget = inf;
    if (!run.published.empty()) {
      at_budget = run.published[std::min<size_t>(budget, run.published.size()) - 1];
    }
    scores.push_back(std::isfinite(at_budget) ? best / at_budget : 0.0);
    double first5 = inf, first1 = inf;
    for (int i = 0; i < budget && i < static_cast<int>(run.published.size()); ++i) {
      if (!std::isinf(first5) && !std::isinf(first1)) break;
      double t = run.published[i];
      if (std::isinf(first5) && t <= best * 1.05) first5 = i + 1;
      if (std::isinf(first1) && t <= best * 1.01) first1 = i + 1;
    }
    to5.push_back(first5);
    to1.push_back(first1);
  }
  std::vector<double> sorted = scores;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double s : scores) sum += s;
  summary.score_mean = sum / scores.size();
  if (scores.size() > 1) {
    double squares = 0;
    for (double s : scores) squares += (s - summary.score_mean) * (s - summary.score_mean);
    summary.score_stderr = std::sqrt(squares / (scores.size() - 1) / scores.size());
  }
  summary.score_min = sorted.front();
  summary.score_p10 = sorted[static_cast<size_t>(0.1 * (sorted.size() - 1))];
  auto reached = [](const std::vector<double>& v) {
    return static_cast<double>(
               std::count_if(v.begin(), v.end(), [](double x) { return std::isfinite(x); })) /
           v.size();
  };
  summary.reached_5pct = reached(to5);
  summary.reached_1pct = reached(to1);
  double m5 = Median(to5), m1 = Median(to1);
  if (std::isfinite(m5)) summary.evals_to_5pct_median = m5;
  if (std::isfinite(m1)) summary.evals_to_1pct_median = m1;
  return summary;
}

}  // namespace tessel::search

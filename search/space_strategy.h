// Shared machinery for strategies that work on point indices of a SearchSpace.
#ifndef TESSEL_SEARCH_SPACE_STRATEGY_H_
#define TESSEL_SEARCH_SPACE_STRATEGY_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tessel::search {

// One observed trial, by point index.
struct Result {
  uint64_t index = 0;
  bool ok = false;
  double time_ns = 0;  // valid when ok
};

// Base for strategies over a SearchSpace. It owns the bookkeeping every strategy needs: points
// seen (proposed or observed), results by point, the best result, and a seeded generator. A
// subclass implements ProposeIndices and reacts to results in OnResult; the base guarantees the
// Strategy contract: only valid, never-repeated configs, and an empty proposal only when every
// valid point has been seen (it fills a short proposal with random unseen valid points).
class SpaceStrategy : public Strategy {
 public:
  SpaceStrategy(const kernels::Space& space, uint64_t seed);
  SpaceStrategy(const SpaceStrategy&) = delete;
  SpaceStrategy& operator=(const SpaceStrategy&) = delete;

  std::vector<Config> Propose(int max_n) final;
  void Observe(std::span<const Observation> results) final;
  void ObservePrior(std::span<const Observation> results) final;

  // Index-level versions of Propose / Observe, for composing strategies (auto) without config
  // conversions. ProposeIndex has the same contract as Propose.
  std::vector<uint64_t> ProposeIndex(int max_n);
  void ObserveIndex(const Result& result);
  // Marks `index` seen without a result (another strategy has proposed it).
  void MarkSeen(uint64_t index) { seen_.insert(index); }
  // Index-level ObservePrior: one neighbouring workload's results, mapped into this space.
  void ObservePriorIndex(std::span<const Result> prior) { OnPrior(prior); }

  const SearchSpace& search_space() const { return space_; }

 protected:
  // Appends up to `max_n` points to `out`, each taken with Claim (so valid and unseen).
  virtual void ProposeIndices(int max_n, std::vector<uint64_t>& out) = 0;
  // Called for every result after the base has recorded it; `mine` tells whether this strategy
  // proposed the point.
  virtual void OnResult(const Result& result, bool mine) {
    (void)result;
    (void)mine;
  }
  // Called for each group of prior results (a neighbouring workload: other shape or target),
  // already mapped into this space (points outside it are dropped). Default: nothing.
  virtual void OnPrior(std::span<const Result> prior) { (void)prior; }

  // True (and marks it seen) when `index` is valid and unseen.
  bool Claim(uint64_t index);
  // Warm starts from prior results: AddPriorStarts queues the best `per_group` ok points of one
  // prior group (behind the ones queued before); PopPriorStart takes the next, nullopt when none
  // is left; TakePriorStart pops one into `out` when Claim takes it, false when none was left.
  void AddPriorStarts(std::span<const Result> prior, int per_group);
  std::optional<uint64_t> PopPriorStart();
  bool TakePriorStart(std::vector<uint64_t>& out);
  bool Seen(uint64_t index) const { return seen_.contains(index); }
  // A uniformly random unseen valid point (not yet claimed), or nullopt when none is left.
  std::optional<uint64_t> RandomUnseen();

  const std::vector<Result>& history() const { return history_; }
  // Time of `index` when observed ok; nullopt when failed or not observed.
  std::optional<double> TimeOf(uint64_t index) const;
  bool Failed(uint64_t index) const { return failed_.contains(index); }
  bool has_best() const { return best_time_ < std::numeric_limits<double>::infinity(); }
  uint64_t best_index() const { return best_index_; }
  double best_time() const { return best_time_; }
  // Points this strategy proposed whose results have not come back.
  int pending() const { return static_cast<int>(pending_.size()); }

  const SearchSpace space_;
  std::mt19937_64 rng_;

 private:
  absl::flat_hash_set<uint64_t> seen_;
  absl::flat_hash_set<uint64_t> pending_;
  absl::flat_hash_map<uint64_t, double> times_;
  absl::flat_hash_set<uint64_t> failed_;
  std::vector<Result> history_;
  uint64_t best_index_ = 0;
  double best_time_ = std::numeric_limits<double>::infinity();
  uint64_t scan_cursor_ = 0;            // for RandomUnseen when random draws keep missing
  std::vector<uint64_t> prior_starts_;  // warm start points, next at the back
};

// Uniform in [0, 1).
inline double Uniform(std::mt19937_64& rng) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_SPACE_STRATEGY_H_

// Random search without repeats over the valid part of a space.
#ifndef TESSEL_SEARCH_RANDOM_H_
#define TESSEL_SEARCH_RANDOM_H_

#include <cstdint>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "search/strategy.h"

namespace tessel::search {

// Draws uniformly from the space's product, skipping invalid and already seen points. When most
// of the space has been seen it switches to enumerating what is left, so it always terminates and
// eventually proposes every valid config exactly once.
class RandomStrategy final : public Strategy {
 public:
  RandomStrategy(const kernels::Space& space, uint64_t seed);

  std::string_view name() const override { return "random"; }
  std::vector<Config> Propose(int max_n) override;
  void Observe(std::span<const Observation> results) override;

 private:
  // Marks `index` seen; returns false when it already was.
  bool MarkSeen(uint64_t index) { return seen_.insert(index).second; }

  const kernels::Space& space_;
  std::mt19937_64 rng_;
  absl::flat_hash_set<uint64_t> seen_;  // proposed, observed or found invalid
  uint64_t next_sequential_ = 0;        // cursor for the enumeration phase

  // Random draws per proposal before falling back to enumeration; keeps sparse valid spaces cheap.
  static constexpr int kMaxDrawsPerProposal = 256;
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_RANDOM_H_

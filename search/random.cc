#include "search/random.h"

namespace tessel::search {

RandomStrategy::RandomStrategy(const kernels::Space& space, uint64_t seed)
    : space_(space), rng_(seed) {}

std::vector<Config> RandomStrategy::Propose(int max_n) {
  std::vector<Config> out;
  const uint64_t size = space_.Size();
  while (static_cast<int>(out.size()) < max_n && seen_.size() < size) {
    bool found = false;
    // Random phase: only while at most half the space is seen, else draws mostly hit seen points.
    if (seen_.size() * 2 < size) {
      std::uniform_int_distribution<uint64_t> pick(0, size - 1);
      for (int draw = 0; draw < kMaxDrawsPerProposal && !found; ++draw) {
        uint64_t index = pick(rng_);
        if (!MarkSeen(index)) continue;
        Config config = space_.Decode(index);
        if (space_.Validate(config).ok()) {
          out.push_back(std::move(config));
          found = true;
        }
      }
    }
    // Enumeration phase: walk the remaining points in order.
    while (!found && next_sequential_ < size) {
      uint64_t index = next_sequential_++;
      if (!MarkSeen(index)) continue;
      Config config = space_.Decode(index);
      if (space_.Validate(config).ok()) {
        out.push_back(std::move(config));
        found = true;
      }
    }
    if (!found) break;
  }
  return out;
}

void RandomStrategy::Observe(std::span<const Observation> results) {
  for (const Observation& result : results) {
    if (auto index = space_.Encode(result.config)) seen_.insert(*index);
  }
}

}  // namespace tessel::search

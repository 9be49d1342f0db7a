// Search strategies: ask/tell over a kernel's schedule space.
//
//   Job (server) --Propose(n)--> configs --> workers measure --> Observe(results) --> Strategy
//
// One strategy instance serves one job. It is seeded: the same space, seed and observations give
// the same proposals. Failed trials are observations like any other, not errors.
#ifndef TESSEL_SEARCH_STRATEGY_H_
#define TESSEL_SEARCH_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/key.h"

namespace tessel::search {

// What a strategy learns from one trial.
struct Observation {
  Config config;
  bool ok = false;     // measured successfully
  double time_ns = 0;  // valid when ok
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string_view name() const = 0;
  // Returns at most `max_n` valid configs never proposed or observed before. Returns fewer (or
  // none) when the space has no more; an empty result means the strategy has nothing left to try.
  virtual std::vector<Config> Propose(int max_n) = 0;
  // Reports results. Configs the strategy did not propose (the default config, trials recovered
  // after a restart, the earlier jobs of a continued search) are accepted and count as seen.
  virtual void Observe(std::span<const Observation> results) = 0;
  // Warm start: results measured for one neighbouring workload (same kernel, another shape or
  // target), one call per workload. Their times are comparable only within one call. They seed
  // the first proposals and the cost model; they are not observations of this job (the configs
  // are not marked seen and may still be proposed). Configs outside this space are ignored.
  // Call before the first Propose. Default: ignored.
  virtual void ObservePrior(std::span<const Observation> results) { (void)results; }
  // Does the one-off work of the first Propose that may take long (auto: ranking a sample of the
  // space by estimate, up to ~1 s for attention), so a server can run it outside its locks. Call
  // after ObservePrior, before the first Propose; without it, the first Propose does the work.
  virtual void Prepare() {}
  // Who proposed `config` (from the last Propose, before its result is observed): auto names its
  // arm ("model", "ils", ..., or "design" for the initial design); others their own name.
  virtual std::string ProposedBy(const Config& config) const {
    (void)config;
    return std::string(name());
  }
};

// Creates the strategy called `name` over `space`; "auto:OPTIONS" is auto with options (see
// AutoStrategy::ParseOptions). InvalidArgument listing the known names when `name` is unknown, or
// naming the bad option. `space` must outlive the strategy.
absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(std::string_view name,
                                                       const kernels::Space& space, uint64_t seed);
// Names MakeStrategy accepts, sorted.
std::vector<std::string> StrategyNames();
// OK when `name` is one of StrategyNames(); InvalidArgument naming them otherwise (the name shown
// escaped and cut: it may come from a client).
absl::Status CheckStrategyName(std::string_view name);

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_STRATEGY_H_

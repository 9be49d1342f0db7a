// Making a tuned config usable for another shape or target: a lookup that answers `nearest` or
// `other_target` hands out a config tuned for a different workload, which may be invalid where it
// is used (a blocking factor larger than the tiles that exist, more shards than the target has
// cores). The one documented rule for adapting it lives here (issue 15).
#ifndef TESSEL_KERNELS_ADAPT_H_
#define TESSEL_KERNELS_ADAPT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/key.h"

namespace tessel::kernels {

// A config made valid, and what was changed ("block_k 8->4"); no changes when it was valid.
struct AdaptedConfig {
  Config config;
  std::vector<std::string> changes;
};

// True for the params AdaptConfig may change: blocking factors (names starting with "block")
// and the shard count ("shards"). Lowering either only regroups the same tiles.
bool IsShrinkableParam(const std::string& name);

// `config` itself when `space` accepts it; else the valid config that differs from it only in
// shrinkable params, each no larger than its own value, changed as little as possible (the
// smallest sum of |log2(new / old)| over the changed params; ties go to the larger values, then
// to the earlier params). InvalidArgument with the original reason when no such config exists
// (a non-shrinkable param is invalid here, or shrinking does not help).
absl::StatusOr<AdaptedConfig> AdaptConfig(const Space& space, const Config& config);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ADAPT_H_

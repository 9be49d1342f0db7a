// Making a tuned config usable for another shape or target: a lookup that answers `nearest` or
// `other_target` hands out a config tuned for a different workload, which may be invalid where it
// is used (a blocking factor larger than the tiles that exist, more shards than the target has
// cores). The one documented rule for adapting it lives here (issue 15).
#ifndef TESSEL_KERNELS_ADAPT_H_
#define TESSEL_KERNELS_ADAPT_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/graded_match.h"
#include "schema/key.h"
#include "schema/vocab.h"

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

// What a graded lookup serves for an asked workload: the stored candidate it chose (none for
// the kernel's default), the match level, and the config made usable for the asked workload.
struct ServedConfig {
  std::optional<size_t> candidate;
  MatchLevel level = MatchLevel::kDefault;
  AdaptedConfig usable;
};

// The stored bests a graded lookup chooses from, as ids 0..count-1: `offer` offers id `i` to the
// matcher (with the workload it was tuned for), and `config` gives its stored config string
// (which must stay valid for the duration of the call).
struct GradedCandidates {
  size_t count = 0;
  std::function<void(GradedMatcher&, size_t)> offer;
  std::function<std::string_view(size_t)> config;
};

// The one serving rule of the server's Lookup and libtessel's snapshot reader: the graded match
// (schema/graded_match.h) among `candidates`, skipping each whose config is unusable for `asked`
// even after AdaptConfig, and finally the kernel's default for `asked`. Every config it returns
// is valid in `asked`'s space. Fails only when `asked` has no space (a bad workload).
absl::StatusOr<ServedConfig> ServeGraded(const ResolvedWorkload& asked,
                                         const GradedCandidates& candidates);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ADAPT_H_

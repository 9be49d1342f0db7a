// Pieces of the measurement protocol, exposed for tests and for the CLI's local commands.
#ifndef TESSEL_WORKER_MEASURE_H_
#define TESSEL_WORKER_MEASURE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/api.h"

namespace tessel::worker {

// The simulator seed of run `run_index` (warmup runs first, then repeats) of a trial seeded
// `trial_seed`. Deterministic; distinct runs get well-mixed, distinct seeds.
uint64_t RunSeed(uint64_t trial_seed, int run_index);

// Whether the verify policy selects this trial: "always" -> true, "never" or "" -> false,
// "sample:P" (0 <= P <= 1) -> true for a deterministic fraction P of (trial_id, seed) pairs.
// InvalidArgument for any other policy.
absl::StatusOr<bool> ShouldVerify(std::string_view policy, int64_t trial_id, uint64_t seed);

// The simulator statistics stored with a trial, as a JSON object: ticks, tensor_cycles,
// engines.<name>.{busy_frac,busy_ticks,instructions}, hbm_bytes, sbuf_peak_bytes,
// psum_peak_bytes, roofline_ns, bound.
std::string StatsJson(const sim::SimResult& result);

}  // namespace tessel::worker

#endif  // TESSEL_WORKER_MEASURE_H_

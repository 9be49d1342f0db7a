// The attention kernel's simulator side: its plan's schedule as simulator instructions, and the
// analytic estimate built from the same instructions' costs. Internal to the attention kernel.
#ifndef TESSEL_KERNELS_ATTENTION_SIM_H_
#define TESSEL_KERNELS_ATTENTION_SIM_H_

#include <optional>

#include "kernels/attention_plan.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels::attention_internal {

// How EmitProgram writes a core: compact (the default; a core's heads loop compressed into
// repeats, sim/compact.h, and cores with as many heads as the one before copied) or flat (every
// instruction emitted; the reference the compact program must unroll to). Not thread-safe: for
// tests.
enum class AttentionLowering { kCompact, kFlat };
void SetAttentionLoweringForTesting(AttentionLowering lowering);

// Fills `program` with the plan's instructions, one core per shard.
void EmitProgram(const Plan& plan, const sim::Target& target, sim::Program* program);

// The analytic estimate (docs/kernels.md "Analytic estimates"): the schedule's instructions for
// one (batch, head) pair, emitted into a CountingProgram (their costs, no program, no
// simulation), bounded by the slowest resource and multiplied by the pairs of the busiest core.
// Of a head's query groups only about kSampledGroups, evenly spread, are generated, each standing
// for group_stride groups (a causal head's groups grow linearly in work, so evenly spread samples
// keep the sum).
std::optional<double> Estimate(const Plan& plan, const Problem& problem, const sim::Target& target);

}  // namespace tessel::kernels::attention_internal

#endif  // TESSEL_KERNELS_ATTENTION_SIM_H_

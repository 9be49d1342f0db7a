// The attention kernel's test-only fault injection, in a header of its own so that the kernel's
// internal plan can read the fault without depending on the kernel's public header (attention.h
// includes this one, so callers see no change).
#ifndef TESSEL_KERNELS_ATTENTION_FAULT_H_
#define TESSEL_KERNELS_ATTENTION_FAULT_H_

namespace tessel::kernels {

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class AttentionFault {
  kNone,
  kDropRaggedKvTile,    // the ragged last key tile is skipped
  kSkipRescale,         // the output accumulator is not rescaled when the running max grows
  kCausalSkipOffByOne,  // causal skipping also drops the first tile that straddles the diagonal
};
// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetAttentionFaultForTesting(AttentionFault fault);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ATTENTION_FAULT_H_

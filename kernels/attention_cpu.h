// The attention kernel's CPU side: its plan's schedule executed on float data with the
// hardware's precisions (what Verify compares with the reference). Internal to the attention
// kernel.
#ifndef TESSEL_KERNELS_ATTENTION_CPU_H_
#define TESSEL_KERNELS_ATTENTION_CPU_H_

#include <vector>

#include "kernels/attention_plan.h"

namespace tessel::kernels::attention_internal {

// Runs the plan's schedule on Q, K, V ([bh, seq, head_dim] row-major, as in HBM) and writes O:
// fp32 PSUM, scores rounded to bf16 when they pass through SBUF as bf16, P rounded to the input
// dtype before PV, fp32 running statistics and accumulator, output rounded to the output dtype.
// Elements the schedule never writes are left as they are.
void RunOnCpu(const Plan& plan, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, std::vector<float>* o);

}  // namespace tessel::kernels::attention_internal

#endif  // TESSEL_KERNELS_ATTENTION_CPU_H_

// The matmul kernel's analytic time estimate (Space::Estimate; docs/kernels.md "Analytic
// estimates"): per-resource busy times counted from the plan, without lowering or simulating.
#ifndef TESSEL_KERNELS_MATMUL_ESTIMATE_H_
#define TESSEL_KERNELS_MATMUL_ESTIMATE_H_

#include "kernels/kernel.h"
#include "kernels/matmul_plan.h"
#include "sim/target.h"

namespace tessel::kernels {

// The parts of a matmul plan's estimate, in ns, for the busiest core.
struct MatmulEstimate {
  double tensor_ns = 0;  // matmuls (and background stationary loads) on TensorE
  double evict_ns = 0;   // PSUM evictions and accumulator adds on Vector / Scalar
  double load_ns = 0;    // the operand loads' DMA queues (their fixed costs and shares) and HBM
  double store_ns = 0;   // the output stores' DMA queue
  double fill_ns = 0;    // the first blocks' loads and the last tile's store, not overlapped
  double chain_ns = 0;   // the iterations when each waits for its loads (few buffers)
  double final_ns = 0;   // the last K blocks, which evict and store the output tiles
  double total_ns = 0;   // the estimate: the slowest resource plus what cannot overlap it
};

// The estimate of a valid `plan` on `target` (a neuron target; systolic targets run one GEMM
// instruction and get its cycles).
// bmm reuses it: `batches` independent GEMMs of the plan's shape run one after another on the
// busiest core, their operand blocks loaded `group` batches per DMA; `block_loads`, when given,
// replaces the hoisting rule's A and B block loads per pass over the blocks (of one group).
MatmulEstimate EstimateMatmul(const matmul_internal::Plan& plan, const sim::Target& target,
                              double batches = 1, int64_t group = 1,
                              const double* block_loads = nullptr);

// The Space::Estimate of matmul `problem` on `target`: MakePlan, then EstimateMatmul's total;
// nullopt for an invalid config.
Space::Estimate MatmulEstimator(const Problem& problem, const sim::Target& target);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_MATMUL_ESTIMATE_H_

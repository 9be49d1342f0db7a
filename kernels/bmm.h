// The batched matmul kernel: C[b] = A[b] x B[b] for b < B, each A[b] of M x K (given K-major, as
// matmul's A^T), B[b] of K x N row-major, C[b] of M x N row-major, batches contiguous in HBM.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   tile_m, tile_n, tile_k   hardware tile sizes, as matmul (tile_k 256 only for fp8 on snc3)
//   block_m, block_n         output tiles per block; a block's whole K reduction stays in PSUM
//   block_k                  K tiles per operand load (blocks_k == 1 keeps an A block resident
//                            across the N blocks)
//   batch_group              batches whose operand blocks are moved by one DMA (small matrices
//                            amortise the fixed DMA cost)
//   interleave               0: the group's batches are computed one after another;
//                            1: interleaved tile by tile (independent accumulation groups keep
//                            TensorE busy while other groups are evicted; needs
//                            batch_group x block_m x block_n PSUM groups)
//   bufs                     rotating SBUF buffers per operand block
//   stationary               a | b (b: C^T lands in PSUM and is stored by a transposing DMA)
//   evict                    vector | scalar | split | gpsimd (invalid: GpSimd cannot read PSUM)
//   shard_dim, shards        split batches (shard_dim=batch) or every batch's M blocks
//                            (shard_dim=m) over `shards` cores
#ifndef TESSEL_KERNELS_BMM_H_
#define TESSEL_KERNELS_BMM_H_

#include "kernels/lowering/planned_kernel.h"

namespace tessel::kernels {

class BmmKernel final : public PlannedKernel {
 public:
  BmmKernel();
  // Also rejects systolic targets (bmm needs engines, SBUF and PSUM).
  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const override;
  Config Default(const Problem& problem, const sim::Target& target) const override;
  Work MinimumWork(const Problem& problem) const override;
};

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class BmmFault {
  kNone,
  kDropRaggedBatchGroup,  // a core's ragged last batch group is skipped
  kRaggedMOffByOne,       // the ragged last M tile is one row short
};
// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetBmmFaultForTesting(BmmFault fault);

// How Lower writes the program: by default compact (a row block's column blocks compressed into
// repeats, sim/compact.h, and a core whose share has the same shape as the core before it, as
// many batches or as many M blocks none ragged, a repeat of it: Program::RepeatPrevious); kFlat
// emits every instruction of every core (the reference a test compares with). Not thread-safe;
// tests only.
enum class BmmLowering { kCompact, kFlat };
void SetBmmLoweringForTesting(BmmLowering lowering);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_BMM_H_

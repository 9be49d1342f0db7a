// The matmul kernel: C[M, N] = A[M, K] x B[K, N], with A given K-major (A^T in HBM, as NKI's lhsT)
// and B row-major, both streamed into SBUF with K on partitions.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   tile_m, tile_n, tile_k   hardware tile sizes (matmul limits K <= 128, stationary <= 128,
//                            moving <= 512; tile_k 256 only for fp8 double-row on snc3)
//   block_m, block_n, block_k  tiles per block; blocks are loaded with one DMA per K tile and
//                            stay resident while used (ragged last blocks are fine)
//   loop_order               order of the three block loops, outermost first (mnk ... knm)
//   bufs                     rotating SBUF buffers per operand block (overlap DMA with compute)
//   hoist                    0: reload both operand blocks every block iteration;
//                            1: reload an operand only when its block indices change
//   stationary               a: A^T tiles are stationary, C tiles land in PSUM with M on
//                            partitions; b: B tiles are stationary, C^T tiles land in PSUM and
//                            are stored with a transposing DMA
//   evict                    engine that copies PSUM to SBUF: vector, scalar, split (alternate
//                            vector and scalar) or gpsimd (always invalid: GpSimd cannot read PSUM)
//   shards                   cores of the chip the M (else N) blocks are split over
//
// Accumulation: when K is the innermost block loop and a block's output tiles fit the PSUM
// accumulation groups, the whole K reduction stays in PSUM; otherwise each block's partial sums
// are evicted into an fp32 SBUF accumulator (first copy, then Vector adds).
#ifndef TESSEL_KERNELS_MATMUL_H_
#define TESSEL_KERNELS_MATMUL_H_

#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {

class MatmulKernel final : public Kernel {
 public:
  std::string_view name() const override { return "matmul"; }
  // 1: initial lowering. 2: loop-structured (compact) programs; simulator model v2 (program-order
  // engines, static DMA queue shares).
  int version() const override { return 3; }
  std::string_view description() const override {
    return "C[M,N] = A[M,K] x B[K,N]: tiles, blocking, loop order, hoisting, buffers, stationary "
           "operand, PSUM eviction engine, sharding";
  }
  std::vector<std::string> dims() const override { return {"M", "N", "K"}; }
  std::vector<std::string> dtypes() const override { return {"bf16", "fp32", "fp8"}; }

  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const override;
  absl::StatusOr<Space> SpaceFor(const Problem& problem, const sim::Target& target) const override;
  absl::StatusOr<sim::Program> Lower(const Problem& problem, const Config& config,
                                     const sim::Target& target) const override;
  Config Default(const Problem& problem, const sim::Target& target) const override;
  absl::Status Verify(const Problem& problem, const Config& config,
                      const sim::Target& target) const override;
  Work MinimumWork(const Problem& problem) const override;
};

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class MatmulFault {
  kNone,
  kDropRaggedKTile,  // the K loop bound is floor(K / tile_k): the ragged last K tile is skipped
  kRaggedNOffByOne,  // the ragged last N tile is one column short
};
// How Lower builds programs: loop-structured (compact, the default: repeated block iterations are
// emitted once inside a repeat) or flat (every instruction; the reference the compact form is
// tested against). Not thread-safe; tests and benchmarks only.
enum class MatmulLowering { kCompact, kFlat };
void SetMatmulLoweringForTesting(MatmulLowering lowering);

// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetMatmulFaultForTesting(MatmulFault fault);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_MATMUL_H_

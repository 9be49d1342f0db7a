// The softmax kernel: Y[r, :] = exp(X[r, :] - max_r) / sum(exp(X[r, :] - max_r)) over the rows of a
// row-major [rows, cols] tensor. PSUM is not involved.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   tile_rows          partitions per row tile (32, 64, 128)
//   rows_per_partition consecutive rows each partition holds along its free dim (g): bigger DMAs
//                      and fewer, larger reductions; ops with per-row scalars still issue g times
//   chunk              columns per chunk; the last chunk of a row is ragged
//   algorithm          multi_pass: max pass, exp+sum pass, normalise pass;
//                      online: running max with rescaled running sum in one pass, then normalise
//   resident           1: the row tile's chunks stay in SBUF between passes (HBM read once);
//                      0: every pass streams the chunks from HBM again (needs less SBUF)
//   scale_engine       engine of the final multiply by 1/sum: vector (tensor_scalar) or scalar
//                      (activation copy with scale); exp always runs on Scalar, reductions on
//                      Vector
//   exp_dtype          dtype exp results are kept in (bf16 halves Vector reduce cost; bf16 only)
//   bufs               rotating buffers (row tiles when resident, chunks when streaming)
//   shards             cores the row tiles are split over
#ifndef TESSEL_KERNELS_SOFTMAX_H_
#define TESSEL_KERNELS_SOFTMAX_H_

#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"

namespace tessel::kernels {

class SoftmaxKernel final : public Kernel {
 public:
  std::string_view name() const override { return "softmax"; }
  // 1: initial lowering.
  int version() const override { return 1; }
  std::string_view description() const override {
    return "row softmax of X[rows,cols]: row tiles, rows per partition, column chunks, multi-pass "
           "vs online, SBUF residency, normalise engine, exp dtype, buffers, sharding";
  }
  std::vector<std::string> dims() const override { return {"rows", "cols"}; }
  std::vector<std::string> dtypes() const override { return {"bf16", "fp32"}; }

  // Also rejects systolic targets (they run GEMMs only).
  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const override;
  absl::StatusOr<Space> SpaceFor(const Problem& problem, const sim::Target& target) const override;
  absl::StatusOr<sim::Program> Lower(const Problem& problem, const Config& config,
                                     const sim::Target& target) const override;
  Config Default(const Problem& problem, const sim::Target& target) const override;
  absl::Status Verify(const Problem& problem, const Config& config,
                      const sim::Target& target) const override;
  // No TensorE flops; X read and Y written once.
  Work MinimumWork(const Problem& problem) const override;
};

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class SoftmaxFault {
  kNone,
  kDropTailChunkFromSum,  // the ragged last chunk's exp sum is not added to the row sum
  kSkipOnlineRescale,     // online: the running sum is not rescaled when the running max grows
};
// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetSoftmaxFaultForTesting(SoftmaxFault fault);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_SOFTMAX_H_

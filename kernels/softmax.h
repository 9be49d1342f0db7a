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

#include "kernels/rowwise_kernel.h"

namespace tessel::kernels {

class SoftmaxKernel final : public rowwise::RowwiseKernel {
 public:
  SoftmaxKernel();
  Config Default(const Problem& problem, const sim::Target& target) const override;
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

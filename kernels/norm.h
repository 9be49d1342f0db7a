// The normalisation kernels over the rows of a row-major [rows, cols] tensor:
//   layernorm: Y = (X - mean) / sqrt(var + eps) * gamma + beta
//   rmsnorm:   Y = X / sqrt(mean(X^2) + eps) * gamma
// with gamma and beta [cols] vectors and eps = 1e-5. PSUM is not involved.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   tile_rows          partitions per row tile (32, 64, 128)
//   rows_per_partition consecutive rows each partition holds along its free dim (g)
//   chunk              columns per chunk; the last chunk of a row is ragged
//   resident           1: the row tile stays in SBUF between the statistics and the normalise
//                      pass (HBM read once); 0: the normalise pass streams X again
//   stats              bn_stats: bn_stats per <= 512 columns + bn_aggr (Vector);
//                      sum_scalar_sq: sums by tensor_reduce, squares by a Scalar activation;
//                      sum_vector_sq: sums by tensor_reduce, squares by a Vector tensor_tensor
//   apply              engine of the normalisation: vector (tensor_scalar (x - mean) * rstd) or
//                      scalar (activation with scale rstd and bias -mean * rstd)
//   affine             fused: gamma/beta applied to each chunk before it is stored;
//                      separate: a second pass over Y in HBM applies them
//   bufs               rotating buffers (row tiles when resident, chunks when streaming)
//   shards             cores the row tiles are split over (each keeps gamma/beta resident)
#ifndef TESSEL_KERNELS_NORM_H_
#define TESSEL_KERNELS_NORM_H_

#include "kernels/rowwise_kernel.h"

namespace tessel::kernels {

// layernorm (rms = false) or rmsnorm (rms = true).
class NormKernel final : public rowwise::RowwiseKernel {
 public:
  // rms: rmsnorm (gamma only), else layernorm (gamma and beta).
  explicit NormKernel(bool rms);
  Config Default(const Problem& problem, const sim::Target& target) const override;

 private:
  bool rms_;
};

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class NormFault {
  kNone,
  kDropTailChunkFromStats,  // the ragged last chunk is left out of the row statistics
};
// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetNormFaultForTesting(NormFault fault);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_NORM_H_

// What the GEMM plans (matmul, bmm) share, written once: the operands and tiling read from the
// problem and config, the stationary and eviction choices, the tile and block counts derived from
// them, the TensorE check of one tile, the params they offer alike, and the staging buffers and
// DMA queues of their lowerings, and the CPU side of their Verify runs (CpuGemm, VerifyGemm).
#ifndef TESSEL_KERNELS_LOWERING_GEMM_PLAN_H_
#define TESSEL_KERNELS_LOWERING_GEMM_PLAN_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "kernels/kernel.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {

inline constexpr int kGemmStagingBufs = 2;  // output tiles in flight between eviction and store
inline constexpr int kGemmQueueA = 0, kGemmQueueB = 1, kGemmQueueStore = 2;  // DMA queues

// A GEMM's operands: M, N, K from the problem's dims, the dtype and the bytes per input and output
// element.
struct GemmOperands {
  int64_t m = 0, n = 0, k = 0;
  sim::DType dtype = sim::DType::kBf16;
  int in_bytes = 2, out_bytes = 2;
};
// Fills `out` from `problem` (its dims M, N, K, already checked present); the dtype's parse error
// otherwise.
absl::Status ReadGemmOperands(const Problem& problem, GemmOperands* out);

// A GEMM schedule's tiles (tile_m, tile_n, tile_k) and blocking factors in tiles (block_m,
// block_n, block_k).
struct GemmTiling {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t block_m = 1, block_n = 1, block_k = 1;
};
// Reads the six params (each >= 1) with IntParams, in that order; the first error.
absl::Status ReadGemmTiling(const Config& config, GemmTiling* out);

// The operand held in the systolic array (stationary=a|b) and the engine evicting PSUM
// (evict=vector|scalar|split|gpsimd).
struct GemmChoices {
  bool stationary_b = false;
  std::string evict;
};
// Reads stationary, then evict; InvalidArgument listing the allowed values of the first that is
// missing or not one of them.
absl::Status ReadGemmChoices(const Config& config, GemmChoices* out);

// Tiles per dim (the last one ragged) and blocks of tiles per dim (the last one short).
struct GemmBlocks {
  int64_t tiles_m = 0, tiles_n = 0, tiles_k = 0;
  int64_t blocks_m = 0, blocks_n = 0, blocks_k = 0;
};
// Sets every field of `out` from the dims of `operands` and the tiles and blocks of `tiling`.
void DeriveGemmBlocks(const GemmOperands& operands, const GemmTiling& tiling, GemmBlocks* out);

// The TensorE rules for one tile of the schedule on `target` (CheckMatmulTile, the stationary
// operand's tile as the stationary free size; `dtype_name` names the dtype in the message), then
// evict=gpsimd rejected (GpSimd cannot access PSUM). InvalidArgument naming the broken rule.
absl::Status CheckGemmTile(const sim::Target& target, std::string_view dtype_name,
                           const GemmOperands& operands, const GemmTiling& tiling,
                           const GemmChoices& choices);

// The params tile_m, tile_n and tile_k (256 only where the target's contraction limit for the
// problem's dtype allows it).
std::vector<Param> GemmTileParams(const Problem& problem, const sim::Target& target);
// The params stationary and evict (GemmChoices).
Param StationaryParam();
Param EvictParam();

// The CPU side of a GEMM-family schedule (matmul, bmm) computing C[b] = A[b] x B[b] (A[b] m x k,
// B[b] k x n, C[b] m x n, all row-major and batches contiguous): fp32 PSUM accumulation groups
// and output staging buffers, each a [tile_m, tile_n] tile (row stride tile_n), as the CPU
// emitters run the matmul steps and the stores. The operands must outlive it.
class CpuGemm {
 public:
  // M, N, K from `operands`, tiles from `tiling`, `psum_slots` accumulation groups and
  // kGemmStagingBufs staging buffers.
  CpuGemm(const GemmOperands& operands, const GemmTiling& tiling, int psum_slots,
          const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* c);

  // PSUM group `slot` += A[batch] x B[batch] over output rows [m0, m0 + rows), columns
  // [n0, n0 + cols) and contraction [k0, k0 + depth); `start` zeroes the group first.
  void Matmul(int slot, bool start, int64_t batch, int64_t m0, int64_t rows, int64_t n0,
              int64_t cols, int64_t k0, int64_t depth);
  // Copies the rows x cols tile of staging buffer `stage` into C[batch] at (m0, n0).
  void Store(int stage, int64_t batch, int64_t m0, int64_t rows, int64_t n0, int64_t cols);

  std::vector<float>& psum(int slot) { return psum_[slot]; }
  std::vector<float>& stage(int stage) { return stage_[stage]; }
  int64_t stride() const { return stride_; }

 private:
  const std::vector<float>& a_;
  const std::vector<float>& b_;
  std::vector<float>* c_;
  int64_t m_, n_, k_, stride_;
  std::vector<std::vector<float>> psum_;
  std::vector<std::vector<float>> stage_;
};

// A GEMM schedule's Verify on `operands` (its reduced problem, `batches` of them): draws A, then
// B (RandomInputs in the operands' dtype) from `rng`, lets `run(a, b, &c)` execute the schedule on
// the CPU into an Unwritten C, and checks C with CheckGemm (the message names `kernel` and
// `reduced`, and shows C[b,i,j] when `batched`; `acc_roundings` as GemmResult's).
absl::Status VerifyGemm(
    std::string_view kernel, std::string reduced, const GemmOperands& operands, int64_t batches,
    bool batched, std::mt19937_64& rng,
    const std::function<void(const std::vector<float>&, const std::vector<float>&,
                             std::vector<float>*)>& run,
    int acc_roundings = 0);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_LOWERING_GEMM_PLAN_H_

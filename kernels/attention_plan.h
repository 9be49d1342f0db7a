// The attention kernel's plan: a parsed, checked config for one problem and target, with
// everything its schedule derives, and the constants the schedule, its emitters and Verify share.
// Internal to the attention kernel (attention_*.cc).
#ifndef TESSEL_KERNELS_ATTENTION_PLAN_H_
#define TESSEL_KERNELS_ATTENTION_PLAN_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/attention_fault.h"
#include "kernels/schedule_util.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels::attention_internal {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

inline constexpr int kQueueK = 0, kQueueV = 1, kQueueQ = 2, kQueueP = 3, kQueueStore = 4;
inline constexpr int kStagingBufs = 2;
// The largest q_group (query tiles whose steps interleave) a config may ask for.
inline constexpr int kMaxQGroup = 8;
// Per-tile bookkeeping slots: two phases (step parity) of at most kv_block <= 16 tiles.
inline constexpr int kSlots = 32;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// What mask=matmul adds to a masked score (exact in bf16): far enough below any score that its exp
// underflows to 0, finite so that a row max stays finite.
inline constexpr float kMaskValue = -32768.0f;

// The fault SetAttentionFaultForTesting set (kNone unless a test set one).
AttentionFault Fault();

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan {
  int64_t bh = 0, sq = 0, sk = 0, d = 0;
  bool causal = false;
  DType dtype = DType::kBf16;
  int in_bytes = 2, out_bytes = 2;
  int64_t bq = 128, kv_tile = 512, kv_block = 1, q_group = 1;
  bool qk_k = false, pv_v = false, qk_dma = true, src_sbuf = false;
  // P^T: of every p_dma_den tiles, the first p_dma_num go through a transposing SBUF-to-SBUF DMA
  // and the rest through TensorE (0/1: all TensorE, 1/1: all DMA, 1/2, 2/3: mixed).
  int p_dma_num = 0, p_dma_den = 1;
  bool sum_vector = false, resident = false, skip = false;
  int pipeline = 0;           // stage order of the step stream, see Generate
  int lead = 0;               // how many steps ahead the scores are issued (0-2, from pipeline)
  bool stats_scalar = false;  // small running-statistics ops on ScalarE (else VectorE)
  bool step_ops = false;      // one max and one exp instruction per softmax step (else per tile)
  // softmax=two_pass: a first pass over a query tile's keys forms its row max (QK^T, max); a
  // second recomputes QK^T and runs exp and PV with that final max, so the output accumulates in
  // PSUM with no rescaling and no step waits for the previous step's statistics.
  bool two_pass = false;
  // mask=matmul: a masked score tile gets kMaskValue added above the diagonal by a TensorE
  // matmul (identity x a constant triangle) into its PSUM bank, instead of an eviction and a
  // GpSimd affine_select (mask=select).
  bool mask_matmul = false;
  // exp_layout=st (two_pass only): the exp pass computes S^T (keys on partitions, K^T chunks
  // stationary) with -m added by ones x diag(-m) per chunk, so exp writes P^T directly (no
  // transposes) and a ones column appended to V makes PV also produce the row sums.
  bool st = false;
  // max_dtype=fp8 (two_pass): the max pass's QK^T runs on fp8 copies of Q^T and K^T (made on
  // GpSimd). The max it finds is approximate, which the two-pass softmax allows: the exp pass
  // uses that same m in P and in l, so the result is exact up to rounding (P may exceed 1 by
  // the fp8 error, far from overflow).
  bool max_fp8 = false;

  std::string evict;
  int bufs = 2;
  int shards = 1;
  // The analytic estimate's sampling (EstimateAttention; 1 everywhere else): only the query
  // groups g with g % group_stride == group_stride / 2 are generated, and a resident head's K/V
  // loads are left to the caller.
  int64_t group_stride = 1;

  int64_t q_tiles = 0, kv_tiles = 0, kv_blocks = 0;
  int s_slots = 0;  // score PSUM banks in rotation (all query tiles of a group)
  int p_slots = 0;  // P / P^T SBUF buffers in rotation
  int kv_ring = 0;  // K/V tile buffers
  bool tr_bank = false, pt_bank = false;
  float scale = 1;

  void Derive() {
    q_tiles = CeilDiv(sq, bq);
    kv_tiles = CeilDiv(sk, kv_tile);
    kv_blocks = CeilDiv(kv_tiles, kv_block);
    scale = float(1.0 / std::sqrt(double(d)));
  }
  // Per query tile: a step's tile maxima and sums plus the running statistics, or with
  // two_pass every tile's row max and row sums (each reduced once).
  static int64_t StatsBytes(const Plan& p) {
    return ((p.two_pass ? 2 * p.kv_tiles : p.kv_block) + 8) * 4;
  }
  // Q^T buffers per group member: the two groups in flight, and with two_pass a third so that
  // the next group's Q^T loads while its buffer's previous group is still in its exp pass.
  int q_sets() const { return two_pass ? 3 : 2; }
  // Bytes per partition of the P^T bank: a tile's 128-key chunks of transposed P, in the dtype
  // the target's TensorE transposes leave in PSUM.
  int64_t pt_bytes(const sim::Target& target) const {
    return CeilDiv(kv_tile, 128) * bq * sim::DTypeBytes(target.TransposePsumDType(dtype));
  }
  // Columns of a V chunk in SBUF: head_dim, plus the ones column with exp_layout=st.
  int64_t v_cols() const { return d + (st ? 1 : 0); }
  // Columns of the mask=matmul constant: [r, x] = kMaskValue where x > r; every masked window of
  // a tile (at most kv_tile columns) starts at x <= 128.
  int64_t mask_width() const { return 128 + kv_tile; }
  // Offset of the bottom-right aligned causal diagonal: query i sees keys j <= i + offset.
  int64_t offset() const { return sk - sq; }
};

// Builds the plan. `strict` adds the rules that only prune redundant configs; InvalidArgument
// with the violated rule.
absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict);

}  // namespace tessel::kernels::attention_internal

#endif  // TESSEL_KERNELS_ATTENTION_PLAN_H_

// The attention kernel: O = softmax(Q K^T / sqrt(head_dim) [+ causal mask]) V per (batch, head),
// flash-attention style (online or two-pass softmax over KV blocks, nothing of size seq_q x seq_k
// in HBM).
//
// Dims: batch, heads, seq_q, seq_k, head_dim (<= 128, the TensorE contraction limit) and
// causal, which is 1 for a causal mask and 2 for none (dims must be positive, so "not causal" is
// 2, not 0). The causal mask is bottom-right aligned as in flash-attention: query i sees keys
// j <= i + seq_k - seq_q, so causal problems need seq_q <= seq_k. Q, K, V and O are [batch, heads,
// seq, head_dim] row-major in HBM; O is bf16 for bf16/fp8 inputs and fp32 for fp32.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   block_q       query rows per tile (on partitions for the scores)
//   kv_tile       key columns per score tile (one PSUM bank of fp32)
//   kv_block      score tiles per online-softmax step (one running-max update and one rescale
//                 of the output accumulator per step)
//   q_group       query tiles processed together with their steps interleaved (independent
//                 work for the in-order engines; K/V tiles loaded once per group; costs PSUM)
//   qk_role       q: Q^T tiles stationary, S = Q K^T lands with queries on partitions;
//                 k: K^T chunks stationary, S^T lands in PSUM, is evicted (bf16) and transposed
//                 back through TensorE (cheaper when block_q is small)
//   pv_role       p: P^T chunks stationary, O[q, d] accumulates in PSUM;
//                 v: V chunks stationary, O^T[d, q] accumulates in PSUM (rescaling needs the
//                 per-query factors broadcast over partitions through TensorE; O^T is stored by
//                 a transposing DMA)
//   qk_transpose  dma: Q^T and K^T arrive by transposing DMA loads; tensor: plain loads, then
//                 TensorE transposes and PSUM evictions
//   p_transpose   tensor: P^T through TensorE transposes (PSUM, evicted); dma: SBUF-to-SBUF
//                 transposing DMA; half / two_thirds: that share of the P tiles (of the steps,
//                 with softmax_ops=step) by DMA, the rest through TensorE (balances the DMA
//                 queue against the evicting engines)
//   softmax_src   psum: max and exp read the scores from PSUM; sbuf: the scores are evicted
//                 first (bf16 for bf16/fp8 problems) and max/exp read SBUF
//   sum_engine    scalar: the exp activation accumulates the row sums; vector: a separate
//                 reduction of P on VectorE
//   stats_engine  vector | scalar: engine of the small per-step updates (exp bias, running sum)
//   evict         vector | scalar | split | gpsimd (invalid: GpSimd cannot read PSUM): the engine
//                 evicting transposes and scores
//   kv_resident   1: a head's K^T and V stay in SBUF for all its query tiles; 0: streamed per
//                 query tile
//   bufs          rotating buffers for streamed K/V tiles and the score/probability tiles
//   causal_skip   1: score tiles entirely above the diagonal are skipped; 0: computed and masked
//                 (only offered for causal problems)
//   pipeline      program order of a head's stream of softmax steps (across query groups;
//                 every engine runs its instructions in order): 0: each step's scores, softmax,
//                 P^T and PV in turn; 1: the next step's QK^T (and its K/V loads) is issued
//                 before this step's P^T and PV, so TensorE works while the softmax runs (one
//                 more K/V buffer set); 2: the next step's softmax too; 3: the next step's
//                 QK^T, this step's P^T, the next step's softmax, this step's PV (the P^T
//                 evictions fill the gap while the next running max is formed). 2 and 3 keep
//                 two steps of P buffers. 4 (softmax=two_pass only): the QK^T two steps
//                 ahead and the next step's softmax before this step's P^T and PV.
//   softmax_ops   tile: one max and one exp instruction per score tile; step: one each per
//                 softmax step, spanning its kv_block tiles (adjacent PSUM banks, at most the
//                 per-instruction free size), with one accumulated row sum; a step holding a
//                 masked tile read from PSUM keeps per-tile instructions (with mask=select)
//   softmax       online: running max, output rescaled per step; two_pass: a max pass (QK^T,
//                 row max) then an exp pass (QK^T again, exp with the final max, PV accumulated
//                 in PSUM over all steps, no rescale); a head's stream alternates one group's
//                 exp pass with the next group's max pass
//   mask          select: a diagonal tile is evicted and masked by a GpSimd affine_select;
//                 matmul: identity x a constant triangle (-32768 above the diagonal) is added
//                 in PSUM after QK^T (only offered for causal problems)
//   exp_layout    s: the exp pass computes S like the max pass; st (two_pass, pv_role=p): it
//                 computes S^T (K^T chunks stationary) plus ones x diag(-m), so exp writes P^T
//                 directly, and V's ones column makes PV accumulate the row sums
//   max_dtype     input | fp8 (two_pass, TensorE with fp8): the max pass's QK^T on fp8 copies
//                 of Q^T and K^T (GpSimd). The output stays exact up to rounding (the exp pass
//                 uses the same m for P and l); the fp8 error only bounds how far exp can
//                 exceed 1: safe while scale x |q| x |k| < ~700 and |Q|, |K| elements < 240
//   shards        cores the batch x heads pairs are split over
#ifndef TESSEL_KERNELS_ATTENTION_H_
#define TESSEL_KERNELS_ATTENTION_H_

#include "kernels/attention_fault.h"
#include "kernels/lowering/planned_kernel.h"

namespace tessel::kernels {

class AttentionKernel final : public PlannedKernel {
 public:
  AttentionKernel();
  // Causal (causal_skip and mask=matmul are only offered then), head_dim 128:
  // batch=1,heads=8,seq_q=1024,seq_k=1024,head_dim=128,causal=1.
  Problem Example() const override;
  // Also checks the causal convention, seq_q <= seq_k for causal problems, head_dim within the
  // TensorE contraction limit, and rejects systolic targets.
  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const override;
  Config Default(const Problem& problem, const sim::Target& target) const override;
  // Flops of QK^T and PV over the (query, key) pairs the mask keeps (about half for causal).
  Work MinimumWork(const Problem& problem) const override;
};

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ATTENTION_H_

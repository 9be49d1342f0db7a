// The conv2d kernel as an implicit GEMM: Y[n, k, p, q] = sum over (c, r, s) of
// Wt[k, c, r, s] * X[n, c, p * stride + r - padding, q * stride + s - padding], with X in NCHW,
// the weights pre-laid out as [C, R, S, K] (channels on partitions, as compilers store them once at
// load time) and Y in NKPQ. No im2col: each (channel tile, r, s) is one matmul over a shifted
// window of the input halo tile in SBUF, accumulated in PSUM.
//
// Schedule parameters (names are a contract with configs and the CLI):
//   stationary        weights: weight tiles [c, k] are stationary, pixels stream (PSUM [k, pix]);
//                     input: input windows [c, pix] are stationary, weights stream (PSUM [pix, k],
//                     stored with a transposing DMA)
//   tile_c            input channels per matmul (contraction on partitions); the last is ragged;
//                     256 (fp8 on snc3 only) is double-row: two channels per partition
//   tile_k            output channels per matmul
//   tile_pix          output pixels per matmul: whole output rows (tile_pix / Q of them) when a
//                     row fits, else segments of one row
//   block_k           k tiles that share one weight load
//   weights_resident  1: the core's weights are loaded once and stay in SBUF
//   loop_order        spatial_outer: each input halo is loaded once and used by all k blocks;
//                     k_outer: each weight block is loaded once and the inputs stream past it
//   bufs              rotating buffers for input halos and weight blocks
//   evict             PSUM eviction engine: vector, scalar or split (alternating)
//   shards            cores the (image, pixel tile) items are split over, else the k blocks
#ifndef TESSEL_KERNELS_CONV2D_H_
#define TESSEL_KERNELS_CONV2D_H_

#include "kernels/lowering/planned_kernel.h"

namespace tessel::kernels {

class Conv2dKernel final : public PlannedKernel {
 public:
  Conv2dKernel();
  // A ResNet-style 3x3 layer: N=8,C=256,H=28,W=28,K=256,R=3,S=3,stride=1,padding=1.
  Problem Example() const override;
  // Also rejects a filter larger than the padded input and padding >= the filter size.
  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const override;
  Config Default(const Problem& problem, const sim::Target& target) const override;
  Work MinimumWork(const Problem& problem) const override;
};

// Verify runs the schedule on the CPU on a reduced problem with proportionally reduced tiles
// (see conv2d.cc): every loop boundary, ragged tail, halo, accumulation order and shard split is
// kept.

// Test-only fault injection: deliberately broken schedules that Verify must catch.
enum class Conv2dFault {
  kNone,
  kDropRaggedChannelTile,  // the channel loop bound is floor(C / tile_c)
  kHaloOneRowShort,        // input halos are loaded one row short at the bottom
};
// Sets the fault for all later Lower/Verify calls in the process. Not thread-safe; tests only.
void SetConv2dFaultForTesting(Conv2dFault fault);

// How Lower writes the program: by default compact (runs of alike pixel tiles compressed into
// repeats, sim/compact.h, and a core whose share has the same shape as the core before it, as
// many items from the same pixel tile of an image or as many K blocks none ragged, a repeat of
// it: Program::RepeatPrevious); kFlat emits every instruction of every core (the reference a test
// compares with). Not thread-safe; tests only.
enum class Conv2dLowering { kCompact, kFlat };
void SetConv2dLoweringForTesting(Conv2dLowering lowering);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_CONV2D_H_

// The matmul kernel's parsed config (kernels/matmul.h): the plan its lowering, its CPU check and
// its analytic estimate (kernels/matmul_estimate.h) all start from. Internal to kernels/.
#ifndef TESSEL_KERNELS_MATMUL_PLAN_H_
#define TESSEL_KERNELS_MATMUL_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "kernels/lowering/gemm_plan.h"
#include "kernels/schedule_util.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels::matmul_internal {

constexpr std::array<std::string_view, 6> kLoopOrders = {"mnk", "mkn", "nmk", "nkm", "kmn", "knm"};

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan : GemmOperands, GemmTiling, GemmChoices, GemmBlocks {
  std::string order;
  int bufs = 2;
  int hoist = 0;
  int shards = 1;

  bool split_m = true;  // shards split M blocks (else N blocks)
  bool full_k = false;  // whole K reduction stays in PSUM
  int psum_slots = 0;   // PSUM accumulation groups in rotation
  int64_t live_acc_blocks = 0;
  int64_t sbuf_a = 0, sbuf_b = 0, sbuf_acc = 0, sbuf_stage = 0;  // per partition, one buffer
  int rows_per_partition = 1;  // 2 for fp8 double-row K tiles over 128
};

// Builds the plan. `strict` adds the rules that only prune redundant configs (blocking factors
// larger than needed, more shards than blocks); Verify's reduced problem turns them off.
// InvalidArgument with the violated rule for an invalid config.
absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict);

// The store of one msz x nsz output tile to HBM: from its partitions (N with stationary=b, where
// the tile is C^T and the store transposes, since C is row-major), on the store queue. The
// kernel emits it; the estimate counts it.
sim::Instruction TileStore(const Plan& plan, int64_t msz, int64_t nsz);

}  // namespace tessel::kernels::matmul_internal

#endif  // TESSEL_KERNELS_MATMUL_PLAN_H_

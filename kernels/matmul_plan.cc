#include "kernels/matmul_plan.h"

#include <algorithm>
#include <tuple>

#include "schema/strings.h"

namespace tessel::kernels::matmul_internal {

absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  if (absl::Status operands = ReadGemmOperands(problem, &p); !operands.ok()) return operands;
  int64_t bufs = 0, hoist = 0, shards = 0;
  if (absl::Status tiling = ReadGemmTiling(config, &p); !tiling.ok()) return tiling;
  if (absl::Status ints =
          IntParams(config, {{"bufs", &bufs}, {"hoist", &hoist, 0}, {"shards", &shards}});
      !ints.ok()) {
    return ints;
  }
  p.bufs = int(bufs);
  p.hoist = int(hoist);
  p.shards = int(shards);
  std::optional<std::string_view> order = config.Get("loop_order");
  if (!order || std::find(kLoopOrders.begin(), kLoopOrders.end(), *order) == kLoopOrders.end()) {
    return absl::InvalidArgumentError("loop_order must be one of mnk,mkn,nmk,nkm,kmn,knm");
  }
  p.order = std::string(*order);
  if (absl::Status choices = ReadGemmChoices(config, &p); !choices.ok()) return choices;
  if (p.hoist > 1) return absl::InvalidArgumentError("hoist must be 0 or 1");

  DeriveGemmBlocks(p, p, &p);
  if (target.systolic) return p;  // one GEMM instruction; the schedule does not apply

  // TensorE limits.
  if (absl::Status tile = CheckGemmTile(target, problem.dtype, p, p, p); !tile.ok()) return tile;
  p.rows_per_partition = int(CeilDiv(p.tile_k, target.sbuf_partitions));

  // Redundant blocking: a smaller power-of-two factor already covers the whole dimension.
  if (strict) {
    for (auto [name, block, tiles] :
         {std::tuple{"block_m", p.block_m, p.tiles_m}, std::tuple{"block_n", p.block_n, p.tiles_n},
          std::tuple{"block_k", p.block_k, p.tiles_k}}) {
      if (block > 1 && block / 2 >= tiles) {
        return absl::InvalidArgumentError(StrCat(name, "=", block, " is redundant: ", block / 2,
                                                 " already covers all ", tiles, " tiles"));
      }
    }
  }

  // Sharding over cores: M blocks if there are enough, else N blocks.
  if (p.shards > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds the ",
                                             target.cores_per_chip, " cores per chip of ",
                                             target.name));
  }
  if (p.blocks_m >= p.shards) {
    p.split_m = true;
  } else if (p.blocks_n >= p.shards) {
    p.split_m = false;
  } else if (strict) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds both the ", p.blocks_m,
                                             " M blocks and the ", p.blocks_n, " N blocks"));
  } else {
    p.shards = int(std::max(p.blocks_m, p.blocks_n));
    p.split_m = p.blocks_m >= p.blocks_n;
  }

  // PSUM: accumulation groups in rotation; the whole K stays in PSUM when K is the innermost
  // block loop and one block's output tiles fit.
  p.psum_slots = std::min(target.psum_banks, target.max_accumulation_groups);
  const int64_t groups_per_block = p.block_m * p.block_n;
  p.full_k = p.order[2] == 'k' && groups_per_block <= p.psum_slots;

  // SBUF per partition, one buffer each.
  const int64_t out_partitions_tile = p.stationary_b ? p.tile_n : p.tile_m;
  const int64_t out_free_tile = p.stationary_b ? p.tile_m : p.tile_n;
  p.sbuf_a = p.block_k * p.rows_per_partition * p.block_m * p.tile_m * p.in_bytes;
  p.sbuf_b = p.block_k * p.rows_per_partition * p.block_n * p.tile_n * p.in_bytes;
  p.live_acc_blocks = 0;
  if (!p.full_k && p.blocks_k > 1) {
    // Output blocks whose partial sums are live at once: those of the loops inside k.
    int64_t live = 1;
    for (size_t pos = p.order.find('k') + 1; pos < 3; ++pos) {
      live *= p.order[pos] == 'm' ? p.blocks_m : p.blocks_n;
    }
    if (p.shards > 1) {
      // Each core holds its share of the split dimension.
      bool inner_split = p.order.find(p.split_m ? 'm' : 'n') > p.order.find('k');
      if (inner_split) live = CeilDiv(live, p.shards);
    }
    p.live_acc_blocks = live;
    // The partial sums accumulate in SBUF in the output dtype, as NKI kernels do (the matmul
    // tutorial's result_tiles are allocated with the output's dtype and summed into with `+=`);
    // PSUM alone accumulates in fp32 (nki.isa.nc_matmul: "accumulation and results are always in
    // float32").
    p.sbuf_acc = groups_per_block * out_free_tile * p.out_bytes * live * out_partitions_tile /
                 std::min<int64_t>(out_partitions_tile, target.sbuf_partitions);
  }
  p.sbuf_stage = out_free_tile * p.out_bytes;
  const int64_t total =
      (p.sbuf_a + p.sbuf_b) * p.bufs + p.sbuf_acc + p.sbuf_stage * kGemmStagingBufs;
  if (total > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(
        StrCat("SBUF capacity: A blocks ", p.sbuf_a, " x ", p.bufs, " bufs + B blocks ", p.sbuf_b,
               " x ", p.bufs, " bufs + ", p.out_bytes == 4 ? "fp32" : "bf16", " accumulator ",
               p.sbuf_acc, " + output staging ", p.sbuf_stage * kGemmStagingBufs, " = ", total,
               " bytes per partition exceed the usable ", target.UsableSbufPerPartition()));
  }
  return p;
}

sim::Instruction TileStore(const Plan& plan, int64_t msz, int64_t nsz) {
  const int64_t partitions = plan.stationary_b ? nsz : msz;
  const int64_t free = plan.stationary_b ? msz : nsz;
  sim::Instruction store =
      sim::MakeDma(sim::Op::kDmaStore, int(partitions), free * plan.out_bytes, kGemmQueueStore);
  store.transpose = plan.stationary_b;
  return store;
}

}  // namespace tessel::kernels::matmul_internal

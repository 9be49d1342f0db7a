#include "kernels/matmul_estimate.h"

#include <algorithm>

#include "kernels/estimate_util.h"
#include "kernels/schedule_util.h"
#include "sim/program.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using matmul_internal::Plan;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

// A dimension cut into pieces of `size`: `count` pieces, the last of `last` (<= size).
struct Cut {
  int64_t count = 1, size = 1, last = 1;
  Cut(int64_t extent, int64_t piece) {
    size = std::min(piece, extent);
    count = CeilDiv(extent, size);
    last = extent - (count - 1) * size;
  }
  // Calls f(piece size, how many pieces have it) for the full pieces and the last one.
  template <typename F>
  void Each(F f) const {
    if (count > 1) f(size, double(count - 1));
    f(last, 1.0);
  }
};

int DimOf(char c) { return c == 'm' ? 0 : c == 'n' ? 1 : 2; }

}  // namespace

MatmulEstimate EstimateMatmul(const Plan& p, const sim::Target& t, double batches, int64_t group,
                              const double* block_loads) {
  MatmulEstimate e;
  if (t.systolic) {
    e.tensor_ns = EngineNs(t, sim::MakeMatmul(p.dtype, int(p.k), int(p.m), int(p.n)));
    e.total_ns = e.tensor_ns;
    return e;
  }
  // The busiest core: the most blocks of the split dimension.
  const int64_t split_blocks = p.split_m ? p.blocks_m : p.blocks_n;
  const int64_t per_core = CeilDiv(split_blocks, p.shards);
  int64_t blocks[3] = {p.blocks_m, p.blocks_n, p.blocks_k};
  blocks[p.split_m ? 0 : 1] = per_core;
  const int64_t mc = p.split_m ? std::min(p.m, per_core * p.block_m * p.tile_m) : p.m;
  const int64_t nc = p.split_m ? p.n : std::min(p.n, per_core * p.block_n * p.tile_n);
  const Cut tm(mc, p.tile_m), tn(nc, p.tile_n), tk(p.k, p.tile_k);
  const Cut bm(mc, p.block_m * p.tile_m), bn(nc, p.block_n * p.tile_n);

  // Block loads: every block iteration without hoisting; with it, whenever the operand's block
  // indices change, i.e. once per iteration of the loops down to the innermost of its two dims
  // that has more than one block.
  int64_t count[3];
  for (int l = 0; l < 3; ++l) count[l] = blocks[DimOf(p.order[size_t(l)])];
  const double iterations = double(count[0]) * double(count[1]) * double(count[2]);
  auto loads = [&](int d1, int d2) {
    if (p.hoist == 0) return iterations;
    int last = -1;
    for (int l = 0; l < 3; ++l) {
      const int d = DimOf(p.order[size_t(l)]);
      if ((d == d1 || d == d2) && count[l] > 1) last = l;
    }
    double n = 1;
    for (int l = 0; l <= last; ++l) n *= double(count[l]);
    return n;
  };
  // How many times each distinct block is loaded, on average.
  const double loads_a = block_loads ? block_loads[0] : loads(0, 2);
  const double loads_b = block_loads ? block_loads[1] : loads(2, 1);
  const double per_a = loads_a / double(blocks[0] * blocks[2]);
  const double per_b = loads_b / double(blocks[1] * blocks[2]);

  DmaLoad dma;
  const int rows = p.rows_per_partition;
  auto add_loads = [&](const Cut& free, double per, int queue) {
    tk.Each([&](int64_t ksz, double nk) {
      free.Each([&](int64_t xsz, double nx) {
        sim::Instruction load = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(ksz, rows)),
                                             group * xsz * p.in_bytes * rows, queue);
        load.chunk_bytes = int32_t(xsz * p.in_bytes);
        dma.Add(t, load, per * nk * nx * batches / double(group));
      });
    });
  };
  add_loads(bm, per_a, kGemmQueueA);
  add_loads(bn, per_b, kGemmQueueB);

  // Matmuls, evictions and stores per output tile.
  const bool every_reload = p.block_k > 1 || p.stationary_b;
  const int64_t evictions = p.full_k || p.blocks_k == 1 ? 1 : p.blocks_k;
  // Vector and Scalar time of the evictions, before the last K block and in it.
  struct Phase {
    double vector = 0, scalar = 0;
    double Evict(const sim::Target& t) const {
      return t.port_conflict_vector_scalar_psum ? vector + scalar : std::max(vector, scalar);
    }
  } early, final;
  double scalar_share = p.evict == "scalar" ? 1.0 : p.evict == "split" ? 0.5 : 0.0;
  tm.Each([&](int64_t msz, double nm) {
    tn.Each([&](int64_t nsz, double nn) {
      const double tiles = nm * nn * batches;
      const int64_t stat = p.stationary_b ? nsz : msz, moving = p.stationary_b ? msz : nsz;
      tk.Each([&](int64_t ksz, double nk) {
        sim::Instruction mm =
            sim::MakeMatmul(p.dtype, int(CeilDiv(ksz, rows)), int(stat), int(moving), every_reload);
        e.tensor_ns += EngineNs(t, mm, tiles * nk);
      });
      // The final eviction of each tile (its copy with one K block, else its last add) runs in
      // the last K block, the others before it.
      const int parts = int(stat), free = int(moving);
      sim::Instruction copy =
          sim::MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, free, parts, Mem::kPsum);
      copy.dtype = sim::DType::kFp32;
      const double copy_v = EngineNs(t, copy, tiles) * (1 - scalar_share);
      copy.engine = EngineKind::kScalar;
      const double copy_s = EngineNs(t, copy, tiles) * scalar_share;
      sim::Instruction add =
          sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, free, parts, Mem::kPsum);
      add.dtype = sim::DType::kFp32;
      add.in1 = Mem::kSbuf;
      const double add_v = EngineNs(t, add, tiles);
      Phase& copy_phase = evictions == 1 ? final : early;
      copy_phase.vector += copy_v;
      copy_phase.scalar += copy_s;
      if (evictions > 1) {
        early.vector += add_v * double(evictions - 2);
        final.vector += add_v;
      }
      dma.Add(t, matmul_internal::TileStore(p, msz, nsz), tiles);
    });
  });
  e.evict_ns = early.Evict(t) + final.Evict(t);
  const int cores = p.shards;
  e.load_ns = std::max(dma.QueueNs(t, cores, kGemmQueueA), dma.QueueNs(t, cores, kGemmQueueB));
  e.store_ns = dma.QueueNs(t, cores, kGemmQueueStore);

  // Not overlapped: the first A and B blocks arrive before the first matmul (at their queues'
  // shares), and the last tile's store leaves after the last eviction.
  const double first_dmas = double(std::min(p.block_k, tk.count));
  const double a_dmas = per_a * double(tk.count) * double(bm.count);
  const double b_dmas = per_b * double(tk.count) * double(bn.count);
  e.fill_ns = std::max(dma.QueueNs(t, cores, kGemmQueueA) * first_dmas / a_dmas,
                       dma.QueueNs(t, cores, kGemmQueueB) * first_dmas / b_dmas);
  // The simulator moves a transfer at the full rates and charges its queue the time at its shares
  // before the next may follow, so the stores stream at the store queue's share. With few output
  // tiles (a skinny M or N) that share is tiny and a store's turn long. The output tiles that
  // finish together (all of the core's when K is the outermost loop, those of one block of the
  // outer dim when K is in the middle, one block's when it is innermost) wait for each other's
  // turns through the two staging buffers; a group's last store overlaps the next group's work,
  // the very last one leaves after everything else.
  const double stores = double(tm.count * tn.count) * batches;
  const size_t k_level = p.order.find('k');
  const bool m_outer = p.order[0] == 'm';
  const double block_tiles_m = double(std::min(p.block_m, tm.count));
  const double block_tiles_n = double(std::min(p.block_n, tn.count));
  const double together = k_level == 0   ? double(tm.count * tn.count)
                          : k_level == 1 ? (m_outer ? block_tiles_m * double(tn.count)
                                                    : block_tiles_n * double(tm.count))
                                         : block_tiles_m * block_tiles_n;
  const double waiting_stores_ns = e.store_ns * (1 - 1 / together);
  e.fill_ns += DmaLoad::LatencyNs(t, matmul_internal::TileStore(p, tm.last, tn.last));

  // Two phases that do not overlap: the block iterations before each output block's last K
  // block, and those last K blocks, which evict and store every output tile. Only two staging
  // buffers sit between the final evictions and the stores, so the evictions of the tiles that
  // finish together wait for the store queue, whose share of the DMA engines and HBM is fixed.
  const double last_k_tiles = double(tk.count - (p.blocks_k - 1) * p.block_k);
  const double final_k = last_k_tiles / double(tk.count);
  auto phase = [&](const Phase& ph, double k_share, double store) {
    const double compute = std::max(e.tensor_ns * k_share, ph.Evict(t));
    const double load = e.load_ns * k_share;
    return std::max({compute, load, store});
  };
  e.final_ns = phase(final, final_k, waiting_stores_ns);
  e.total_ns = phase(early, 1 - final_k, 0) + e.final_ns + e.fill_ns;
  // And the store queue streams all but the last store at its share.
  e.total_ns = std::max(e.total_ns, e.store_ns * (stores - 1) / stores + e.fill_ns);

  // Latency: a block's loads start when the buffer they overwrite is free (its last matmul's
  // result, `bufs` loads earlier) and the block's matmuls wait for them, so with few buffers an
  // iteration that reloads an operand also waits for part of its load latency.
  const double visits = iterations * batches / double(group);  // block iterations, all batches
  const double compute = std::max(e.tensor_ns, e.evict_ns) / visits;
  const double result_ns =
      double(sim::FirstResultLatencyCycles(t)) / t.engine_ghz[int(EngineKind::kTensor)];
  auto extra = [&](const Cut& free, double loads_per_iteration, int queue) {
    sim::Instruction load = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(tk.size, rows)),
                                         group * free.size * p.in_bytes * rows, queue);
    load.chunk_bytes = int32_t(free.size * p.in_bytes);
    const double latency = dma.BurstNs(t, cores, load, double(std::min(p.block_k, tk.count)));
    // The matmuls of a K tile start once that tile has arrived, so within a block the loads
    // and matmuls overlap tile by tile.
    const double nk = double(std::min(p.block_k, tk.count));
    const double block = std::max(compute, latency) + std::min(compute, latency) / nk + result_ns;
    return loads_per_iteration * std::max(0.0, block / double(p.bufs) - compute);
  };
  e.chain_ns = visits * compute + visits * std::max(extra(bm, loads_a / iterations, kGemmQueueA),
                                                    extra(bn, loads_b / iterations, kGemmQueueB));
  e.total_ns = std::max(e.total_ns, e.chain_ns + e.fill_ns);
  return e;
}
Space::Estimate MatmulEstimator(const Problem& problem, const sim::Target& target) {
  return [problem, target](const Config& config) -> std::optional<double> {
    absl::StatusOr<Plan> plan = matmul_internal::MakePlan(problem, config, target, /*strict=*/true);
    if (!plan.ok()) return std::nullopt;
    return EstimateMatmul(*plan, target).total_ns;
  };
}

}  // namespace tessel::kernels

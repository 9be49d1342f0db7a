#include "kernels/conv2d.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <tuple>
#include <type_traits>

#include "kernels/estimate_util.h"
#include "kernels/lowering/gemm_emit.h"
#include "kernels/lowering/verify_util.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"
#include "sim/compact.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

Conv2dFault g_fault = Conv2dFault::kNone;
Conv2dLowering g_lowering = Conv2dLowering::kCompact;

constexpr int kStagingBufs = 2;
constexpr int kQueueInput = 0, kQueueWeights = 1, kQueueStore = 2;

const std::vector<std::string> kTileC = {"32", "64", "128", "256"};  // 256: fp8 double-row
const std::vector<std::string> kTileK = {"64", "128", "256", "512"};
const std::vector<std::string> kTilePix = {"64", "128", "256", "512"};
const std::vector<std::string> kBlockK = {"1", "2", "4"};

struct Plan {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, stride = 1, pad = 0, p = 0, q = 0;
  DType dtype = DType::kBf16;
  int in_bytes = 2, out_bytes = 2;
  bool input_stationary = false;
  int64_t tile_c = 128, tile_k = 128, tile_pix = 512, block_k = 1;
  bool weights_resident = false, k_outer = false;
  int bufs = 2;
  std::string evict = "vector";
  int shards = 1;
  // Derived.
  int64_t c_tiles = 0, k_tiles = 0, k_blocks = 0;
  bool row_mode = true;  // pixel tiles are whole output rows
  int64_t rows_per_tile = 1, q_segments = 1, pix_tiles = 0, items = 0;
  bool split_items = true;
  int rows_per_partition = 1;  // channels per SBUF partition: 2 for fp8 double-row tiles over 128
  int psum_slots = 8;
  int64_t halo_rows = 0, halo_cols = 0;  // largest input halo (buffer size)
};

struct PixTile {
  int64_t p0 = 0, np = 1, q0 = 0, nq = 1;
  int64_t pixels() const { return np * nq; }
};

// One matmul step: input channels [c0, c0 + c) of image n at filter offset (r, s) against
// output channels [k0, k0 + k) (column kcol of the weight block) for the pixels of `tile`, into
// PSUM group `slot`; `input` and `weights` name the SBUF buffers read, and the handles it depends
// on (-1: none).
struct ConvMatmul {
  int32_t input = 0, weights = 0;
  int slot = 0;
  int64_t n = 0, c0 = 0, c = 0, k0 = 0, k = 0, kcol = 0;
  PixTile tile;
  int64_t r = 0, s = 0;
  bool start = false, reload = true;
  int32_t after_input = -1, after_weights = -1, after_slot = -1;
};

struct Halo {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

PixTile TileAt(const Plan& p, int64_t t) {
  PixTile tile;
  if (p.row_mode) {
    tile.p0 = t * p.rows_per_tile;
    tile.np = std::min(p.rows_per_tile, p.p - tile.p0);
    tile.q0 = 0;
    tile.nq = p.q;
  } else {
    tile.p0 = t / p.q_segments;
    tile.np = 1;
    tile.q0 = (t % p.q_segments) * p.tile_pix;
    tile.nq = std::min(p.tile_pix, p.q - tile.q0);
  }
  return tile;
}

Halo HaloOf(const Plan& p, const PixTile& t) {
  Halo h;
  const int64_t lo = std::max<int64_t>(0, t.p0 * p.stride - p.pad);
  const int64_t hi = std::min<int64_t>(p.h, (t.p0 + t.np - 1) * p.stride + p.r - p.pad);
  const int64_t clo = std::max<int64_t>(0, t.q0 * p.stride - p.pad);
  const int64_t chi = std::min<int64_t>(p.w, (t.q0 + t.nq - 1) * p.stride + p.s - p.pad);
  h.row0 = lo;
  h.rows = std::max<int64_t>(0, hi - lo);
  h.col0 = clo;
  h.cols = std::max<int64_t>(0, chi - clo);
  if (g_fault == Conv2dFault::kHaloOneRowShort && h.rows > 1) --h.rows;
  return h;
}

void Derive(Plan& p, const sim::Target& target) {
  p.c_tiles = CeilDiv(p.c, p.tile_c);
  p.rows_per_partition = int(CeilDiv(p.tile_c, std::max(1, target.sbuf_partitions)));
  p.k_tiles = CeilDiv(p.k, p.tile_k);
  p.k_blocks = CeilDiv(p.k_tiles, p.block_k);
  p.row_mode = p.q <= p.tile_pix;
  p.rows_per_tile = p.row_mode ? std::max<int64_t>(1, p.tile_pix / p.q) : 1;
  p.q_segments = p.row_mode ? 1 : CeilDiv(p.q, p.tile_pix);
  p.pix_tiles = p.row_mode ? CeilDiv(p.p, p.rows_per_tile) : p.p * p.q_segments;
  p.items = p.n * p.pix_tiles;
  p.psum_slots = std::max(1, std::min(target.psum_banks, target.max_accumulation_groups));
  p.halo_rows = 0;
  p.halo_cols = 0;
  for (int64_t t = 0; t < std::min<int64_t>(p.pix_tiles, 2); ++t) {
    PixTile tile = TileAt(p, t);
    p.halo_rows = std::max(p.halo_rows, (tile.np - 1) * p.stride + p.r);
    p.halo_cols = std::max(p.halo_cols, (tile.nq - 1) * p.stride + p.s);
  }
}

// SBUF bytes per partition: input halos, weights, output staging.
struct Sbuf {
  int64_t input = 0, weights = 0, staging = 0;
  int64_t total() const { return input + weights + staging; }
};

Sbuf SbufOf(const Plan& p) {
  Sbuf b;
  const int64_t halo = p.halo_rows * p.halo_cols * p.in_bytes * p.rows_per_partition;
  // spatial_outer keeps all channel tiles of a halo for the k blocks; k_outer streams them.
  b.input = halo * (p.k_outer ? 1 : p.c_tiles) * p.bufs;
  const int64_t block_cols = std::min(p.block_k * p.tile_k, p.k);
  const int64_t per_block = p.r * p.s * block_cols * p.in_bytes * p.c_tiles * p.rows_per_partition;
  b.weights = p.weights_resident ? p.r * p.s * p.k * p.in_bytes * p.c_tiles * p.rows_per_partition
                                 : per_block * p.bufs;
  const int64_t out_free = p.input_stationary ? p.tile_k : p.tile_pix;
  b.staging = out_free * 4 * kStagingBufs;
  return b;
}

absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  p.n = *problem.dims.Get("N");
  p.c = *problem.dims.Get("C");
  p.h = *problem.dims.Get("H");
  p.w = *problem.dims.Get("W");
  p.k = *problem.dims.Get("K");
  p.r = *problem.dims.Get("R");
  p.s = *problem.dims.Get("S");
  p.stride = *problem.dims.Get("stride");
  p.pad = *problem.dims.Get("padding");
  p.p = (p.h + 2 * p.pad - p.r) / p.stride + 1;
  p.q = (p.w + 2 * p.pad - p.s) / p.stride + 1;
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  p.dtype = *dtype;
  p.in_bytes = sim::DTypeBytes(p.dtype);
  p.out_bytes = OutputBytes(p.dtype);

  absl::StatusOr<std::string> stationary = ChoiceParam(config, "stationary", {"weights", "input"});
  if (!stationary.ok()) return stationary.status();
  absl::StatusOr<std::string> tile_c = ChoiceParam(config, "tile_c", kTileC);
  if (!tile_c.ok()) return tile_c.status();
  absl::StatusOr<std::string> tile_k = ChoiceParam(config, "tile_k", kTileK);
  if (!tile_k.ok()) return tile_k.status();
  absl::StatusOr<std::string> tile_pix = ChoiceParam(config, "tile_pix", kTilePix);
  if (!tile_pix.ok()) return tile_pix.status();
  absl::StatusOr<std::string> block_k = ChoiceParam(config, "block_k", kBlockK);
  if (!block_k.ok()) return block_k.status();
  absl::StatusOr<std::string> resident = ChoiceParam(config, "weights_resident", {"0", "1"});
  if (!resident.ok()) return resident.status();
  absl::StatusOr<std::string> order =
      ChoiceParam(config, "loop_order", {"spatial_outer", "k_outer"});
  if (!order.ok()) return order.status();
  absl::StatusOr<int64_t> bufs = IntParam(config, "bufs");
  if (!bufs.ok()) return bufs.status();
  absl::StatusOr<std::string> evict = ChoiceParam(config, "evict", {"vector", "scalar", "split"});
  if (!evict.ok()) return evict.status();
  absl::StatusOr<int64_t> shards = IntParam(config, "shards");
  if (!shards.ok()) return shards.status();
  p.input_stationary = *stationary == "input";
  p.tile_c = std::stoll(*tile_c);
  p.tile_k = std::stoll(*tile_k);
  p.tile_pix = std::stoll(*tile_pix);
  p.block_k = std::stoll(*block_k);
  p.weights_resident = *resident == "1";
  p.k_outer = *order == "k_outer";
  p.bufs = int(*bufs);
  p.evict = *evict;
  p.shards = int(*shards);
  Derive(p, target);
  if (target.systolic) return p;

  if (absl::Status tile = CheckMatmulTile(
          target, p.dtype, problem.dtype, "tile_c", p.tile_c,
          StrCat("stationary=", *stationary, ": ", p.input_stationary ? "tile_pix=" : "tile_k="),
          p.input_stationary ? p.tile_pix : p.tile_k, p.input_stationary ? p.tile_k : p.tile_pix);
      !tile.ok()) {
    return tile;
  }
  if (p.shards > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds the ",
                                             target.cores_per_chip, " cores per chip of ",
                                             target.name));
  }
  if (strict) {
    for (auto [name, tile, dim, smallest] :
         {std::tuple{"tile_c", p.tile_c, p.c, int64_t(32)},
          std::tuple{"tile_k", p.tile_k, p.k, int64_t(64)},
          std::tuple{"tile_pix", p.tile_pix, p.p * p.q, int64_t(64)}}) {
      if (tile > smallest && tile / 2 >= dim) {
        return absl::InvalidArgumentError(
            StrCat(name, "=", tile, " is redundant: ", tile / 2, " already covers all ", dim));
      }
    }
    if (p.block_k > 1 && p.block_k / 2 >= p.k_tiles) {
      return absl::InvalidArgumentError(StrCat("block_k=", p.block_k,
                                               " is redundant: ", p.block_k / 2,
                                               " already covers all ", p.k_tiles, " k tiles"));
    }
  }
  if (p.items < p.shards && p.k_blocks < p.shards) {
    if (strict) {
      return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds both the ", p.items,
                                               " (image, pixel tile) items and the ", p.k_blocks,
                                               " k blocks"));
    }
    p.shards = int(std::max(p.items, p.k_blocks));
  }
  p.split_items = p.items >= p.shards;
  const Sbuf sbuf = SbufOf(p);
  if (sbuf.total() > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(StrCat(
        "SBUF capacity: input halos ", sbuf.input, " + weights ", sbuf.weights,
        p.weights_resident ? " (resident)" : "", " + output staging ", sbuf.staging, " = ",
        sbuf.total(), " bytes per partition exceed the usable ", target.UsableSbufPerPartition()));
  }
  return p;
}

// Walks the schedule and tells the emitter each step, with the dependencies the hardware needs
// (buffer reuse waits for the last reader). Shared by the lowering and the CPU execution.
// A core's schedule state: the input, weight, PSUM and staging buffers' loads and last readers,
// and the counters of their rotations (what the compact lowering compares between items).
struct CoreState {
  std::vector<int32_t> in_load, in_reader, w_load, w_reader, psum_reader;
  std::array<int32_t, kStagingBufs> stage_reader;
  int64_t in_count = 0, w_count = 0, group_count = 0, stage_count = 0, evict_count = 0;

  // Input buffers: slot x channel tile. Weight buffers: slot x channel tile (or, resident, K
  // block x channel tile).
  explicit CoreState(const Plan& p)
      : in_load(p.k_outer ? p.bufs : p.bufs * p.c_tiles, -1),
        in_reader(in_load.size(), -1),
        w_load(p.weights_resident ? p.k_blocks * p.c_tiles : p.bufs * p.c_tiles, -1),
        w_reader(w_load.size(), -1),
        psum_reader(p.psum_slots, -1) {
    stage_reader.fill(-1);
  }
};

// Items [begin, end) whose pixel tiles emit alike: the same pixels and the same halo.
struct ItemRun {
  int64_t begin = 0, end = 0;
};

// The runs of at least 8 alike items among items [lo, hi).
std::vector<ItemRun> ItemRuns(const Plan& p, int64_t lo, int64_t hi) {
  auto shape = [&](int64_t it) {
    const PixTile tile = TileAt(p, it % p.pix_tiles);
    const Halo halo = HaloOf(p, tile);
    return std::array<int64_t, 4>{tile.np, tile.nq, halo.rows, halo.cols};
  };
  std::vector<ItemRun> runs;
  int64_t begin = lo;
  for (int64_t it = lo + 1; it <= hi; ++it) {
    if (it < hi && shape(it) == shape(begin)) continue;
    if (it - begin >= 8) runs.push_back({begin, it});
    begin = it;
  }
  return runs;
}

template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  int64_t c_tiles = p.c_tiles;
  if (g_fault == Conv2dFault::kDropRaggedChannelTile && p.c % p.tile_c != 0 && p.c > p.tile_c) {
    c_tiles = p.c / p.tile_c;
  }
  const int64_t split = p.split_items ? p.items : p.k_blocks;
  // A core's program depends only on the shape of its share: as many items starting at the same
  // pixel tile of an image, or as many K blocks of which none is ragged (only the last can be).
  auto alike = [&](int64_t lo, int64_t hi, int64_t prev_lo, int64_t prev_hi) {
    if (hi - lo != prev_hi - prev_lo) return false;
    if (p.split_items) return (lo - prev_lo) % p.pix_tiles == 0;
    return hi < p.k_blocks || p.k % (p.block_k * p.tile_k) == 0;
  };
  for (int core = 0; core < p.shards; ++core) {
    const int64_t lo = ShardBegin(split, p.shards, core),
                  hi = ShardBegin(split, p.shards, core + 1);
    if (core > 0 && alike(lo, hi, ShardBegin(split, p.shards, core - 1), lo) && e.CopyCore(core)) {
      continue;
    }
    const int64_t item_lo = p.split_items ? lo : 0, item_hi = p.split_items ? hi : p.items;
    const int64_t kb_lo = p.split_items ? 0 : lo, kb_hi = p.split_items ? p.k_blocks : hi;
    e.BeginCore(core, p);

    CoreState state(p);
    std::vector<int32_t>&in_load = state.in_load, &in_reader = state.in_reader;
    std::vector<int32_t>&w_load = state.w_load, &w_reader = state.w_reader;
    std::vector<int32_t>& psum_reader = state.psum_reader;
    std::array<int32_t, kStagingBufs>& stage_reader = state.stage_reader;
    int64_t &in_count = state.in_count, &w_count = state.w_count;
    int64_t &group_count = state.group_count, &stage_count = state.stage_count;
    int64_t& evict_count = state.evict_count;

    auto load_weights = [&](int64_t kb, int64_t slot) {
      const int64_t k0 = kb * p.block_k * p.tile_k;
      const int64_t ksz = std::min(p.block_k * p.tile_k, p.k - k0);
      for (int64_t ct = 0; ct < c_tiles; ++ct) {
        const int64_t id = slot * p.c_tiles + ct;
        const int64_t c0 = ct * p.tile_c, csz = std::min(p.tile_c, p.c - c0);
        w_load[id] = e.LoadWeights(int32_t(id), c0, csz, k0, ksz, w_reader[id]);
      }
    };
    if (p.weights_resident) {
      for (int64_t kb = kb_lo; kb < kb_hi; ++kb) load_weights(kb, kb);
    }
    // Input halo of item `it` for channel tile ct into buffer `id`.
    auto load_input = [&](int64_t it, int64_t ct, int64_t id) {
      const int64_t n = it / p.pix_tiles;
      const PixTile tile = TileAt(p, it % p.pix_tiles);
      const int64_t c0 = ct * p.tile_c, csz = std::min(p.tile_c, p.c - c0);
      in_load[id] = e.LoadInput(int32_t(id), n, c0, csz, HaloOf(p, tile), in_reader[id]);
    };
    // All k tiles of block kb for item it, weights in w_ids[ct]. spatial_outer: the item's halos
    // are in in_ids[ct]; the k tiles accumulate one after the other. k_outer: the halos stream
    // through the rotating buffers one channel tile at a time, so the block's k tiles accumulate
    // in PSUM side by side (block_k groups live at once).
    auto compute = [&](int64_t it, int64_t kb, const std::vector<int64_t>& in_ids,
                       const std::vector<int64_t>& w_ids) {
      const int64_t n = it / p.pix_tiles;
      const PixTile tile = TileAt(p, it % p.pix_tiles);
      const int64_t kt_begin = kb * p.block_k;
      const int64_t kt_end = std::min(p.k_tiles, (kb + 1) * p.block_k);
      std::vector<int> slots(kt_end - kt_begin);
      std::vector<int32_t> last_mm(slots.size(), -1);
      auto matmuls = [&](int64_t kt, int64_t ct, int64_t in_id) {
        const int64_t k0 = kt * p.tile_k, ksz = std::min(p.tile_k, p.k - k0);
        const int64_t kcol = k0 - kt_begin * p.tile_k;  // column within the weight block
        const int64_t c0 = ct * p.tile_c, csz = std::min(p.tile_c, p.c - c0);
        const int slot = slots[kt - kt_begin];
        for (int64_t r = 0; r < p.r; ++r) {
          for (int64_t s = 0; s < p.s; ++s) {
            const bool start = ct == 0 && r == 0 && s == 0;
            const int32_t mm = e.Matmul({.input = int32_t(in_id),
                                         .weights = int32_t(w_ids[ct]),
                                         .slot = slot,
                                         .n = n,
                                         .c0 = c0,
                                         .c = csz,
                                         .k0 = k0,
                                         .k = ksz,
                                         .kcol = kcol,
                                         .tile = tile,
                                         .r = r,
                                         .s = s,
                                         .start = start,
                                         .reload = true,
                                         .after_input = in_load[in_id],
                                         .after_weights = w_load[w_ids[ct]],
                                         .after_slot = start ? psum_reader[slot] : -1});
            last_mm[kt - kt_begin] = mm;
            in_reader[in_id] = mm;
            w_reader[w_ids[ct]] = mm;
          }
        }
      };
      auto finish = [&](int64_t kt) {
        const int64_t k0 = kt * p.tile_k, ksz = std::min(p.tile_k, p.k - k0);
        const int slot = slots[kt - kt_begin];
        const EngineKind engine = EvictEngine(p.evict, evict_count++);
        const int stage = int(stage_count++ % kStagingBufs);
        const int32_t ev =
            e.Evict(slot, stage, engine, ksz, tile, last_mm[kt - kt_begin], stage_reader[stage]);
        psum_reader[slot] = ev;
        stage_reader[stage] = e.Store(stage, n, k0, ksz, tile, ev);
      };
      if (!p.k_outer) {
        for (int64_t kt = kt_begin; kt < kt_end; ++kt) {
          slots[kt - kt_begin] = int(group_count++ % p.psum_slots);
          for (int64_t ct = 0; ct < c_tiles; ++ct) matmuls(kt, ct, in_ids[ct]);
          finish(kt);
        }
        return;
      }
      for (int64_t kt = kt_begin; kt < kt_end; ++kt) {
        slots[kt - kt_begin] = int(group_count++ % p.psum_slots);
      }
      for (int64_t ct = 0; ct < c_tiles; ++ct) {
        const int64_t in_id = in_count++ % p.bufs;
        load_input(it, ct, in_id);
        for (int64_t kt = kt_begin; kt < kt_end; ++kt) matmuls(kt, ct, in_id);
      }
      for (int64_t kt = kt_begin; kt < kt_end; ++kt) finish(kt);
    };

    std::vector<int64_t> in_ids(p.c_tiles), w_ids(p.c_tiles);
    // Alike items emit alike from alike states: an emitter may compress runs of them.
    auto runs = [&] { return ItemRuns(p, item_lo, item_hi); };
    if (!p.k_outer) {
      auto item = [&](int64_t it) {
        const int64_t slot = in_count++ % p.bufs;
        for (int64_t ct = 0; ct < c_tiles; ++ct) {
          in_ids[ct] = slot * p.c_tiles + ct;
          load_input(it, ct, in_ids[ct]);
        }
        for (int64_t kb = kb_lo; kb < kb_hi; ++kb) {
          const int64_t wslot = p.weights_resident ? kb : w_count++ % p.bufs;
          if (!p.weights_resident) load_weights(kb, wslot);
          for (int64_t ct = 0; ct < p.c_tiles; ++ct) w_ids[ct] = wslot * p.c_tiles + ct;
          compute(it, kb, in_ids, w_ids);
        }
      };
      e.Items(state, item_lo, item_hi, runs, item);
    } else {
      for (int64_t kb = kb_lo; kb < kb_hi; ++kb) {
        const int64_t wslot = p.weights_resident ? kb : w_count++ % p.bufs;
        if (!p.weights_resident) load_weights(kb, wslot);
        for (int64_t ct = 0; ct < p.c_tiles; ++ct) w_ids[ct] = wslot * p.c_tiles + ct;
        auto item = [&](int64_t it) { compute(it, kb, in_ids, w_ids); };
        e.Items(state, item_lo, item_hi, runs, item);
      }
    }
  }
}

// Turns schedule steps into simulator instructions. `ProgramT` is sim::Program, or
// CountingProgram for the analytic estimate (which keeps only the instructions' costs).
template <typename ProgramT>
class SimEmitter {
 public:
  // A simulator program (else the estimate's counting one), written through a sim::StreamWriter.
  static constexpr bool kSim = std::is_same_v<ProgramT, sim::Program>;

  SimEmitter(const sim::Target& target, ProgramT* program) : target_(target), program_(program) {}

  // Core `core` runs the same program as core - 1 (Generate checked their shares).
  bool CopyCore(int) {
    if constexpr (kSim) {
      if (g_lowering != Conv2dLowering::kCompact) return false;
      program_->RepeatPrevious();
      return true;
    }
    return false;
  }

  void BeginCore(int core, const Plan& p) {
    p_ = &p;
    core_ = &program_->Core(size_t(core));
    if constexpr (kSim) writer_.Begin(core_, g_lowering == Conv2dLowering::kCompact);
    const Sbuf sbuf = SbufOf(p);
    const int in_parts = int(std::min<int64_t>(p.tile_c, target_.sbuf_partitions));
    const int64_t out_part = p.input_stationary ? p.tile_pix : p.tile_k;
    const int out_parts = int(std::min<int64_t>(out_part, target_.sbuf_partitions));
    const int64_t out_free = p.input_stationary ? p.tile_k : p.tile_pix;
    core_->allocations.push_back({"input_halos", Mem::kSbuf, 0, in_parts, sbuf.input, 1});
    core_->allocations.push_back({"weights", Mem::kSbuf, 0, in_parts, sbuf.weights, 1});
    core_->allocations.push_back(
        {"output_staging", Mem::kSbuf, 0, out_parts, sbuf.staging / kStagingBufs, kStagingBufs});
    core_->allocations.push_back({"psum", Mem::kPsum, 0, out_parts, out_free * 4, p.psum_slots});
  }

  int32_t LoadInput(int32_t, int64_t, int64_t, int64_t csz, const Halo& halo, int32_t dep) {
    const Plan& p = *p_;
    // Whole rows without padding are contiguous; otherwise one descriptor per input row.
    const bool contiguous = halo.cols == p.w && p.pad == 0;
    // fp8 double-row tiles hold two channels per partition.
    const int rows = p.rows_per_partition;
    sim::Instruction dma =
        sim::MakeDma(Op::kDmaLoad, int(CeilDiv(csz, rows)),
                     std::max<int64_t>(1, halo.rows * halo.cols) * p.in_bytes * rows, kQueueInput);
    if (!contiguous) dma.chunk_bytes = int32_t(std::max<int64_t>(1, halo.cols) * p.in_bytes);
    return Add(dma, {dep});
  }

  int32_t LoadWeights(int32_t, int64_t, int64_t csz, int64_t, int64_t ksz, int32_t dep) {
    const Plan& p = *p_;
    // [C, R, S, K]: per partition R x S runs of ksz contiguous elements (one run when ksz = K).
    const int rows = p.rows_per_partition;
    sim::Instruction dma = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(csz, rows)),
                                        p.r * p.s * ksz * p.in_bytes * rows, kQueueWeights);
    if (ksz < p.k) dma.chunk_bytes = int32_t(ksz * p.in_bytes);
    return Add(dma, {dep});
  }

  int32_t Matmul(const ConvMatmul& mm) {
    return Add(Gemm().Matmul(mm.c, mm.k, mm.tile.pixels(), mm.reload),
               {mm.after_input, mm.after_weights, mm.after_slot});
  }

  int32_t Evict(int, int, EngineKind engine, int64_t ksz, const PixTile& tile, int32_t dep_mm,
                int32_t dep_stage) {
    return Add(Gemm().Evict(engine, ksz, tile.pixels()), {dep_mm, dep_stage});
  }

  // Y is NKPQ: [pix, k] tiles (input stationary) need a transposing store.
  int32_t Store(int, int64_t, int64_t, int64_t ksz, const PixTile& tile, int32_t dep) {
    return Add(Gemm().Store(ksz, tile.pixels()), {dep});
  }

  // Emits items [first, last) (item(it) emits one). The compact lowering runs each run of alike
  // items (runs(), see ItemRuns) through a sim::LoopCompressor, in chunks of items that bring
  // the split evictions' turn back: once the state relative to the position repeats, the rest
  // of the run is a repeat and is not generated.
  template <typename Runs, typename Item>
  void Items(CoreState& state, int64_t first, int64_t last, const Runs& runs, Item& item) {
    int64_t it = first;
    if constexpr (kSim) {
      if (writer_.compact()) {
        for (const ItemRun& run : runs()) {
          for (; it < run.begin; ++it) item(it);
          const int64_t evictions = state.evict_count;
          item(it++);
          const int64_t r = p_->evict == "split" && (state.evict_count - evictions) % 2 ? 2 : 1;
          const int64_t chunks = (run.end - it) / r;
          if (chunks < 4) continue;
          ItemBody<Item> body{this, &state, &item, it, r};
          loop_.Run(writer_, body, 0, chunks, sim::RunOptions{.min_saving = 64});
          it += chunks * r;
        }
      }
    }
    for (; it < last; ++it) item(it);
  }

 private:
  // Chunks of alike items as a sim::LoopCompressor body: iteration i emits `r` items.
  template <typename Item>
  struct ItemBody {
    SimEmitter* e;
    CoreState* state;
    Item* item;
    int64_t first, r;
    void Iterate(int64_t i) {
      for (int64_t it = first + i * r; it < first + (i + 1) * r; ++it) (*item)(it);
    }
    void Snapshot(int64_t, sim::LoopState* s) {
      sim::CanonOf(s, [&](auto&& handle, auto&& value) { e->VisitState(*state, handle, value); });
      s->saved = {state->in_count, state->w_count, state->group_count, state->stage_count,
                  state->evict_count};
    }
    void Skip(const sim::SkippedPeriods& skip) { e->SkipItems(*state, skip); }
    sim::HandleFifo* fifo() { return nullptr; }
  };

  // The rotations of `s` as their counters stand, in CoreState's order: inputs, weights, PSUM
  // slots, staging (resident weights do not rotate).
  std::array<sim::Rotation, 4> Rotations(const CoreState& s) const {
    const Plan& p = *p_;
    return {sim::Rotation::At(s.in_count, p.bufs, p.k_outer ? 1 : p.c_tiles),
            p.weights_resident ? sim::Rotation::At(0, int64_t(s.w_load.size()), 1)
                               : sim::Rotation::At(s.w_count, p.bufs, p.c_tiles),
            sim::Rotation::At(s.group_count, p.psum_slots, 1),
            sim::Rotation::At(s.stage_count, kStagingBufs, 1)};
  }

  // Calls handle(int32_t&) for every handle of `s` and value(int64_t) for the split evictions'
  // turn, each rotation from the buffer its counter picks next.
  template <typename HandleF, typename ValueF>
  void VisitState(CoreState& s, HandleF&& handle, ValueF&& value) {
    value(p_->evict == "split" ? s.evict_count % 2 : 0);
    const std::array<sim::Rotation, 4> rot = Rotations(s);
    rot[0].Visit(std::span<int32_t>(s.in_load), handle);
    rot[0].Visit(std::span<int32_t>(s.in_reader), handle);
    rot[1].Visit(std::span<int32_t>(s.w_load), handle);
    rot[1].Visit(std::span<int32_t>(s.w_reader), handle);
    rot[2].Visit(std::span<int32_t>(s.psum_reader), handle);
    rot[3].Visit(std::span<int32_t>(s.stage_reader), handle);
  }

  // Moves `s` past skipped chunks: handles (sim::MoveHandles), the rotations turned on by their
  // counters' skipped steps, and the counters.
  void SkipItems(CoreState& s, const sim::SkippedPeriods& skip) {
    sim::MoveHandles(skip, [&](auto&& handle, auto&& value) { VisitState(s, handle, value); });
    const std::array<sim::Rotation, 4> rot = Rotations(s);
    rot[0].Turn(std::span<int32_t>(s.in_load), skip.CounterSteps(s.in_count, 0));
    rot[0].Turn(std::span<int32_t>(s.in_reader), skip.CounterSteps(s.in_count, 0));
    rot[1].Turn(std::span<int32_t>(s.w_load), skip.CounterSteps(s.w_count, 1));
    rot[1].Turn(std::span<int32_t>(s.w_reader), skip.CounterSteps(s.w_count, 1));
    rot[2].Turn(std::span<int32_t>(s.psum_reader), skip.CounterSteps(s.group_count, 2));
    rot[3].Turn(std::span<int32_t>(s.stage_reader), skip.CounterSteps(s.stage_count, 3));
    int64_t* counters[] = {&s.in_count, &s.w_count, &s.group_count, &s.stage_count, &s.evict_count};
    for (size_t k = 0; k < std::size(counters); ++k)
      *counters[k] += skip.CounterSteps(*counters[k], k);
  }

  // Appends an instruction: through the stream writer (a simulator program; handles are flat
  // positions) or to the counting core.
  int32_t Add(const sim::Instruction& inst, std::initializer_list<int32_t> deps) {
    if constexpr (kSim) {
      deps64_.assign(deps.begin(), deps.end());
      return int32_t(writer_.Add(inst, std::span<const int64_t>(deps64_)));
    } else {
      return core_->Add(inst, deps);
    }
  }

  // The implicit GEMM: M = output channels, N = pixels, contraction = input channels.
  GemmShape Gemm() const {
    return GemmShape{.dtype = p_->dtype,
                     .rows_per_partition = p_->rows_per_partition,
                     .in_bytes = p_->in_bytes,
                     .out_bytes = p_->out_bytes,
                     .transposed = p_->input_stationary,
                     .store_queue = kQueueStore};
  }

  const sim::Target& target_;
  ProgramT* program_;
  const Plan* p_ = nullptr;
  std::remove_reference_t<decltype(std::declval<ProgramT&>().cores[0])>* core_ = nullptr;
  sim::StreamWriter writer_;  // (simulator programs only)
  sim::LoopCompressor loop_;
  std::vector<int64_t> deps64_;  // Add's scratch
};

// Executes the steps on the CPU: inputs and weights as loaded into SBUF (a halo row that was not
// loaded reads as NaN), fp32 PSUM accumulation in schedule order, rounded staging, stores into Y.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& p, const std::vector<float>& x, const std::vector<float>& wt,
             std::vector<float>* y)
      : p_(p), x_(x), wt_(wt), y_(y) {
    psum_.assign(p.psum_slots, std::vector<float>(p.tile_k * p.tile_pix, 0));
    stage_.assign(kStagingBufs, std::vector<float>(p.tile_k * p.tile_pix, 0));
  }

  void BeginCore(int, const Plan&) {}
  bool CopyCore(int) { return false; }  // every core computes its own outputs
  template <typename Runs, typename Item>
  void Items(CoreState&, int64_t first, int64_t last, const Runs&, Item& item) {
    for (int64_t it = first; it < last; ++it) item(it);
  }

  int32_t LoadInput(int32_t id, int64_t n, int64_t c0, int64_t csz, const Halo& halo, int32_t) {
    InputBuf& b = inputs_[id];
    b.n = n;
    b.c0 = c0;
    b.halo = halo;
    b.data.assign(csz * halo.rows * halo.cols, 0);
    for (int64_t c = 0; c < csz; ++c) {
      for (int64_t i = 0; i < halo.rows; ++i) {
        for (int64_t j = 0; j < halo.cols; ++j) {
          b.data[(c * halo.rows + i) * halo.cols + j] =
              x_[((n * p_.c + c0 + c) * p_.h + halo.row0 + i) * p_.w + halo.col0 + j];
        }
      }
    }
    return -1;
  }

  int32_t LoadWeights(int32_t id, int64_t c0, int64_t csz, int64_t k0, int64_t ksz, int32_t) {
    WeightBuf& b = weights_[id];
    b.c0 = c0;
    b.k0 = k0;
    b.ksz = ksz;
    b.data.assign(csz * p_.r * p_.s * ksz, 0);
    for (int64_t c = 0; c < csz; ++c) {
      for (int64_t rs = 0; rs < p_.r * p_.s; ++rs) {
        for (int64_t kk = 0; kk < ksz; ++kk) {
          // Wt[k, c, r, s], stored as [C, R, S, K].
          b.data[(c * p_.r * p_.s + rs) * ksz + kk] =
              wt_[((k0 + kk) * p_.c + c0 + c) * p_.r * p_.s + rs];
        }
      }
    }
    return -1;
  }

  int32_t Matmul(const ConvMatmul& mm) {
    const auto [n, c0, csz, k0, ksz, kcol, r, s] =
        std::tuple{mm.n, mm.c0, mm.c, mm.k0, mm.k, mm.kcol, mm.r, mm.s};
    const PixTile& tile = mm.tile;
    const InputBuf& in = inputs_.at(mm.input);
    const WeightBuf& wb = weights_.at(mm.weights);
    std::vector<float>& acc = psum_[mm.slot];
    if (mm.start) std::fill(acc.begin(), acc.end(), 0.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const bool wrong_buffer = in.n != n || in.c0 != c0 || wb.c0 != c0 || wb.k0 + kcol != k0;
    for (int64_t c = 0; c < csz; ++c) {
      for (int64_t i = 0; i < tile.np; ++i) {
        const int64_t ih = (tile.p0 + i) * p_.stride + r - p_.pad;
        for (int64_t j = 0; j < tile.nq; ++j) {
          const int64_t iw = (tile.q0 + j) * p_.stride + s - p_.pad;
          float v = 0;  // zero padding
          if (ih >= 0 && ih < p_.h && iw >= 0 && iw < p_.w) {
            const int64_t hi = ih - in.halo.row0, wi = iw - in.halo.col0;
            v = (hi < 0 || hi >= in.halo.rows || wi < 0 || wi >= in.halo.cols || wrong_buffer)
                    ? nan
                    : in.data[(c * in.halo.rows + hi) * in.halo.cols + wi];
          }
          const int64_t pix = i * tile.nq + j;
          for (int64_t kk = 0; kk < ksz; ++kk) {
            acc[kk * p_.tile_pix + pix] +=
                wb.data[(c * p_.r * p_.s + r * p_.s + s) * wb.ksz + kcol + kk] * v;
          }
        }
      }
    }
    return -1;
  }

  int32_t Evict(int slot, int stage, EngineKind, int64_t ksz, const PixTile& tile, int32_t,
                int32_t) {
    for (int64_t kk = 0; kk < ksz; ++kk) {
      for (int64_t pix = 0; pix < tile.pixels(); ++pix) {
        const int64_t at = kk * p_.tile_pix + pix;
        stage_[stage][at] = RoundToOutput(psum_[slot][at], p_.dtype);
      }
    }
    return -1;
  }

  int32_t Store(int stage, int64_t n, int64_t k0, int64_t ksz, const PixTile& tile, int32_t) {
    for (int64_t kk = 0; kk < ksz; ++kk) {
      for (int64_t i = 0; i < tile.np; ++i) {
        for (int64_t j = 0; j < tile.nq; ++j) {
          (*y_)[((n * p_.k + k0 + kk) * p_.p + tile.p0 + i) * p_.q + tile.q0 + j] =
              stage_[stage][kk * p_.tile_pix + i * tile.nq + j];
        }
      }
    }
    return -1;
  }

 private:
  struct InputBuf {
    int64_t n = -1, c0 = -1;
    Halo halo;
    std::vector<float> data;
  };
  struct WeightBuf {
    int64_t c0 = -1, k0 = -1, ksz = 0;
    std::vector<float> data;
  };
  const Plan& p_;
  const std::vector<float>& x_;
  const std::vector<float>& wt_;
  std::vector<float>* y_;
  std::map<int32_t, InputBuf> inputs_;
  std::map<int32_t, WeightBuf> weights_;
  std::vector<std::vector<float>> psum_, stage_;
};

}  // namespace

void SetConv2dFaultForTesting(Conv2dFault fault) { g_fault = fault; }
void SetConv2dLoweringForTesting(Conv2dLowering lowering) { g_lowering = lowering; }

absl::Status Conv2dKernel::ValidateProblem(const Problem& problem,
                                           const sim::Target& target) const {
  absl::Status s = CheckProblem(name(), dims(), dtypes(), problem, target, {"padding"});
  if (!s.ok()) return s;
  const int64_t h = *problem.dims.Get("H"), w = *problem.dims.Get("W");
  const int64_t r = *problem.dims.Get("R"), sz = *problem.dims.Get("S");
  const int64_t pad = *problem.dims.Get("padding");
  if (r > h + 2 * pad || sz > w + 2 * pad) {
    return absl::InvalidArgumentError(StrCat(
        "filter ", r, "x", sz, " is larger than the padded input ", h + 2 * pad, "x", w + 2 * pad));
  }
  if (pad >= r || pad >= sz) {
    return absl::InvalidArgumentError(
        StrCat("padding=", pad, " must be smaller than the filter ", r, "x", sz));
  }
  return absl::OkStatus();
}

namespace {

// The analytic estimate (docs/kernels.md "Analytic estimates"): the instructions of one image's
// pixel tiles (each kind emitted once into a CountingProgram and weighted by how often the
// busiest core issues it: its share of the images and K blocks, R x S matmuls per channel and K
// tile), bounded by the slowest resource. No program, no simulation.
std::optional<double> EstimateConv2d(const Plan& p, const Problem&, const sim::Target& target) {
  CountingProgram program(target);
  SimEmitter emitter(target, &program);
  emitter.BeginCore(0, p);
  CountingCore& core = program.cores[0];
  // The busiest core's items (images x pixel tiles) and K blocks.
  const double items = double(p.split_items ? CeilDiv(p.items, p.shards) : p.items);
  const int64_t kbs = p.split_items ? p.k_blocks : CeilDiv(p.k_blocks, p.shards);
  const double per_tile = items / double(p.pix_tiles);  // runs of each pixel tile of an image
  const int64_t k_tiles = std::min(p.k_tiles, kbs * p.block_k);
  const int64_t k_core = std::min(p.k, k_tiles * p.tile_k);
  // (size, count) of the full and the last tile of `extent` in tiles of `tile`.
  auto cut = [](int64_t extent, int64_t tile) {
    const int64_t n = CeilDiv(extent, tile);
    return std::array<std::pair<int64_t, double>, 2>{std::pair{tile, double(n - 1)},
                                                     std::pair{extent - (n - 1) * tile, 1.0}};
  };
  const auto c_cut = cut(p.c, p.tile_c), k_cut = cut(k_core, p.tile_k);
  const auto kb_cut = cut(k_core, p.block_k * p.tile_k);
  auto weights = [&](double runs) {
    for (auto [ksz, nk] : kb_cut) {
      for (auto [csz, nc] : c_cut) {
        core.set_weight(runs * nk * nc);
        emitter.LoadWeights(0, 0, csz, 0, ksz, -1);
      }
    }
  };
  if (p.weights_resident || p.k_outer) weights(1);
  const double scalar_share = p.evict == "scalar" ? 1.0 : p.evict == "split" ? 0.5 : 0.0;
  for (int64_t t = 0; t < p.pix_tiles; ++t) {
    const PixTile tile = TileAt(p, t);
    const Halo halo = HaloOf(p, tile);
    for (auto [csz, nc] : c_cut) {
      core.set_weight(per_tile * nc * double(p.k_outer ? kbs : 1));
      emitter.LoadInput(0, 0, 0, csz, halo, -1);
    }
    if (!p.weights_resident && !p.k_outer) weights(per_tile);
    for (auto [ksz, nk] : k_cut) {
      for (auto [csz, nc] : c_cut) {
        core.set_weight(per_tile * nk * nc * double(p.r * p.s));
        ConvMatmul mm;
        mm.c = csz, mm.k = ksz, mm.tile = tile;
        emitter.Matmul(mm);
      }
      for (auto [engine, share] : {std::pair{EngineKind::kVector, 1 - scalar_share},
                                   std::pair{EngineKind::kScalar, scalar_share}}) {
        core.set_weight(per_tile * nk * share);
        if (share > 0) emitter.Evict(0, 0, engine, ksz, tile, -1, -1);
      }
      core.set_weight(per_tile * nk);
      emitter.Store(0, 0, 0, ksz, tile, -1);
    }
  }
  // With one buffer the loads of the next inputs (or weights) wait for the matmuls reading the
  // previous ones, and those matmuls for the loads: they do not overlap.
  if (p.bufs == 1) {
    return std::max(core.BoundNs(p.shards),
                    core.ComputeNs() + std::max(core.QueueNs(p.shards, kQueueInput),
                                                core.QueueNs(p.shards, kQueueWeights)));
  }
  return core.BoundNs(p.shards);
}

}  // namespace

Problem Conv2dKernel::Example() const {
  return {*Dims::Parse("N=8,C=256,H=28,W=28,K=256,R=3,S=3,stride=1,padding=1"), "bf16"};
}

Config Conv2dKernel::Default(const Problem& problem, const sim::Target&) const {
  // A plain compiler: weights stationary, full-size tiles (shrunk only to cover small dims),
  // weights reloaded per pixel tile, double buffering, Vector eviction, one core.
  const int64_t c = problem.dims.Get("C").value_or(1), k = problem.dims.Get("K").value_or(1);
  const int64_t h = problem.dims.Get("H").value_or(1), w = problem.dims.Get("W").value_or(1);
  const int64_t r = problem.dims.Get("R").value_or(1), s = problem.dims.Get("S").value_or(1);
  const int64_t stride = std::max<int64_t>(1, problem.dims.Get("stride").value_or(1));
  const int64_t pad = problem.dims.Get("padding").value_or(0);
  const int64_t pixels = ((h + 2 * pad - r) / stride + 1) * ((w + 2 * pad - s) / stride + 1);
  auto cover = [](int64_t tile, int64_t smallest, int64_t dim) {
    while (tile > smallest && tile / 2 >= dim) tile /= 2;
    return tile;
  };
  return Config{{"stationary", "weights"},
                {"tile_c", std::to_string(cover(128, 32, c))},
                {"tile_k", std::to_string(cover(128, 64, k))},
                {"tile_pix", std::to_string(cover(512, 64, pixels))},
                {"block_k", "1"},
                {"weights_resident", "0"},
                {"loop_order", "spatial_outer"},
                {"bufs", "2"},
                {"evict", "vector"},
                {"shards", "1"}};
}

namespace {

// The schedule params (tile_c 256 only where TensorE takes K = 256, fp8 on snc3).
std::vector<Param> Params(const Problem& problem, const sim::Target& target) {
  std::vector<std::string> tile_c(kTileC.begin(), kTileC.end() - 1);
  if (target.MaxMatmulK(*sim::ParseDType(problem.dtype)) >= 256) tile_c.push_back("256");
  return {
      {"stationary", {"weights", "input"}, "operand held in the systolic array"},
      {"tile_c", tile_c, "input channels per matmul (contraction; 256 = fp8 double-row)"},
      {"tile_k", kTileK, "output channels per matmul"},
      {"tile_pix", kTilePix, "output pixels per matmul"},
      {"block_k", kBlockK, "k tiles sharing one weight load"},
      {"weights_resident", {"0", "1"}, "1: the core's weights stay in SBUF"},
      {"loop_order", {"spatial_outer", "k_outer"}, "outer loop: pixel tiles or k blocks"},
      {"bufs", {"1", "2", "3"}, "rotating buffers for halos and weight blocks"},
      {"evict", {"vector", "scalar", "split"}, "engine evicting PSUM"},
      {"shards", ShardValues(target), "cores the work is split over"},
  };
}

// Verify's run: the reduced problem below, on the CPU, against a plain reference in double.
absl::Status RunReduced(const Plan& planned, const Config& config, const sim::Target& target) {
  Plan full = planned;
  if (target.systolic) {
    full.tile_c = 128, full.tile_k = 128, full.tile_pix = 512, full.input_stationary = false;
  }
  // The reduced problem: tiles scaled down (channels / 8..16, pixels / 32), keeping whether a
  // pixel tile is whole rows or row segments; dims cut to two tiles with the last ragged; at most
  // two images (or shards + 1 for sharding by items). Filter, stride, padding, operand roles,
  // loop order, residency, blocking and shards are kept.
  Plan plan = full;
  plan.tile_c = std::min<int64_t>(full.tile_c, 8);
  plan.tile_k = std::min<int64_t>(full.tile_k, 8);
  plan.tile_pix = std::max<int64_t>(2, full.tile_pix / 32);
  plan.c = ReducedDim(full.c, plan.tile_c, 2);
  // Sharding by k blocks keeps shards + 1 blocks (the last ragged); otherwise two k tiles.
  plan.k = full.split_items ? ReducedDim(full.k, plan.tile_k, 2)
                            : ReducedDim(full.k, plan.tile_k * plan.block_k, full.shards + 1);
  plan.n = std::min<int64_t>(full.n, full.split_items ? full.shards + 1 : 2);
  int64_t q = full.row_mode ? std::max<int64_t>(1, std::min(full.q, plan.tile_pix / 2))
                            : ReducedDim(full.q, plan.tile_pix, 2);
  if (!full.row_mode && q <= plan.tile_pix) q = plan.tile_pix + 1;
  const int64_t rows_per_tile = full.row_mode ? std::max<int64_t>(1, plan.tile_pix / q) : 1;
  int64_t out_rows = ReducedDim(full.p, rows_per_tile, 2);
  plan.h = std::max<int64_t>((out_rows - 1) * plan.stride + plan.r - 2 * plan.pad, 1);
  plan.w = std::max<int64_t>((q - 1) * plan.stride + plan.s - 2 * plan.pad, 1);
  while ((plan.h + 2 * plan.pad - plan.r) < 0) ++plan.h;
  while ((plan.w + 2 * plan.pad - plan.s) < 0) ++plan.w;
  plan.p = (plan.h + 2 * plan.pad - plan.r) / plan.stride + 1;
  plan.q = (plan.w + 2 * plan.pad - plan.s) / plan.stride + 1;
  Derive(plan, target);
  plan.shards = full.shards;
  if (plan.items < plan.shards && plan.k_blocks < plan.shards) {
    plan.shards = int(std::max(plan.items, plan.k_blocks));
  }
  plan.split_items = plan.items >= plan.shards;

  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.c * 7 + plan.k));
  const std::vector<float> x = RandomInputs(plan.n * plan.c * plan.h * plan.w, rng, plan.dtype);
  const std::vector<float> wt = RandomInputs(plan.k * plan.c * plan.r * plan.s, rng, plan.dtype);
  std::vector<float> y = Unwritten(plan.n * plan.k * plan.p * plan.q);
  CpuEmitter emitter(plan, x, wt, &y);
  Generate(plan, emitter);

  const double out_eps = plan.dtype == DType::kFp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  const double acc_eps = 4.0 * double(plan.c * plan.r * plan.s) * std::ldexp(1.0, -24);
  for (int64_t n = 0; n < plan.n; ++n) {
    for (int64_t k = 0; k < plan.k; ++k) {
      for (int64_t i = 0; i < plan.p; ++i) {
        for (int64_t j = 0; j < plan.q; ++j) {
          double ref = 0, abs_sum = 0;
          for (int64_t c = 0; c < plan.c; ++c) {
            for (int64_t r = 0; r < plan.r; ++r) {
              for (int64_t s = 0; s < plan.s; ++s) {
                const int64_t ih = i * plan.stride + r - plan.pad;
                const int64_t iw = j * plan.stride + s - plan.pad;
                if (ih < 0 || ih >= plan.h || iw < 0 || iw >= plan.w) continue;
                const double prod = double(x[((n * plan.c + c) * plan.h + ih) * plan.w + iw]) *
                                    wt[((k * plan.c + c) * plan.r + r) * plan.s + s];
                ref += prod;
                abs_sum += std::abs(prod);
              }
            }
          }
          const double got = y[((n * plan.k + k) * plan.p + i) * plan.q + j];
          const double tol = out_eps * std::abs(ref) + acc_eps * abs_sum + 1e-30;
          if (!Within(got, ref, tol)) {
            return WrongAnswer(
                "conv2d", StrCat("Y[", n, ",", k, ",", i, ",", j, "]"),
                StrCat("N=", plan.n, ",C=", plan.c, ",H=", plan.h, ",W=", plan.w, ",K=", plan.k),
                got, ref, tol);
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

void Emit(const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
  if (target.systolic) {  // one implicit GEMM: M = K, N = N*P*Q, contraction C*R*S
    program->cores.resize(1);
    program->cores[0].Add(sim::MakeMatmul(plan.dtype, int(plan.c * plan.r * plan.s), int(plan.k),
                                          int(plan.n * plan.p * plan.q)),
                          {});
    return;
  }
  SimEmitter emitter(target, program);
  Generate(plan, emitter);
}

constexpr char kDescription[] =
    "implicit-GEMM conv2d Y[N,K,P,Q] = X[N,C,H,W] * W[K,C,R,S]: operand roles, channel, "
    "output-channel and pixel tiles, weight blocking and residency, loop order, buffers, "
    "eviction engine, sharding";

}  // namespace

// Version 1: initial lowering.
// (Spec: name, version, description, dims, dtypes; steps: params, plan, emit, verify, estimate.)
Conv2dKernel::Conv2dKernel()
    : PlannedKernel(
          {"conv2d",
           1,
           kDescription,
           {"N", "C", "H", "W", "K", "R", "S", "stride", "padding"},
           {"bf16", "fp32", "fp8"}},
          Erase(PlanSteps<Plan>{Params, StrictPlan(MakePlan), Emit, RunReduced, EstimateConv2d})) {}

Kernel::Work Conv2dKernel::MinimumWork(const Problem& problem) const {
  auto get = [&](const char* name) { return double(problem.dims.Get(name).value_or(0)); };
  const double n = get("N"), c = get("C"), h = get("H"), w = get("W"), k = get("K"), r = get("R"),
               s = get("S"), stride = std::max(1.0, get("stride")), pad = get("padding");
  const double p = std::floor((h + 2 * pad - r) / stride) + 1;
  const double q = std::floor((w + 2 * pad - s) / stride) + 1;
  auto dtype = sim::ParseDType(problem.dtype);
  const double in_bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  const double out_bytes = dtype.ok() ? OutputBytes(*dtype) : 2;
  return Work{2 * n * k * p * q * c * r * s,
              (n * c * h * w + k * c * r * s) * in_bytes + n * k * p * q * out_bytes};
}

}  // namespace tessel::kernels

#include "kernels/bmm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <tuple>
#include <utility>

#include "kernels/lowering/gemm_emit.h"
#include "kernels/lowering/verify_util.h"
#include "kernels/matmul_estimate.h"
#include "kernels/matmul_plan.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"
#include "sim/compact.h"

namespace tessel::kernels {
namespace {

using sim::EngineKind;
using sim::Mem;

BmmFault g_fault = BmmFault::kNone;
BmmLowering g_lowering = BmmLowering::kCompact;

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan : GemmOperands, GemmTiling, GemmChoices, GemmBlocks {
  int64_t b = 0;

  int64_t group = 1;
  bool interleave = false;
  int bufs = 2;
  bool shard_batch = true;
  int shards = 1;

  int psum_slots = 0;
  int rows_per_partition = 1;
  int64_t sbuf_a = 0, sbuf_b = 0, sbuf_stage = 0;  // per partition, one buffer

  void Derive() { DeriveGemmBlocks(*this, *this, this); }
};

// Builds the plan. `strict` adds the rules that only prune redundant configs; Verify's reduced
// problem turns them off.
absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  p.b = *problem.dims.Get("B");
  if (absl::Status operands = ReadGemmOperands(problem, &p); !operands.ok()) return operands;
  int64_t interleave = 0, bufs = 0, shards = 0;
  if (absl::Status tiling = ReadGemmTiling(config, &p); !tiling.ok()) return tiling;
  if (absl::Status ints = IntParams(config, {{"batch_group", &p.group},
                                             {"interleave", &interleave, 0},
                                             {"bufs", &bufs},
                                             {"shards", &shards}});
      !ints.ok()) {
    return ints;
  }
  if (interleave > 1) return absl::InvalidArgumentError("interleave must be 0 or 1");
  p.interleave = interleave == 1;
  p.bufs = int(bufs);
  p.shards = int(shards);
  if (absl::Status choices = ReadGemmChoices(config, &p); !choices.ok()) return choices;
  std::optional<std::string_view> shard_dim = config.Get("shard_dim");
  if (!shard_dim || (*shard_dim != "batch" && *shard_dim != "m")) {
    return absl::InvalidArgumentError("shard_dim must be batch or m");
  }
  p.shard_batch = *shard_dim == "batch";
  p.Derive();

  // TensorE limits.
  if (absl::Status tile = CheckGemmTile(target, problem.dtype, p, p, p); !tile.ok()) return tile;
  p.rows_per_partition = int(CeilDiv(p.tile_k, target.sbuf_partitions));

  // Sharding.
  if (p.shards > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds the ",
                                             target.cores_per_chip, " cores per chip of ",
                                             target.name));
  }
  if (p.shard_batch && p.shards > p.b) {
    if (strict) {
      return absl::InvalidArgumentError(
          StrCat("shards=", p.shards, " with shard_dim=batch exceeds the ", p.b, " batches"));
    }
    p.shards = int(p.b);
  }
  if (!p.shard_batch && p.shards > p.blocks_m) {
    if (strict) {
      return absl::InvalidArgumentError(
          StrCat("shards=", p.shards, " with shard_dim=m exceeds the ", p.blocks_m, " M blocks"));
    }
    p.shards = int(p.blocks_m);
  }
  const int64_t batches_per_core = p.shard_batch ? CeilDiv(p.b, p.shards) : p.b;

  if (strict) {
    if (p.shards == 1 && !p.shard_batch) {
      return absl::InvalidArgumentError(
          "shard_dim=m with shards=1 is redundant: shard_dim only matters when shards > 1");
    }
    for (auto [name, block, tiles] :
         {std::tuple{"block_m", p.block_m, p.tiles_m}, std::tuple{"block_n", p.block_n, p.tiles_n},
          std::tuple{"block_k", p.block_k, p.tiles_k},
          std::tuple{"batch_group", p.group, batches_per_core}}) {
      if (block > 1 && block / 2 >= tiles) {
        return absl::InvalidArgumentError(
            StrCat(name, "=", block, " is redundant: ", block / 2, " already covers all ", tiles,
                   std::string_view(name) == "batch_group" ? " batches of a core" : " tiles"));
      }
    }
    if (p.interleave && p.group == 1) {
      return absl::InvalidArgumentError(
          "interleave=1 with batch_group=1 is redundant: there is one batch to interleave");
    }
  }

  // PSUM: accumulation groups live at once.
  p.psum_slots = std::min(target.psum_banks, target.max_accumulation_groups);
  const int64_t live_groups = p.block_m * p.block_n * (p.interleave ? p.group : 1);
  if (live_groups > p.psum_slots) {
    return absl::InvalidArgumentError(StrCat(
        "PSUM: block_m x block_n", p.interleave ? " x batch_group (interleave=1)" : "", " = ",
        live_groups, " accumulation groups exceed the ", p.psum_slots, " PSUM banks"));
  }

  // SBUF per partition, one buffer each.
  p.sbuf_a = p.group * p.block_k * p.rows_per_partition * p.block_m * p.tile_m * p.in_bytes;
  p.sbuf_b = p.group * p.block_k * p.rows_per_partition * p.block_n * p.tile_n * p.in_bytes;
  p.sbuf_stage = (p.stationary_b ? p.tile_m : p.tile_n) * p.out_bytes;
  const int64_t total = (p.sbuf_a + p.sbuf_b) * p.bufs + p.sbuf_stage * kGemmStagingBufs;
  if (total > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(
        StrCat("SBUF capacity: A blocks ", p.sbuf_a, " x ", p.bufs, " bufs + B blocks ", p.sbuf_b,
               " x ", p.bufs, " bufs + output staging ", p.sbuf_stage * kGemmStagingBufs, " = ",
               total, " bytes per partition exceed the usable ", target.UsableSbufPerPartition()));
  }
  return p;
}

// An operand buffer: the block it holds and the handles of its loads and last reader.
struct Buffer {
  std::tuple<int64_t, int64_t, int64_t> key{-1, -1, -1};  // batch group, m or n block, k block
  std::vector<int32_t> loads;                             // one per K tile of the block
  int32_t reader = -1;                                    // last matmul reading it
};

// A core's schedule state: operand buffers, rotations and the last readers of PSUM slots and
// staging buffers (what the compact lowering compares between column blocks).
struct CoreState {
  std::vector<Buffer> a_bufs, b_bufs;
  int64_t a_count = 0, b_count = 0, psum_count = 0, stage_count = 0, evict_count = 0;
  std::vector<int32_t> slot_reader;
  std::array<int32_t, kGemmStagingBufs> stage_reader;
  int64_t last_stationary = -1;

  explicit CoreState(const Plan& p)
      : a_bufs(p.bufs), b_bufs(p.bufs), slot_reader(p.psum_slots, -1) {
    stage_reader.fill(-1);
  }
};

// The stationary tile of a matmul: A(batch, kt, tm) or B(batch, kt, tn).
int64_t StationaryOf(const Plan& p, int64_t batch, int64_t kt, int64_t tm, int64_t tn) {
  return ((batch * p.tiles_k + kt) * (p.tiles_m + p.tiles_n)) +
         (p.stationary_b ? p.tiles_m + tn : tm);
}

// Walks the plan's schedule in program order and tells `e` each step. Shared by the lowering and
// the CPU execution in Verify, so both run the same tile boundaries, tails, batch grouping,
// sharding and accumulation order.
template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  auto size_of = [](int64_t index, int64_t tile, int64_t dim) {
    return std::min(tile, dim - index * tile);
  };
  auto m_size = [&](int64_t tm) {
    int64_t size = size_of(tm, p.tile_m, p.m);
    if (g_fault == BmmFault::kRaggedMOffByOne && size < p.tile_m && size > 1) --size;
    return size;
  };
  // A core's share: [lo, hi) of the batches or of the M blocks.
  const int64_t split = p.shard_batch ? p.b : p.blocks_m;
  auto share = [&](int core) { return split * core / p.shards; };
  for (int core = 0; core < p.shards; ++core) {
    const int64_t lo = share(core), hi = share(core + 1);
    const int64_t b_lo = p.shard_batch ? lo : 0, b_hi = p.shard_batch ? hi : p.b;
    const int64_t mb_lo = p.shard_batch ? 0 : lo, mb_hi = p.shard_batch ? p.blocks_m : hi;
    // A core's program depends only on the shape of its share: as many batches (the batch
    // groups follow), or as many M blocks of which none is ragged (only the last can be).
    const bool regular = p.shard_batch || hi * p.block_m * p.tile_m <= p.m;
    if (core > 0 && hi - lo == lo - share(core - 1) && regular && e.CopyCore(core)) continue;
    e.BeginCore(core);
    CoreState state(p);
    std::vector<Buffer>&a_bufs = state.a_bufs, &b_bufs = state.b_bufs;
    int64_t &a_count = state.a_count, &b_count = state.b_count, &psum_count = state.psum_count;
    int64_t &stage_count = state.stage_count, &evict_count = state.evict_count;
    std::vector<int32_t>& slot_reader = state.slot_reader;
    std::array<int32_t, kGemmStagingBufs>& stage_reader = state.stage_reader;
    int64_t& last_stationary = state.last_stationary;

    // Makes sure the operand block `key` is resident; returns its buffer.
    auto ensure = [&](bool is_a, std::tuple<int64_t, int64_t, int64_t> key, int64_t gsz) {
      std::vector<Buffer>& bufs = is_a ? a_bufs : b_bufs;
      for (Buffer& buf : bufs) {
        if (buf.key == key) return &buf;
      }
      int64_t& count = is_a ? a_count : b_count;
      Buffer& buf = bufs[count++ % p.bufs];
      buf.key = key;
      buf.loads.clear();
      const auto [g0, x, kb] = key;
      const int64_t tiles_x = is_a ? p.tiles_m : p.tiles_n;
      const int64_t block_x = is_a ? p.block_m : p.block_n;
      const int64_t tile_x = is_a ? p.tile_m : p.tile_n;
      const int64_t dim_x = is_a ? p.m : p.n;
      const int64_t x0 = x * block_x * tile_x;
      const int64_t xsz = std::min(std::min(block_x, tiles_x - x * block_x) * tile_x, dim_x - x0);
      for (int64_t kt = kb * p.block_k; kt < std::min(p.tiles_k, (kb + 1) * p.block_k); ++kt) {
        buf.loads.push_back(e.Load(is_a, size_of(kt, p.tile_k, p.k), xsz, gsz, buf.reader));
      }
      return &buf;
    };

    auto batch_group = [&](int64_t g0) {
      const int64_t gsz = std::min(p.group, b_hi - g0);
      if (g_fault == BmmFault::kDropRaggedBatchGroup && gsz < p.group) return;
      auto row = [&](int64_t mb) {
        auto column = [&](int64_t nb) {
          std::vector<std::pair<int64_t, int64_t>> tiles;  // (tm, tn) of the block
          for (int64_t tm = mb * p.block_m; tm < std::min(p.tiles_m, (mb + 1) * p.block_m); ++tm) {
            for (int64_t tn = nb * p.block_n; tn < std::min(p.tiles_n, (nb + 1) * p.block_n);
                 ++tn) {
              tiles.push_back({tm, tn});
            }
          }
          std::vector<std::vector<int64_t>> sets;  // batches (within the group) computed together
          if (p.interleave) {
            sets.emplace_back();
            for (int64_t bi = 0; bi < gsz; ++bi) sets.back().push_back(bi);
          } else {
            for (int64_t bi = 0; bi < gsz; ++bi) sets.push_back({bi});
          }
          for (const std::vector<int64_t>& set : sets) {
            // One PSUM accumulation group per (batch, output tile).
            std::vector<int> slot(set.size() * tiles.size());
            std::vector<int32_t> last_mm(slot.size(), -1);
            for (int& s : slot) s = int(psum_count++ % p.psum_slots);
            for (int64_t kb = 0; kb < p.blocks_k; ++kb) {
              Buffer* a = ensure(true, {g0, mb, kb}, gsz);
              Buffer* b = ensure(false, {g0, nb, kb}, gsz);
              for (int64_t kt = kb * p.block_k; kt < std::min(p.tiles_k, (kb + 1) * p.block_k);
                   ++kt) {
                const int64_t k0 = kt * p.tile_k, ksz = size_of(kt, p.tile_k, p.k);
                const size_t load = size_t(kt - kb * p.block_k);
                for (size_t si = 0; si < set.size(); ++si) {
                  for (size_t ti = 0; ti < tiles.size(); ++ti) {
                    const auto [tm, tn] = tiles[ti];
                    const size_t acc = si * tiles.size() + ti;
                    const int64_t batch = g0 + set[si];
                    const int64_t stationary = StationaryOf(p, batch, kt, tm, tn);
                    const bool reload = stationary != last_stationary;
                    last_stationary = stationary;
                    last_mm[acc] = e.Matmul({.batch = batch,
                                             .m0 = tm * p.tile_m,
                                             .m = m_size(tm),
                                             .n0 = tn * p.tile_n,
                                             .n = size_of(tn, p.tile_n, p.n),
                                             .k0 = k0,
                                             .k = ksz,
                                             .slot = slot[acc],
                                             .start = kt == 0,
                                             .reload = reload,
                                             .after_a = a->loads[load],
                                             .after_b = b->loads[load],
                                             .after_slot = kt == 0 ? slot_reader[slot[acc]] : -1});
                    a->reader = b->reader = last_mm[acc];
                  }
                }
              }
            }
            for (size_t si = 0; si < set.size(); ++si) {
              for (size_t ti = 0; ti < tiles.size(); ++ti) {
                const auto [tm, tn] = tiles[ti];
                const size_t acc = si * tiles.size() + ti;
                const EngineKind engine = EvictEngine(p.evict, evict_count++);
                const int stage = int(stage_count++ % kGemmStagingBufs);
                const GemmOutputTile out{.batch = g0 + set[si],
                                         .m0 = tm * p.tile_m,
                                         .m = m_size(tm),
                                         .n0 = tn * p.tile_n,
                                         .n = size_of(tn, p.tile_n, p.n),
                                         .slot = slot[acc],
                                         .stage = stage};
                const int32_t ev = e.Evict(engine, out, last_mm[acc], stage_reader[stage]);
                slot_reader[slot[acc]] = ev;
                stage_reader[stage] = e.Store(out, ev);
              }
            }
          }
        };
        // The column blocks of a row block emit alike, but for a ragged last one: an emitter may
        // compress their loop.
        const int64_t regular = p.n % (p.block_n * p.tile_n) == 0 ? p.blocks_n : p.blocks_n - 1;
        e.Columns(state, g0, mb, regular, column);
        for (int64_t nb = regular; nb < p.blocks_n; ++nb) column(nb);
      };
      // Likewise the row blocks, but for a ragged last one.
      const int64_t rows_end = std::min(mb_hi, p.m / (p.block_m * p.tile_m));
      e.Rows(state, g0, mb_lo, std::max(mb_lo, rows_end), row);
      for (int64_t mb = std::max(mb_lo, rows_end); mb < mb_hi; ++mb) row(mb);
    };
    // Likewise the batch groups, but for a ragged last one.
    const int64_t full_groups = (b_hi - b_lo) / p.group;
    e.Groups(state, b_lo, full_groups, mb_lo, batch_group);
    for (int64_t g0 = b_lo + full_groups * p.group; g0 < b_hi; g0 += p.group) batch_group(g0);
  }
}

// Turns schedule steps into simulator instructions, through a sim::StreamWriter: a compact
// program (a row block's column blocks compressed, sim/compact.h) or a flat one.
class SimEmitter {
 public:
  SimEmitter(const Plan& plan, const sim::Target& target, sim::Program* program)
      : p_(plan), target_(target), program_(program), gemm_(GemmShapeOf(plan)) {}

  // Core `core` runs the same program as core - 1 (Generate checked their shares).
  bool CopyCore(int) {
    if (g_lowering != BmmLowering::kCompact) return false;
    program_->RepeatPrevious();
    return true;
  }

  void BeginCore(int core) {
    core_ = &program_->Core(size_t(core));
    writer_.Begin(core_, g_lowering == BmmLowering::kCompact);
    const int in_partitions = int(std::min<int64_t>(p_.tile_k, target_.sbuf_partitions));
    const int out_partitions =
        std::min(gemm_.Partitions(p_.tile_m, p_.tile_n), target_.sbuf_partitions);
    const int64_t out_free = gemm_.Free(p_.tile_m, p_.tile_n);
    core_->allocations.push_back({"a_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_a, p_.bufs});
    core_->allocations.push_back({"b_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_b, p_.bufs});
    core_->allocations.push_back(
        {"c_staging", Mem::kSbuf, 0, out_partitions, p_.sbuf_stage, kGemmStagingBufs});
    core_->allocations.push_back(
        {"psum", Mem::kPsum, 0, out_partitions, out_free * 4, p_.psum_slots});
  }

  int32_t Load(bool is_a, int64_t ksz, int64_t xsz, int64_t gsz, int32_t dep) {
    sim::Instruction dma =
        gemm_.Load(ksz, gsz * xsz * p_.in_bytes, is_a ? kGemmQueueA : kGemmQueueB);
    // Each batch's (and each row's) slice is contiguous in HBM.
    dma.chunk_bytes = int32_t(xsz * p_.in_bytes);
    return Add(dma, {dep});
  }

  int32_t Matmul(const GemmMatmul& mm) {
    return Add(gemm_.Matmul(mm.k, mm.m, mm.n, mm.reload), {mm.after_a, mm.after_b, mm.after_slot});
  }

  int32_t Evict(EngineKind engine, const GemmOutputTile& out, int32_t dep_mm, int32_t dep_stage) {
    return Add(gemm_.Evict(engine, out.m, out.n), {dep_mm, dep_stage});
  }

  int32_t Store(const GemmOutputTile& out, int32_t dep) {
    return Add(gemm_.Store(out.m, out.n), {dep});
  }

  // Emits column blocks [0, last) of row block `mb` of batch group `g0` (column(nb) emits one).
  // The compact lowering runs them through a sim::LoopCompressor: once the core's state relative
  // to the position and to the column block repeats, the rest are a repeat and are not generated.
  template <typename Column>
  void Columns(CoreState& state, int64_t g0, int64_t mb, int64_t last, Column& column) {
    if (!writer_.compact() || last < 4) {
      for (int64_t nb = 0; nb < last; ++nb) column(nb);
      return;
    }
    ColumnBody<Column> body{this, &state, &column, g0, mb};
    // (Logging the skipped columns' reads lets the row loop check its constants.)
    loop_.Run(writer_, body, 0, last, sim::RunOptions{.min_saving = 64, .log_skipped_reads = true});
  }

  // Emits row blocks [first, last) of batch group `g0` (row(mb) emits one, its columns through
  // Columns). The compact lowering runs them through a second sim::LoopCompressor, each row's
  // state compared as a column loop's first boundary (B block keys as they are).
  template <typename Row>
  void Rows(CoreState& state, int64_t g0, int64_t first, int64_t last, Row& row) {
    if (!writer_.compact() || last - first < 4) {
      for (int64_t mb = first; mb < last; ++mb) row(mb);
      return;
    }
    RowBody<Row> body{this, &state, &row, g0};
    // (Logging the skipped rows' reads lets the batch-group loop check its constants.)
    row_loop_.Run(writer_, body, first, last,
                  sim::RunOptions{.min_saving = 64, .log_skipped_reads = true});
  }

  // Emits `count` full batch groups from batch `first` (group(g0) emits the one at g0, its rows
  // through Rows from row block `mb`). The compact lowering runs them through a third
  // sim::LoopCompressor, each group's state compared as its first row's (block keys relative to
  // the group).
  template <typename Group>
  void Groups(CoreState& state, int64_t first, int64_t count, int64_t mb, Group& group) {
    if (!writer_.compact() || count < 4) {
      for (int64_t i = 0; i < count; ++i) group(first + i * p_.group);
      return;
    }
    GroupBody<Group> body{this, &state, &group, first, mb};
    group_loop_.Run(writer_, body, 0, count, sim::RunOptions{.min_saving = 64});
  }

 private:
  // A row block's column loop as a sim::LoopCompressor body (sim/compact.h).
  template <typename Column>
  struct ColumnBody {
    SimEmitter* e;
    CoreState* state;
    Column* column;
    int64_t g0, mb;
    void Iterate(int64_t nb) { (*column)(nb); }
    void Snapshot(int64_t nb, sim::LoopState* s) { e->Snapshot(*state, g0, mb, nb, s); }
    void Skip(const sim::SkippedPeriods& skip) {
      const int64_t cols = skip.periods * skip.p;
      e->SkipBlocks(*state, skip, 0, 0, cols, e->p_.stationary_b ? cols * e->p_.block_n : 0);
    }
    sim::HandleFifo* fifo() { return nullptr; }
  };

  // A core's batch-group loop as a sim::LoopCompressor body: iteration i is the group at batch
  // first + i x group.
  template <typename Group>
  struct GroupBody {
    SimEmitter* e;
    CoreState* state;
    Group* group;
    int64_t first, mb;
    void Iterate(int64_t i) { (*group)(first + i * e->p_.group); }
    void Snapshot(int64_t i, sim::LoopState* s) {
      e->Snapshot(*state, first + i * e->p_.group, mb, 0, s);
    }
    void Skip(const sim::SkippedPeriods& skip) {
      const Plan& p = e->p_;
      const int64_t batches = skip.periods * skip.p * p.group;
      e->SkipBlocks(*state, skip, batches, 0, 0,
                    batches * p.tiles_k * (p.tiles_m + p.tiles_n));  // StationaryOf's batch term
    }
    sim::HandleFifo* fifo() { return nullptr; }
  };

  // A batch group's row loop as a sim::LoopCompressor body.
  template <typename Row>
  struct RowBody {
    SimEmitter* e;
    CoreState* state;
    Row* row;
    int64_t g0;
    void Iterate(int64_t mb) { (*row)(mb); }
    void Snapshot(int64_t mb, sim::LoopState* s) { e->Snapshot(*state, g0, mb, 0, s); }
    void Skip(const sim::SkippedPeriods& skip) {
      const int64_t rows = skip.periods * skip.p;
      e->SkipBlocks(*state, skip, 0, rows, 0, e->p_.stationary_b ? 0 : rows * e->p_.block_m);
    }
    sim::HandleFifo* fifo() { return nullptr; }
  };

  // Calls handle(int32_t&) for every handle of `s` that column block nb's emission depends on
  // and value(int64_t) for everything else, in a fixed order. Rotations (operand buffers, PSUM
  // slots, staging) are visited from the buffer their counter picks next, and block keys are
  // relative to row block mb and column block nb.
  template <typename HandleF, typename ValueF>
  void VisitState(CoreState& s, int64_t g0, int64_t mb, int64_t nb, HandleF&& handle,
                  ValueF&& value) {
    value(p_.evict == "split" ? s.evict_count % 2 : 0);
    // Whether the column's first matmul reuses the stationary tile of the last one.
    value(s.last_stationary == StationaryOf(p_, g0, 0, mb * p_.block_m, nb * p_.block_n));
    const std::array<sim::Rotation, 4> rot = Rotations(s);
    auto buffers = [&](const sim::Rotation& r, std::vector<Buffer>& bufs, int64_t x_now) {
      r.Visit(std::span<Buffer>(bufs), [&](Buffer& b) {
        const auto [bg, x, kb] = b.key;
        if (bg < 0) {
          value(-1);  // never loaded
        } else {
          value(bg - g0);
          value(x - x_now);
          value(kb);
        }
        value(int64_t(b.loads.size()));
        for (int32_t& h : b.loads) handle(h);
        handle(b.reader);
      });
    };
    buffers(rot[0], s.a_bufs, mb);
    buffers(rot[1], s.b_bufs, nb);
    rot[2].Visit(std::span<int32_t>(s.slot_reader), handle);
    rot[3].Visit(std::span<int32_t>(s.stage_reader), handle);
  }

  // The rotations of `s` as their counters stand: A and B buffers, PSUM slots, staging.
  std::array<sim::Rotation, 4> Rotations(const CoreState& s) const {
    return {sim::Rotation::At(s.a_count, p_.bufs, 1), sim::Rotation::At(s.b_count, p_.bufs, 1),
            sim::Rotation::At(s.psum_count, p_.psum_slots, 1),
            sim::Rotation::At(s.stage_count, kGemmStagingBufs, 1)};
  }

  // The state at a column boundary (LoopBody::Snapshot): handles relative to the position.
  void Snapshot(CoreState& s, int64_t g0, int64_t mb, int64_t nb, sim::LoopState* state) {
    sim::CanonOf(state,
                 [&](auto&& handle, auto&& value) { VisitState(s, g0, mb, nb, handle, value); });
    state->saved = {s.a_count, s.b_count, s.psum_count, s.stage_count, s.evict_count};
  }

  // Moves the state past skipped row or column blocks (LoopBody::Skip): a handle the same at both
  // ends of the period is a constant, every other one moves by the skipped length; the rotations
  // turn and the counters advance by their change per period; the blocks held move on by the
  // loop's own step (all written in the period: their keys are relative to it), `batches` for
  // every block, `a_blocks` and `b_blocks` for A and B blocks, and the last stationary tile by
  // `stationary`.
  void SkipBlocks(CoreState& s, const sim::SkippedPeriods& skip, int64_t batches, int64_t a_blocks,
                  int64_t b_blocks, int64_t stationary) {
    // (The blocks do not matter here: only handles move.)
    sim::MoveHandles(skip,
                     [&](auto&& handle, auto&& value) { VisitState(s, 0, 0, 0, handle, value); });
    const std::array<sim::Rotation, 4> rot = Rotations(s);
    rot[0].Turn(std::span<Buffer>(s.a_bufs), skip.CounterSteps(s.a_count, 0));
    rot[1].Turn(std::span<Buffer>(s.b_bufs), skip.CounterSteps(s.b_count, 1));
    rot[2].Turn(std::span<int32_t>(s.slot_reader), skip.CounterSteps(s.psum_count, 2));
    rot[3].Turn(std::span<int32_t>(s.stage_reader), skip.CounterSteps(s.stage_count, 3));
    for (auto [bufs, blocks] : {std::pair{&s.a_bufs, a_blocks}, {&s.b_bufs, b_blocks}}) {
      for (Buffer& b : *bufs) {
        if (std::get<0>(b.key) < 0) continue;  // never loaded
        std::get<0>(b.key) += batches;
        std::get<1>(b.key) += blocks;
      }
    }
    if (s.last_stationary >= 0) s.last_stationary += stationary;
    int64_t* counters[] = {&s.a_count, &s.b_count, &s.psum_count, &s.stage_count, &s.evict_count};
    for (size_t c = 0; c < std::size(counters); ++c)
      *counters[c] += skip.CounterSteps(*counters[c], c);
  }

  // Appends an instruction through the stream writer (handles are flat positions).
  int32_t Add(const sim::Instruction& inst, std::initializer_list<int32_t> deps) {
    deps64_.assign(deps.begin(), deps.end());
    return int32_t(writer_.Add(inst, std::span<const int64_t>(deps64_)));
  }

  static GemmShape GemmShapeOf(const Plan& p) {
    return GemmShape{.dtype = p.dtype,
                     .rows_per_partition = p.rows_per_partition,
                     .in_bytes = p.in_bytes,
                     .out_bytes = p.out_bytes,
                     .transposed = p.stationary_b,
                     .store_queue = kGemmQueueStore};
  }

  const Plan& p_;
  const sim::Target& target_;
  sim::Program* program_;
  const GemmShape gemm_;
  sim::CoreProgram* core_ = nullptr;
  sim::StreamWriter writer_;
  sim::LoopCompressor loop_;        // a row's column blocks
  sim::LoopCompressor row_loop_;    // a batch group's row blocks
  sim::LoopCompressor group_loop_;  // a core's batch groups
  std::vector<int64_t> deps64_;     // Add's scratch
};

// Executes schedule steps on the CPU: fp32 PSUM accumulation per slot, rounded output staging.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& plan, const std::vector<float>& a, const std::vector<float>& b,
             std::vector<float>* c)
      : p_(plan), gemm_(plan, plan, plan.psum_slots, a, b, c) {}

  void BeginCore(int) {}
  bool CopyCore(int) { return false; }  // every core computes its own outputs
  template <typename Column>
  void Columns(CoreState&, int64_t, int64_t, int64_t last, Column& column) {
    for (int64_t nb = 0; nb < last; ++nb) column(nb);
  }
  template <typename Row>
  void Rows(CoreState&, int64_t, int64_t first, int64_t last, Row& row) {
    for (int64_t mb = first; mb < last; ++mb) row(mb);
  }
  template <typename Group>
  void Groups(CoreState&, int64_t first, int64_t count, int64_t, Group& group) {
    for (int64_t i = 0; i < count; ++i) group(first + i * p_.group);
  }
  int32_t Load(bool, int64_t, int64_t, int64_t, int32_t) { return -1; }

  int32_t Matmul(const GemmMatmul& mm) {
    gemm_.Matmul(mm.slot, mm.start, mm.batch, mm.m0, mm.m, mm.n0, mm.n, mm.k0, mm.k);
    return -1;
  }

  int32_t Evict(EngineKind, const GemmOutputTile& out, int32_t, int32_t) {
    const std::vector<float>& psum = gemm_.psum(out.slot);
    std::vector<float>& stage = gemm_.stage(out.stage);
    for (int64_t i = 0; i < out.m; ++i) {
      for (int64_t j = 0; j < out.n; ++j) {
        const int64_t at = i * gemm_.stride() + j;
        stage[at] = RoundToOutput(psum[at], p_.dtype);
      }
    }
    return -1;
  }

  int32_t Store(const GemmOutputTile& out, int32_t) {
    gemm_.Store(out.stage, out.batch, out.m0, out.m, out.n0, out.n);
    return -1;
  }

 private:
  const Plan& p_;
  CpuGemm gemm_;
};

}  // namespace

void SetBmmFaultForTesting(BmmFault fault) { g_fault = fault; }
void SetBmmLoweringForTesting(BmmLowering lowering) { g_lowering = lowering; }

absl::Status BmmKernel::ValidateProblem(const Problem& problem, const sim::Target& target) const {
  absl::Status checked = CheckProblem(name(), dims(), dtypes(), problem, target);
  if (!checked.ok()) return checked;
  if (target.systolic) {
    return absl::InvalidArgumentError(
        StrCat("bmm needs a neuron target (engines, SBUF, PSUM); ", target.name, " is systolic"));
  }
  return absl::OkStatus();
}

namespace {

// The analytic estimate (docs/kernels.md "Analytic estimates"): matmul's (EstimateMatmul) for
// one batch's GEMM as bmm runs it (M, N, then the K blocks innermost with the whole reduction in
// PSUM, an operand block kept while its indices do not change), for the batches of the busiest
// core, loaded batch_group at a time.
std::optional<double> EstimateBmm(const Plan& b, const Problem&, const sim::Target& target) {
  matmul_internal::Plan m;
  static_cast<GemmOperands&>(m) = b;
  static_cast<GemmTiling&>(m) = b;
  static_cast<GemmChoices&>(m) = b;
  static_cast<GemmBlocks&>(m) = b;
  m.order = "mnk";
  m.bufs = b.bufs;
  m.hoist = 1;
  m.shards = b.shard_batch ? 1 : b.shards;
  m.split_m = true;
  m.full_k = true;
  m.psum_slots = b.psum_slots;
  m.rows_per_partition = b.rows_per_partition;
  const int64_t batches = b.shard_batch ? CeilDiv(b.b, b.shards) : b.b;
  const int64_t group = std::min(b.group, batches);
  // An operand block is loaded again unless it is still in one of the bufs buffers: A blocks
  // cycle over the K blocks of an M block, B blocks over the N x K blocks. Without interleaving
  // each batch of the group walks the K blocks again.
  const int64_t blocks_m = m.shards > 1 ? CeilDiv(b.blocks_m, m.shards) : b.blocks_m;
  const double every = double(blocks_m * b.blocks_n * b.blocks_k);
  const double sets = b.interleave ? 1.0 : double(group);
  double loads[2] = {
      b.blocks_k <= b.bufs ? double(blocks_m * b.blocks_k) : every * sets,
      b.blocks_n * b.blocks_k <= b.bufs ? double(b.blocks_n * b.blocks_k) : every * sets};
  return EstimateMatmul(m, target, double(batches), group, loads).total_ns;
}

}  // namespace

namespace {

std::vector<Param> Params(const Problem& problem, const sim::Target& target) {
  std::vector<std::string> shards;
  for (int s = 1; s <= target.cores_per_chip; s *= 2) shards.push_back(std::to_string(s));
  std::vector<Param> params = GemmTileParams(problem, target);
  params.insert(
      params.end(),
      {
          {"block_m", {"1", "2", "4", "8"}, "M tiles per output block"},
          {"block_n", {"1", "2", "4", "8"}, "N tiles per output block"},
          {"block_k", {"1", "2", "4", "8", "16"}, "K tiles per operand block"},
          {"batch_group", {"1", "2", "4", "8"}, "batches moved by one DMA"},
          {"interleave", {"0", "1"}, "1: a group's batches interleaved tile by tile"},
          {"bufs", {"1", "2", "3"}, "rotating SBUF buffers per operand block"},
          StationaryParam(),
          EvictParam(),
          {"shard_dim", {"batch", "m"}, "what the cores split: batches or every batch's M blocks"},
          {"shards", shards, "cores the work is split over"},
      });
  return params;
}

// Verify's run: enough batches for every core to see a full and a ragged group, M and N at most
// two tiles and K at most three (tails kept); fewer tiles when that is still large.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  Plan plan = full;
  const int64_t batch_cores = plan.shard_batch ? plan.shards : 1;
  plan.b = std::min(plan.b, batch_cores * (plan.group + 1) + 1);
  plan.m = ReducedDim(full.m, plan.tile_m,
                      plan.shard_batch ? 2 : std::min<int64_t>(plan.shards * plan.block_m, 4) + 1);
  plan.n = ReducedDim(full.n, plan.tile_n, 2);
  plan.k = ReducedDim(full.k, plan.tile_k, 3);
  if (plan.b * plan.m * plan.n * plan.k > (int64_t(1) << 26)) {
    plan.n = ReducedDim(full.n, plan.tile_n, 1);
    plan.k = ReducedDim(full.k, plan.tile_k, 2);
  }
  plan.Derive();
  if (plan.shard_batch && plan.shards > plan.b) plan.shards = int(plan.b);
  if (!plan.shard_batch && plan.shards > plan.blocks_m) plan.shards = int(plan.blocks_m);
  const Dims reduced{{"B", plan.b}, {"M", plan.m}, {"N", plan.n}, {"K", plan.k}};

  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.m * 31 + plan.n * 7 + plan.b));
  return VerifyGemm(
      "bmm", reduced.ToString(), plan, plan.b, /*batched=*/true, rng,
      [&](const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* c) {
        CpuEmitter emitter(plan, a, b, c);
        Generate(plan, emitter);
      });
}

void Emit(const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
  SimEmitter emitter(plan, target, program);
  Generate(plan, emitter);
}

constexpr char kDescription[] =
    "C[b,M,N] = A[b,M,K] x B[b,K,N]: tiles, blocking, batch grouping and interleaving, stationary "
    "operand, PSUM eviction engine, sharding over batches or M";

}  // namespace

// Version 1: initial lowering. (Spec: name, version, description, dims, dtypes; steps: params,
// plan, emit, verify, estimate.)
BmmKernel::BmmKernel()
    : PlannedKernel(
          {"bmm", 1, kDescription, {"B", "M", "N", "K"}, {"bf16", "fp32", "fp8"}},
          Erase(PlanSteps<Plan>{Params, StrictPlan(MakePlan), Emit, RunReduced, EstimateBmm})) {}

Config BmmKernel::Default(const Problem&, const sim::Target&) const {
  // A plain compiler: hardware-sized tiles, no blocking, one batch at a time, one core.
  return Config{{"tile_m", "128"},    {"tile_n", "512"},   {"tile_k", "128"},
                {"block_m", "1"},     {"block_n", "1"},    {"block_k", "1"},
                {"batch_group", "1"}, {"interleave", "0"}, {"bufs", "2"},
                {"stationary", "a"},  {"evict", "vector"}, {"shard_dim", "batch"},
                {"shards", "1"}};
}

Kernel::Work BmmKernel::MinimumWork(const Problem& problem) const {
  const double b = double(problem.dims.Get("B").value_or(0));
  const double m = double(problem.dims.Get("M").value_or(0));
  const double n = double(problem.dims.Get("N").value_or(0));
  const double k = double(problem.dims.Get("K").value_or(0));
  auto dtype = sim::ParseDType(problem.dtype);
  const double in_bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  const double out_bytes = dtype.ok() ? OutputBytes(*dtype) : 2;
  return Work{2 * b * m * n * k, b * ((m * k + k * n) * in_bytes + m * n * out_bytes)};
}

}  // namespace tessel::kernels

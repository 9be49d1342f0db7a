#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include "kernels/schedule_util.h"
#include "schema/strings.h"

namespace tessel::kernels {
namespace {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

constexpr std::array<std::string_view, 6> kLoopOrders = {"mnk", "mkn", "nmk", "nkm", "kmn", "knm"};
constexpr int kStagingBufs = 2;  // output tiles in flight between eviction and store
constexpr int kQueueA = 0, kQueueB = 1, kQueueStore = 2;

MatmulFault g_fault = MatmulFault::kNone;
MatmulLowering g_lowering = MatmulLowering::kCompact;

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan : GemmOperands, GemmTiling {
  std::string order;
  int bufs = 2;
  int hoist = 0;
  bool stationary_b = false;
  std::string evict;
  int shards = 1;

  int64_t tiles_m = 0, tiles_n = 0, tiles_k = 0;
  int64_t blocks_m = 0, blocks_n = 0, blocks_k = 0;
  bool split_m = true;  // shards split M blocks (else N blocks)
  bool full_k = false;  // whole K reduction stays in PSUM
  int psum_slots = 0;   // PSUM accumulation groups in rotation
  int64_t live_acc_blocks = 0;
  int64_t sbuf_a = 0, sbuf_b = 0, sbuf_acc = 0, sbuf_stage = 0;  // per partition, one buffer
  int rows_per_partition = 1;  // 2 for fp8 double-row K tiles over 128
};

// Builds the plan. `strict` adds the rules that only prune redundant configs (blocking factors
// larger than needed, more shards than blocks); Verify's reduced problem turns them off.
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
  std::optional<std::string_view> stationary = config.Get("stationary");
  if (!stationary || (*stationary != "a" && *stationary != "b")) {
    return absl::InvalidArgumentError("stationary must be a or b");
  }
  p.stationary_b = *stationary == "b";
  std::optional<std::string_view> evict = config.Get("evict");
  if (!evict ||
      (*evict != "vector" && *evict != "scalar" && *evict != "split" && *evict != "gpsimd")) {
    return absl::InvalidArgumentError("evict must be vector, scalar, split or gpsimd");
  }
  p.evict = std::string(*evict);
  if (p.hoist > 1) return absl::InvalidArgumentError("hoist must be 0 or 1");

  p.tiles_m = CeilDiv(p.m, p.tile_m);
  p.tiles_n = CeilDiv(p.n, p.tile_n);
  p.tiles_k = CeilDiv(p.k, p.tile_k);
  p.blocks_m = CeilDiv(p.tiles_m, p.block_m);
  p.blocks_n = CeilDiv(p.tiles_n, p.block_n);
  p.blocks_k = CeilDiv(p.tiles_k, p.block_k);
  if (target.systolic) return p;  // one GEMM instruction; the schedule does not apply

  // TensorE limits.
  if (absl::Status tile = CheckMatmulTile(
          target, p.dtype, problem.dtype, "tile_k", p.tile_k,
          p.stationary_b ? "stationary=b: tile_n=" : "stationary=a: tile_m=",
          p.stationary_b ? p.tile_n : p.tile_m, p.stationary_b ? p.tile_m : p.tile_n);
      !tile.ok()) {
    return tile;
  }
  p.rows_per_partition = int(CeilDiv(p.tile_k, target.sbuf_partitions));
  if (p.evict == "gpsimd") {
    return absl::InvalidArgumentError(
        "evict=gpsimd: GpSimd cannot access PSUM, so it cannot evict matmul results");
  }

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
    p.sbuf_acc = groups_per_block * out_free_tile * 4 * live * out_partitions_tile /
                 std::min<int64_t>(out_partitions_tile, target.sbuf_partitions);
  }
  p.sbuf_stage = out_free_tile * p.out_bytes;
  const int64_t total = (p.sbuf_a + p.sbuf_b) * p.bufs + p.sbuf_acc + p.sbuf_stage * kStagingBufs;
  if (total > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(
        StrCat("SBUF capacity: A blocks ", p.sbuf_a, " x ", p.bufs, " bufs + B blocks ", p.sbuf_b,
               " x ", p.bufs, " bufs + fp32 accumulator ", p.sbuf_acc, " + output staging ",
               p.sbuf_stage * kStagingBufs, " = ", total, " bytes per partition exceed the usable ",
               target.UsableSbufPerPartition()));
  }
  return p;
}

enum class EvictKind { kCopyToAcc, kAddToAcc, kFinal, kFinalAdd };

// Walks the plan's schedule in program order and tells `e` each step. Shared by the lowering
// (which turns steps into sim instructions) and the CPU execution in Verify, so both run the same
// tile boundaries, tails and accumulation order. Handles returned by the emitter name emitted
// instructions (-1 = none) and are passed back as dependencies.
//
// With kCompress (the compact lowering), each block loop is emitted as runs of iterations; inside
// a run of "regular" iterations (same tile sizes, same first/last-K role) the generator state is
// compared, relative to the current position, at every iteration boundary. When it equals the
// state one or two iterations earlier, every later iteration of the run emits the same
// instructions with the same relative dependencies, so the emitted period is wrapped in a repeat
// and the generator state is advanced without emitting (e.WrapRepeat / e.position()).
template <typename Emitter, bool kCompress>
class Generator {
 public:
  Generator(const Plan& p, Emitter& e) : p_(p), e_(e) {}

  void Run() {
    tiles_k_ = p_.tiles_k;
    if (g_fault == MatmulFault::kDropRaggedKTile && p_.k % p_.tile_k != 0 && p_.k > p_.tile_k) {
      tiles_k_ = p_.k / p_.tile_k;
    }
    blocks_k_ = CeilDiv(tiles_k_, p_.block_k);
    auto dim_index = [](char c) { return c == 'm' ? 0 : c == 'n' ? 1 : 2; };
    for (int l = 0; l < 3; ++l) d_[l] = dim_index(p_.order[l]);
    nblocks_ = {p_.blocks_m, p_.blocks_n, blocks_k_};
    // Whether the last block of M / N differs from the others (a partial block or tile).
    ragged_ = {p_.m % p_.tile_m != 0 || p_.tiles_m % p_.block_m != 0,
               p_.n % p_.tile_n != 0 || p_.tiles_n % p_.block_n != 0};
    const int64_t split_blocks = p_.split_m ? p_.blocks_m : p_.blocks_n;
    for (int core = 0; core < p_.shards; ++core) {
      core_ = core;
      const int64_t lo = split_blocks * core / p_.shards;
      const int64_t hi = split_blocks * (core + 1) / p_.shards;
      begin_ = {p_.split_m ? lo : 0, p_.split_m ? 0 : lo, 0};
      end_ = {p_.split_m ? hi : p_.blocks_m, p_.split_m ? p_.blocks_n : hi, blocks_k_};
      // A core with as many blocks as the previous one, none of them ragged, runs the same
      // program (every core starts from the same state).
      const int64_t prev_lo = split_blocks * (core - 1) / p_.shards;
      if (Emitter::kCompress && core > 0 && hi - lo == lo - prev_lo &&
          (hi < split_blocks || !ragged_[p_.split_m ? 0 : 1])) {
        e_.CopyCore(core);
        continue;
      }
      e_.BeginCore(core);
      s_ = State{};
      s_.a_loads.assign(p_.bufs, {});
      s_.b_loads.assign(p_.bufs, {});
      s_.a_reader.assign(p_.bufs, -1);
      s_.b_reader.assign(p_.bufs, -1);
      s_.slot_reader.assign(p_.psum_slots, -1);
      s_.group_slot.assign(p_.block_m * p_.block_n, 0);
      s_.stage_reader.fill(-1);
      Level(0);
    }
  }

 private:
  struct State {
    int64_t a_count = 0, b_count = 0, psum_count = 0, stage_count = 0, evict_count = 0;
    int a_cur = 0, b_cur = 0;
    std::vector<std::vector<int64_t>> a_loads, b_loads;
    std::vector<int64_t> a_reader, b_reader, slot_reader;
    std::vector<int> group_slot;
    std::array<int64_t, kStagingBufs> stage_reader;
    // Accumulator writers in the order they are read again: a FIFO, acc[acc_head..] live.
    // Indices are logical: acc[i - acc_base] holds entry i (Advance drops skipped history).
    std::vector<int64_t> acc;
    size_t acc_head = 0, acc_base = 0;
    size_t AccEnd() const { return acc_base + acc.size(); }
    int64_t Acc(size_t i) const { return acc[i - acc_base]; }
    std::pair<int64_t, int64_t> a_key{-1, -1}, b_key{-1, -1}, last_stationary{-1, -1};
  };

  struct Counters {
    int64_t a = 0, b = 0, psum = 0, stage = 0, evict = 0;
    size_t acc_head = 0, acc_size = 0;
  };
  struct Mark {  // a boundary between two iterations of a run
    std::vector<int64_t> canon;
    std::vector<int64_t> abs;      // per canon entry: the absolute handle, or -1 (not a handle)
    std::vector<int64_t> acc_rel;  // live FIFO entries relative to pos
    int64_t pos = 0;
    size_t seg = 0;
    size_t reads = 0;  // e_.reads() at the boundary
    Counters state;
  };

  // Whether the period from `then` to `now` repeats: every canon entry equal, except handles
  // that the period did not write (the same instruction at both boundaries, older than `then`:
  // an operand loaded before the loop). The next periods read and write the same relative state,
  // so such a handle stays as it is (Advance keeps it). The period may read it only where Run can
  // anchor the reads to the repeat's entry (constants_ holds the handles; see AnchorReads).
  //
  // Split in two for early rejection: CanonPeriodic compares the canon entries (cheap) and
  // collects the constants; ConstantReadsAnchorable then scans the period's reads of them.
  bool CanonPeriodic(const Mark& then, const Mark& now) {
    if (then.canon.size() != now.canon.size()) return false;
    constants_.clear();
    for (size_t q = 0; q < now.canon.size(); ++q) {
      if (then.canon[q] == now.canon[q]) continue;
      const int64_t h = now.abs[q];
      if (h < 0 || h != then.abs[q] || h >= then.pos) return false;
      constants_.push_back(h);
    }
    return true;
  }
  bool ConstantReadsAnchorable(const Mark& then, const Mark& now) {
    if (constants_.empty()) return true;
    std::sort(constants_.begin(), constants_.end());
    constants_.erase(std::unique(constants_.begin(), constants_.end()), constants_.end());
    size_t reads = 0;
    const int64_t lo = constants_.front(), hi = constants_.back();
    for (int64_t target : e_.ReadsSince(then.reads, now.reads)) {
      // Most reads are of the period's own results, above every constant.
      if (target < lo || target > hi) continue;
      reads += std::binary_search(constants_.begin(), constants_.end(), target);
    }
    return reads == 0 || reads == e_.AnchorReads(then.seg, then.pos, constants_, 0, false);
  }
  // Whether the period's reads of `handles` (ascending, before then.pos) are all outside nested
  // repeats, where they can be anchored (with `stride`) to the repeat's entry.
  bool ReadsAnchorable(const Mark& then, const Mark& now, std::span<const int64_t> handles,
                       int64_t stride) {
    size_t reads = 0;
    for (int64_t target : e_.ReadsSince(then.reads, now.reads)) {
      if (target < handles.front() || target > handles.back()) continue;
      reads += std::binary_search(handles.begin(), handles.end(), target);
    }
    return reads == e_.AnchorReads(then.seg, then.pos, handles, stride, false);
  }
  Counters Count() const {
    return {s_.a_count,     s_.b_count,  s_.psum_count, s_.stage_count,
            s_.evict_count, s_.acc_head, s_.AccEnd()};
  }
  // The accumulator FIFO entries the coming `periods` periods read must continue the period:
  // each is the entry P places earlier plus the period's length. A period pops and pushes the
  // same number of entries, or only pushes (the first K block), or only pops (the last).
  bool AccPeriodic(const Mark& then, const Mark& now, int64_t periods) const {
    const size_t pops = now.state.acc_head - then.state.acc_head;
    const size_t pushes = now.state.acc_size - then.state.acc_size;
    const size_t live = now.acc_rel.size();
    if (pops == 0) return pushes <= live;
    if (pushes != 0 && pops != pushes) return false;
    if (pushes == 0 && size_t(periods) * pops > live) return false;
    // Entry u of the FIFO is read in period u / P; equal relative offsets for every entry read in
    // the coming periods mean each period reads as the last one did (and the FIFO continues with
    // stride P and step len, which Advance relies on).
    const size_t need = std::min<size_t>(now.acc_rel.size(), size_t(periods) * pops);
    if (then.acc_rel.size() < need) return false;
    return std::equal(now.acc_rel.begin(), now.acc_rel.begin() + ptrdiff_t(need),
                      then.acc_rel.begin());
  }
  // Or, when the period only pops (the last K block), whether the entries the period and the
  // coming ones read advance by one stride per period: written by an earlier pass with another
  // period, they are read through strided dependencies (sim/program.h). Returns the stride and
  // fills acc_reads_ with the entries the period read; 0 when they do not.
  int64_t AccStride(const Mark& then, const Mark& now, int64_t periods) {
    const size_t pops = now.state.acc_head - then.state.acc_head;
    const size_t pushes = now.state.acc_size - then.state.acc_size;
    const size_t need = size_t(periods) * pops;
    if (pops == 0 || pushes != 0 || need > now.acc_rel.size() || pops > then.acc_rel.size()) {
      return 0;
    }
    auto at_now = [&](size_t u) { return now.pos - now.acc_rel[u]; };
    auto at_then = [&](size_t u) { return then.pos - then.acc_rel[u]; };
    const int64_t stride = at_now(0) - at_then(0);
    if (stride <= 0) return 0;
    for (size_t u = 0; u < need; ++u) {
      if (at_now(u) - (u < pops ? at_then(u) : at_now(u - pops)) != stride) return 0;
    }
    acc_reads_.resize(pops);
    for (size_t u = 0; u < pops; ++u) acc_reads_[u] = at_then(u);
    std::sort(acc_reads_.begin(), acc_reads_.end());
    return stride;
  }

  static int64_t SizeOf(int64_t index, int64_t tile, int64_t dim) {
    return std::min(tile, dim - index * tile);
  }
  int64_t NSize(int64_t tn) const {
    int64_t size = SizeOf(tn, p_.tile_n, p_.n);
    if (g_fault == MatmulFault::kRaggedNOffByOne && size < p_.tile_n && size > 1) --size;
    return size;
  }

  // Whether iteration `i` of loop level `l` emits like its regular neighbours.
  bool Regular(int l, int64_t i) const {
    const int d = d_[l];
    if (d == 2) return i != 0 && i != nblocks_[d] - 1;  // first and last K blocks differ
    return i != nblocks_[d] - 1 || !ragged_[d];
  }

  void Level(int l) {
    const int d = d_[l];
    int64_t i = begin_[d];
    while (i < end_[d]) {
      if (!kCompress || !Regular(l, i)) {
        idx_[d] = i;
        if (l == 2) {
          Block();
        } else {
          Level(l + 1);
        }
        ++i;
        continue;
      }
      // A run of regular iterations [i, run_end).
      int64_t run_end = i;
      while (run_end < end_[d] && Regular(l, run_end)) ++run_end;
      i = Run(l, i, run_end);
    }
  }

  // Emits iterations [first, last) of level l (all regular), compressing periods; returns last.
  int64_t Run(int l, int64_t first, int64_t last) {
    const int d = d_[l];
    // The boundaries before iterations first + j: only the last three are compared, in a ring
    // of this level's (reused, so their vectors keep their capacity).
    std::array<Mark, 3>& marks = marks_[size_t(l)];
    size_t made = 0;
    int64_t i = first;
    bool done = false;
    while (i < last) {
      if (!done) {
        const size_t now = made++;
        Mark& m = marks[now % 3];
        idx_[d] = i;
        Canon(l, &m.canon, &m.abs);
        m.pos = e_.position();
        m.reads = e_.reads();
        m.seg = e_.Cut();
        m.state = Count();
        m.acc_rel.resize(s_.AccEnd() - s_.acc_head);
        const int64_t* live = s_.acc.data() + (s_.acc_head - s_.acc_base);
        for (size_t x = 0; x < m.acc_rel.size(); ++x) m.acc_rel[x] = m.pos - live[x];
        for (int p = 1; p <= 2 && size_t(p) <= now; ++p) {
          const Mark& then = marks[(now - size_t(p)) % 3];
          if (!CanonPeriodic(then, m)) continue;
          const int64_t periods = (last - i) / p;
          if (periods < 1) break;
          int64_t stride = 0;
          if (!AccPeriodic(then, m, periods) && (stride = AccStride(then, m, periods)) == 0) {
            continue;
          }
          if (!ConstantReadsAnchorable(then, m)) continue;
          if (stride > 0 && !ReadsAnchorable(then, m, acc_reads_, stride)) continue;
          if (!constants_.empty()) e_.AnchorReads(then.seg, then.pos, constants_, 0, true);
          if (stride > 0) e_.AnchorReads(then.seg, then.pos, acc_reads_, stride, true);
          e_.WrapRepeat(then.seg, 1 + periods);
          Advance(then, m, l, periods, p);
          i += periods * p;
          done = true;
          break;
        }
        if (i >= last) break;
      }
      idx_[d] = i;
      if (l == 2) {
        Block();
      } else {
        Level(l + 1);
      }
      ++i;
    }
    return last;
  }

  // The generator state relative to the current position and loop indices.
  void Canon(int l, std::vector<int64_t>* out, std::vector<int64_t>* abs) {
    // Sized first, then filled by index (Run calls this at every iteration boundary).
    size_t n = size_t(p_.psum_slots) + s_.group_slot.size() + kStagingBufs + 7;
    for (int which = 0; which < 2; ++which) {
      for (const auto& loads : which == 0 ? s_.a_loads : s_.b_loads) n += 2 + loads.size();
    }
    out->resize(n);
    abs->assign(n, -1);
    int64_t* o = out->data();
    int64_t* a = abs->data();
    size_t k = 0;
    const int64_t pos = e_.position();
    // A handle: relative to the position, its absolute value recorded beside it.
    auto handle = [&](int64_t h) {
      a[k] = h;
      o[k++] = h < 0 ? int64_t(-1) : pos - h;
    };
    auto value = [&](int64_t v) { o[k++] = v; };
    for (int which = 0; which < 2; ++which) {
      const int64_t count = which == 0 ? s_.a_count : s_.b_count;
      const auto& reader = which == 0 ? s_.a_reader : s_.b_reader;
      const auto& loads = which == 0 ? s_.a_loads : s_.b_loads;
      for (int j = 0; j < p_.bufs; ++j) {
        const int b = int((count + j) % p_.bufs);
        handle(reader[b]);
        value(int64_t(loads[b].size()));
        for (int64_t h : loads[b]) handle(h);
      }
    }
    for (int j = 0; j < p_.psum_slots; ++j) {
      handle(s_.slot_reader[(s_.psum_count + j) % p_.psum_slots]);
    }
    for (int g : s_.group_slot) {
      value(((g - s_.psum_count) % p_.psum_slots + p_.psum_slots) % p_.psum_slots);
    }
    for (int j = 0; j < kStagingBufs; ++j) {
      handle(s_.stage_reader[(s_.stage_count + j) % kStagingBufs]);
    }
    value(p_.evict == "split" ? s_.evict_count % 2 : 0);
    // Keys relative to the first block of the coming iteration (inner loops at their begin).
    std::array<int64_t, 3> next = idx_;
    for (int ll = l + 1; ll < 3; ++ll) next[d_[ll]] = begin_[d_[ll]];
    value(s_.a_key.first - next[0]);
    value(s_.a_key.second - next[2]);
    value(s_.b_key.first - next[2]);
    value(s_.b_key.second - next[1]);
    value(s_.last_stationary.first - next[2] * p_.block_k);
    value(s_.last_stationary.second -
          (p_.stationary_b ? next[1] * p_.block_n : next[0] * p_.block_m));
    assert(k == n);
  }

  // Skips `periods` periods of p iterations of level l: the state moves as it did from `then` to
  // `now`, once per period.
  void Advance(const Mark& then, const Mark& now, int l, int64_t periods, int p) {
    const int64_t shift = (now.pos - then.pos) * periods;
    // Handles move with the period, except the constants CanonPeriodic allowed: entries of an array
    // that does not rotate, not written in the period (so older than `then`). In a rotating array
    // every entry is relative: an entry older than `then` was written in an earlier period.
    auto sh = [&](int64_t h, bool still) {
      return h < 0 || (still && h < then.pos) ? h : h + shift;
    };
    const Counters& a = then.state;
    State n = s_;
    // Rotates `arr` by `per` positions per period; `fix` moves each entry.
    auto rotate = [&](auto& arr, int64_t per, auto fix) {
      const int size = int(arr.size());
      const bool still = per % size == 0;
      const int64_t delta = per * periods;
      auto copy = arr;
      for (int j = 0; j < size; ++j) {
        arr[size_t(((j + delta) % size + size) % size)] = fix(copy[j], still);
      }
    };
    const int64_t pa = s_.a_count - a.a, pb = s_.b_count - a.b;
    const int64_t pp = s_.psum_count - a.psum, ps = s_.stage_count - a.stage;
    const int64_t dp = pp * periods;
    n.a_count += pa * periods;
    n.b_count += pb * periods;
    n.psum_count += dp;
    n.stage_count += ps * periods;
    n.evict_count += (s_.evict_count - a.evict) * periods;
    rotate(n.a_reader, pa, sh);
    rotate(n.b_reader, pb, sh);
    auto shv = [&](std::vector<int64_t> v, bool still) {
      for (int64_t& h : v) h = sh(h, still);
      return v;
    };
    rotate(n.a_loads, pa, shv);
    rotate(n.b_loads, pb, shv);
    rotate(n.slot_reader, pp, sh);
    rotate(n.stage_reader, ps, sh);
    for (int& g : n.group_slot) g = int(((g + dp) % p_.psum_slots + p_.psum_slots) % p_.psum_slots);
    n.a_cur = int(((n.a_count - 1) % p_.bufs + p_.bufs) % p_.bufs);
    n.b_cur = int(((n.b_count - 1) % p_.bufs + p_.bufs) % p_.bufs);
    {
      // The FIFO after `periods` more periods, each popping `pops` and pushing `pushes`
      // entries: the pushes continue those of the last period with step len (AccPeriodic checked
      // the part that is read and that the last period's pushes are still live).
      const size_t pops = now.state.acc_head - a.acc_head;
      const size_t pushes = now.state.acc_size - a.acc_size;
      const int64_t len = now.pos - then.pos;
      const size_t live = s_.AccEnd() - s_.acc_head;
      const size_t new_live = live + size_t(periods) * pushes - size_t(periods) * pops;
      std::vector<int64_t> fifo(new_live);
      const int64_t* f = s_.acc.data() + (s_.acc_head - s_.acc_base);
      for (size_t u = 0; u < new_live; ++u) {
        const size_t t = size_t(periods) * pops + u;
        if (t < live) {
          fifo[u] = f[t];
        } else {
          const size_t v = t - live;
          fifo[u] = f[live - pushes + v % pushes] + int64_t(v / pushes + 1) * len;
        }
      }
      n.acc = std::move(fifo);
      n.acc_head += size_t(periods) * pops;
      n.acc_base = n.acc_head;
    }
    // Keys: the level's index moved by periods * p iterations.
    const int d = d_[l];
    const int64_t steps = periods * int64_t(p);
    if (d == 0) {
      n.a_key.first += steps;
      if (!p_.stationary_b) n.last_stationary.second += steps * p_.block_m;
    } else if (d == 1) {
      n.b_key.second += steps;
      if (p_.stationary_b) n.last_stationary.second += steps * p_.block_n;
    } else {
      n.a_key.second += steps;
      n.b_key.first += steps;
      n.last_stationary.first += steps * p_.block_k;
    }
    s_ = std::move(n);
    e_.Advance(shift);
  }

  void Block() {
    const Plan& p = p_;
    State& s = s_;
    const int core = core_;
    const int64_t bm = idx_[0], bn = idx_[1], bk = idx_[2];
    const int64_t tm_lo = bm * p.block_m, tm_hi = std::min(p.tiles_m, tm_lo + p.block_m);
    const int64_t tn_lo = bn * p.block_n, tn_hi = std::min(p.tiles_n, tn_lo + p.block_n);
    const int64_t tk_lo = bk * p.block_k, tk_hi = std::min(tiles_k_, tk_lo + p.block_k);
    const int64_t m0 = tm_lo * p.tile_m, m1 = std::min(p.m, tm_hi * p.tile_m);
    const int64_t n0 = tn_lo * p.tile_n, n1 = std::min(p.n, tn_hi * p.tile_n);

    if (p.hoist == 0 || s.a_key != std::pair{bm, bk}) {
      s.a_key = {bm, bk};
      s.a_cur = int(s.a_count++ % p.bufs);
      s.a_loads[s.a_cur].clear();
      for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
        s.a_loads[s.a_cur].push_back(e_.Load(core, /*is_a=*/true, tk * p.tile_k,
                                             SizeOf(tk, p.tile_k, p.k), m0, m1 - m0,
                                             s.a_reader[s.a_cur]));
      }
    }
    if (p.hoist == 0 || s.b_key != std::pair{bk, bn}) {
      s.b_key = {bk, bn};
      s.b_cur = int(s.b_count++ % p.bufs);
      s.b_loads[s.b_cur].clear();
      for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
        s.b_loads[s.b_cur].push_back(e_.Load(core, /*is_a=*/false, tk * p.tile_k,
                                             SizeOf(tk, p.tile_k, p.k), n0, n1 - n0,
                                             s.b_reader[s.b_cur]));
      }
    }

    // The output tiles ("groups"): the emitter may compress their loop (GroupStart/EndGroups).
    e_.BeginGroups();
    for (int64_t tm = tm_lo; tm < tm_hi; ++tm) {
      for (int64_t tn = tn_lo; tn < tn_hi; ++tn) {
        e_.GroupStart();
        const int64_t om0 = tm * p.tile_m, omsz = SizeOf(tm, p.tile_m, p.m);
        const int64_t on0 = tn * p.tile_n, onsz = NSize(tn);
        const int local = int((tm - tm_lo) * p.block_n + (tn - tn_lo));
        const bool group_begins = !p.full_k || bk == 0;
        int slot;
        if (group_begins) {
          slot = int(s.psum_count++ % p.psum_slots);
          s.group_slot[local] = slot;
        } else {
          slot = s.group_slot[local];
        }
        int64_t last_mm = -1;
        for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
          const bool start = group_begins && tk == tk_lo;
          std::pair<int64_t, int64_t> stationary{tk, p.stationary_b ? tn : tm};
          const bool reload = stationary != s.last_stationary;
          s.last_stationary = stationary;
          last_mm = e_.Matmul(core, om0, omsz, on0, onsz, tk * p.tile_k, SizeOf(tk, p.tile_k, p.k),
                              slot, start, reload, s.a_loads[s.a_cur][tk - tk_lo],
                              s.b_loads[s.b_cur][tk - tk_lo], start ? s.slot_reader[slot] : -1);
          s.a_reader[s.a_cur] = last_mm;
          s.b_reader[s.b_cur] = last_mm;
        }
        const bool last_kblock = bk == blocks_k_ - 1;
        if (p.full_k && !last_kblock) continue;
        EvictKind kind;
        if (p.full_k || blocks_k_ == 1) {
          kind = EvictKind::kFinal;
        } else if (bk == 0) {
          kind = EvictKind::kCopyToAcc;
        } else if (!last_kblock) {
          kind = EvictKind::kAddToAcc;
        } else {
          kind = EvictKind::kFinalAdd;
        }
        EngineKind engine = EngineKind::kVector;
        if (kind == EvictKind::kCopyToAcc || kind == EvictKind::kFinal) {
          if (p.evict == "scalar" || (p.evict == "split" && s.evict_count % 2 == 1)) {
            engine = EngineKind::kScalar;
          }
          ++s.evict_count;
        }
        const bool final = kind == EvictKind::kFinal || kind == EvictKind::kFinalAdd;
        const bool add = kind == EvictKind::kAddToAcc || kind == EvictKind::kFinalAdd;
        // Every K block visits the output tiles in the same order, so the accumulator writers
        // form a FIFO: the front is this tile's previous partial sum.
        int64_t acc_dep = -1;
        if (add && s.acc_head < s.AccEnd()) acc_dep = s.Acc(s.acc_head++);
        const int stage = int(s.stage_count % kStagingBufs);
        int64_t ev = e_.Evict(core, kind, engine, slot, om0, omsz, on0, onsz, stage, last_mm,
                              acc_dep, final ? s.stage_reader[stage] : -1);
        s.slot_reader[slot] = ev;
        if (!final) {
          s.acc.push_back(ev);
          continue;
        }
        ++s.stage_count;
        s.stage_reader[stage] = e_.Store(core, om0, omsz, on0, onsz, stage, ev);
      }
    }
    e_.EndGroups();
  }

  const Plan& p_;
  Emitter& e_;
  int64_t tiles_k_ = 0, blocks_k_ = 0;
  std::array<int, 3> d_{};
  std::array<int64_t, 3> nblocks_{}, begin_{}, end_{}, idx_{};
  std::array<bool, 2> ragged_{};
  int core_ = 0;
  State s_;
  std::array<std::array<Mark, 3>, 3> marks_;  // per loop level: Run's boundary ring
  std::vector<int64_t> constants_;  // scratch for CanonPeriodic and ConstantReadsAnchorable
  std::vector<int64_t> acc_reads_;  // scratch for AccStride
};

template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  Generator<Emitter, Emitter::kCompress> g(p, e);
  g.Run();
}

// Turns schedule steps into simulator instructions: a flat program (kCompact = false, handles are
// instruction indices) or a loop-structured one (handles are flat positions, deps become
// distances).
template <bool kCompact>
class SimEmitter {
 public:
  static constexpr bool kCompress = kCompact;
  SimEmitter(const Plan& plan, const sim::Target& target, sim::Program* program)
      : p_(plan), target_(target), program_(program) {
    // The read log and group records of the thread's previous lowering, so their capacity is
    // reused (their contents are cleared before use); handed back when done.
    SwapThreadBuffers();
  }
  ~SimEmitter() { SwapThreadBuffers(); }
  SimEmitter(const SimEmitter&) = delete;
  SimEmitter& operator=(const SimEmitter&) = delete;

  // Core `core` runs the same program as core - 1.
  void CopyCore(int core) {
    program_->cores.resize(core + 1);
    program_->cores[core] = program_->cores[core - 1];
  }

  void BeginCore(int core) {
    program_->cores.resize(core + 1);
    core_ = &program_->cores[core];
    pos_ = 0;
    reads_.clear();
    reads_.reserve(1 << 13);
    rec_.reserve(512);
    // Room for a typical core, so the program grows without copying itself several times.
    core_->instructions.reserve(kCompact ? 2048 : 4096);
    core_->deps.reserve(kCompact ? 4096 : 8192);
    if (kCompact) core_->segments.reserve(256);
    const int in_partitions = int(std::min<int64_t>(p_.tile_k, target_.sbuf_partitions));
    const int64_t out_part = p_.stationary_b ? p_.tile_n : p_.tile_m;
    const int out_partitions = int(std::min<int64_t>(out_part, target_.sbuf_partitions));
    const int64_t out_free = p_.stationary_b ? p_.tile_m : p_.tile_n;
    core_->allocations.push_back({"a_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_a, p_.bufs});
    core_->allocations.push_back({"b_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_b, p_.bufs});
    if (p_.sbuf_acc > 0) {
      core_->allocations.push_back(
          {"c_accumulator", Mem::kSbuf, 0, out_partitions, p_.sbuf_acc, 1});
    }
    core_->allocations.push_back(
        {"c_staging", Mem::kSbuf, 0, out_partitions, p_.sbuf_stage, kStagingBufs});
    core_->allocations.push_back(
        {"psum", Mem::kPsum, 0, out_partitions, out_free * 4, p_.psum_slots});
  }

  int64_t position() const { return pos_; }
  // Every dependency emitted on this core, in order (targets, as handles).
  size_t reads() const { return reads_.size(); }
  std::span<const int64_t> ReadsSince(size_t from, size_t to) const {
    return std::span<const int64_t>(reads_.data() + from, to - from);
  }
  // Starts a new instruction segment and returns its index (a possible repeat start).
  size_t Cut() {
    const uint32_t n = uint32_t(core_->instructions.size());
    core_->segments.push_back({sim::Segment::kInstructions, n, n, 0, 0});
    return core_->segments.size() - 1;
  }
  // Dependencies of the instructions emitted since segment `seg` (which starts at flat position
  // `entry`) on one of `constants` (ascending handles before `entry`) that can be anchored to
  // `entry` (sim/program.h): relative ones outside nested repeats and, without a stride, plain
  // anchored ones of the repeats nested directly in the segments. Returns how many reads they
  // make (a nested repeat's, once per iteration); with `rewrite`, anchors them to `entry`, so
  // they name the same instruction in every iteration once the segments become a repeat (with a
  // `stride`: the instruction `stride` positions later in each iteration).
  size_t AnchorReads(size_t seg, int64_t entry, std::span<const int64_t> constants, int64_t stride,
                     bool rewrite) {
    if (constants.empty()) return 0;
    const auto& segs = core_->segments;
    auto constant = [&](int64_t h) {
      return h >= constants.front() && h <= constants.back() &&
             std::binary_search(constants.begin(), constants.end(), h);
    };
    size_t found = 0;
    int64_t pos = entry;
    for (size_t i = seg; i < segs.size(); ++i) {
      const sim::Segment& g = segs[i];
      if (g.kind == sim::Segment::kBegin) {
        if (stride == 0) found += NestedAnchorReads(i, pos, entry, constant, rewrite);
        pos += core_->RepeatFlatSize(i);
        i = g.match;
        continue;
      }
      for (uint32_t t = g.begin; t < g.end; ++t, ++pos) {
        const sim::Instruction& inst = core_->instructions[t];
        for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
          const int32_t d = core_->deps[j];
          if (d <= 0 || !constant(pos - d)) continue;
          ++found;
          if (!rewrite) continue;
          core_->deps[j] = -int32_t(entry - (pos - d));
          core_->SetAnchorForm(j, {.stride = int32_t(stride), .up = 0});
        }
      }
    }
    return found;
  }
  // AnchorReads for the repeat whose kBegin is segments[begin], entered at `nested_entry`: its
  // own templates' plain anchors on a constant become anchors to `entry`, one repeat further out.
  template <typename IsConstant>
  size_t NestedAnchorReads(size_t begin, int64_t nested_entry, int64_t entry,
                           const IsConstant& constant, bool rewrite) {
    const auto& segs = core_->segments;
    size_t found = 0;
    for (size_t i = begin + 1; i < segs[begin].match; ++i) {
      const sim::Segment& g = segs[i];
      if (g.kind == sim::Segment::kBegin) {  // deeper: left as it is (so not counted)
        i = g.match;
        continue;
      }
      for (uint32_t t = g.begin; t < g.end; ++t) {
        const sim::Instruction& inst = core_->instructions[t];
        for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
          const int32_t d = core_->deps[j];
          if (d >= 0 || core_->FormOf(j) != sim::AnchorForm{} || !constant(nested_entry + d)) {
            continue;
          }
          found += size_t(segs[begin].count);
          if (!rewrite) continue;
          core_->deps[j] = -int32_t(entry - (nested_entry + d));
          core_->SetAnchorForm(j, {.stride = 0, .up = 1});
        }
      }
    }
    return found;
  }

  // Wraps segments [seg, end) in a repeat of `count` iterations.
  void WrapRepeat(size_t seg, int64_t count) {
    auto& segs = core_->segments;
    segs.insert(segs.begin() + ptrdiff_t(seg), sim::Segment{sim::Segment::kBegin, 0, 0, count, 0});
    for (size_t j = seg + 1; j < segs.size(); ++j) {
      if (segs[j].kind != sim::Segment::kInstructions) segs[j].match += 1;
    }
    core_->EndRepeat();
  }
  void Advance(int64_t shift) { pos_ += shift; }

  // A block's output-tile loop. The compact emitter records its instructions and, at EndGroups,
  // emits them with the longest periodic tail wrapped in a repeat whose dependencies on the
  // operand loads before the loop are anchored (sim/program.h).
  void BeginGroups() {
    if (!kCompact) return;
    recording_ = true;
    rec_.clear();
    starts_.clear();
  }
  void GroupStart() {
    if (kCompact) starts_.push_back(rec_.size());
  }
  void EndGroups() {
    if (!kCompact) return;
    recording_ = false;
    EmitGroups();
  }

  int64_t Load(int, bool is_a, int64_t, int64_t ksz, int64_t, int64_t xsz, int64_t dep) {
    const int rows = p_.rows_per_partition;
    sim::Instruction dma = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(ksz, rows)),
                                        xsz * p_.in_bytes * rows, is_a ? kQueueA : kQueueB);
    dma.chunk_bytes = int32_t(xsz * p_.in_bytes);
    return Add(dma, {dep});
  }

  int64_t Matmul(int, int64_t, int64_t msz, int64_t, int64_t nsz, int64_t, int64_t ksz, int, bool,
                 bool reload, int64_t dep_a, int64_t dep_b, int64_t dep_slot) {
    sim::Instruction mm = p_.stationary_b
                              ? sim::MakeMatmul(p_.dtype, int(ksz), int(nsz), int(msz), reload)
                              : sim::MakeMatmul(p_.dtype, int(ksz), int(msz), int(nsz), reload);
    mm.partitions = int16_t(CeilDiv(ksz, p_.rows_per_partition));
    return Add(mm, {dep_a, dep_b, dep_slot});
  }

  int64_t Evict(int, EvictKind kind, EngineKind engine, int, int64_t, int64_t msz, int64_t,
                int64_t nsz, int, int64_t dep_mm, int64_t dep_acc, int64_t dep_stage) {
    const int partitions = int(p_.stationary_b ? nsz : msz);
    const int free = int(p_.stationary_b ? msz : nsz);
    const bool add = kind == EvictKind::kAddToAcc || kind == EvictKind::kFinalAdd;
    sim::Instruction inst = sim::MakeEngineOp(add ? Op::kTensorTensor : Op::kTensorCopy, engine,
                                              free, partitions, Mem::kPsum, Mem::kSbuf);
    inst.dtype = DType::kFp32;
    if (add) inst.in1 = Mem::kSbuf;
    return Add(inst, {dep_mm, add ? dep_acc : -1, dep_stage});
  }

  int64_t Store(int, int64_t, int64_t msz, int64_t, int64_t nsz, int, int64_t dep) {
    const int partitions = int(p_.stationary_b ? nsz : msz);
    const int64_t free = p_.stationary_b ? msz : nsz;
    sim::Instruction dma =
        sim::MakeDma(Op::kDmaStore, partitions, free * p_.out_bytes, kQueueStore);
    // C is row-major in HBM: C^T tiles (stationary=b) need a transposing store.
    dma.transpose = p_.stationary_b;
    return Add(dma, {dep});
  }

 private:
  // `deps`: a fixed count of handles (so the loops over them unroll).
  template <size_t N>
  int64_t Add(const sim::Instruction& inst, const int64_t (&deps)[N]) {
    static_assert(N <= 3);
    if (kCompact) {
      for (int64_t h : deps) {
        if (h >= 0) reads_.push_back(h);
      }
    }
    if (kCompact && recording_) {
      Rec& r = rec_.emplace_back();
      r.inst = inst;
      r.pos = pos_;
      for (size_t j = 0; j < N; ++j) r.deps[j] = deps[j];
      r.ndeps = int(N);
      return pos_++;
    }
    int32_t buf[4];
    int n = 0;
    for (int64_t h : deps) {
      if (h < 0) continue;
      buf[n++] = kCompact ? int32_t(pos_ - h) : int32_t(h);
    }
    if (kCompact) {
      core_->AddCompact(inst, std::span<const int32_t>(buf, size_t(n)));
    } else {
      core_->Add(inst, std::span<const int32_t>(buf, size_t(n)));
    }
    return pos_++;
  }

  // Flat instructions a group repeat must save beyond its first three periods (see EmitGroups).
  static constexpr size_t kMinRepeatSaving = 64;

  // A recorded instruction: handles of its dependencies (-1 = none), in call order.
  struct Rec {
    sim::Instruction inst;
    int64_t pos = 0;
    std::array<int64_t, 3> deps{};
    int ndeps = 0;
  };
  // How dependency j of a record relates to the same one a period later: at the same distance,
  // on the same instruction (anchored), or on one `stride` positions later (strided: e.g. the
  // partial sums of an earlier pass with a longer or shorter period).
  enum DepKind : uint8_t { kNone, kRelative, kAnchored, kStrided, kMismatch };
  struct DepRel {
    DepKind kind = kNone;
    int64_t stride = 0;
    bool operator==(const DepRel&) const = default;
  };
  static DepRel Kind(const Rec& a, const Rec& b, int j) {
    const int64_t ha = a.deps[size_t(j)], hb = b.deps[size_t(j)];
    if (ha < 0 || hb < 0) return {ha < 0 && hb < 0 ? kNone : kMismatch, 0};
    if (a.pos - ha == b.pos - hb) return {kRelative, 0};
    if (ha == hb) return {kAnchored, 0};
    return hb > ha ? DepRel{kStrided, hb - ha} : DepRel{kMismatch, 0};
  }
  // Kind(a, b, j) == want, without building the relation (EmitGroups' walk back).
  static bool Matches(const Rec& a, const Rec& b, int j, const DepRel& want) {
    const int64_t ha = a.deps[size_t(j)], hb = b.deps[size_t(j)];
    switch (want.kind) {
      case kNone:
        return ha < 0 && hb < 0;
      case kRelative:
        return ha >= 0 && hb >= 0 && a.pos - ha == b.pos - hb;
      case kAnchored:  // never also relative: a.pos != b.pos
        return ha >= 0 && ha == hb;
      case kStrided:  // stride > 0, so hb > ha >= 0: neither anchored nor, as checked, relative
        return ha >= 0 && hb - ha == want.stride && hb - ha != b.pos - a.pos;
      case kMismatch:
        break;
    }
    return false;
  }
  size_t GroupEnd(size_t g) const { return g + 1 < starts_.size() ? starts_[g + 1] : rec_.size(); }

  // Emits rec_[first, last): deps relative, except those `kinds` marks anchored or strided to
  // `entry`.
  void EmitRecs(size_t first, size_t last, const std::vector<DepRel>* kinds, int64_t entry) {
    for (size_t i = first; i < last; ++i) {
      const Rec& r = rec_[i];
      int32_t buf[3];
      sim::AnchorForm forms[3];
      bool strided = false;
      for (int j = 0; j < r.ndeps; ++j) {
        const int64_t h = r.deps[size_t(j)];
        const DepRel rel = kinds != nullptr ? (*kinds)[(i - first) * 3 + size_t(j)] : DepRel{};
        const bool anchored = rel.kind == kAnchored || rel.kind == kStrided;
        buf[j] = h < 0 ? 0 : anchored ? int32_t(h - entry) : int32_t(r.pos - h);
        forms[j].stride = int32_t(rel.stride);
        strided |= rel.stride != 0;
      }
      core_->AddCompact(r.inst, std::span<const int32_t>(buf, size_t(r.ndeps)),
                        strided ? std::span<const sim::AnchorForm>(forms, size_t(r.ndeps))
                                : std::span<const sim::AnchorForm>());
    }
  }

  // Finds, for periods of 1 to 2 groups, the longest run of groups at the end of the loop in
  // which every group emits what the group one period earlier did, with each dependency either at
  // the same distance or on the same instruction before the run (anchored). Emits the groups
  // before the run as they are and the run as a repeat of its first period.
  void EmitGroups() {
    const size_t groups = starts_.size();
    size_t best_start = groups, best_p = 0, best_len = rec_.size();
    std::vector<DepRel> kinds, best_kinds;
    for (size_t p = 1; p <= 2 && 3 * p <= groups; ++p) {
      // Dependency kinds of the last period, against the period before it.
      const size_t last = groups - p;
      const size_t plen = rec_.size() - starts_[last];
      // The repeat would emit at least one period: no shorter than the best so far, skip it.
      if (plen >= best_len) continue;
      if (starts_[last] - starts_[last - p] != plen) continue;
      kinds.assign(plen * 3, DepRel{});
      bool ok = true;
      for (size_t i = 0; i < plen && ok; ++i) {
        const Rec& a = rec_[starts_[last - p] + i];
        const Rec& b = rec_[starts_[last] + i];
        if (!(a.inst == b.inst) || a.ndeps != b.ndeps) ok = false;
        for (int j = 0; j < a.ndeps && ok; ++j) {
          kinds[i * 3 + size_t(j)] = Kind(a, b, j);
          ok = kinds[i * 3 + size_t(j)].kind != kMismatch;
        }
      }
      if (!ok) continue;
      // Walk back while group g repeats group g + p with the same kinds.
      size_t start = last - p;
      while (start > 0) {
        const size_t g = start - 1, off = starts_[g + p];
        const size_t glen = GroupEnd(g) - starts_[g];
        // Group g's records match those of group last + o of the last period.
        const size_t o = (g % p + p - last % p) % p;
        const size_t at = starts_[last + o] - starts_[last];
        bool same = glen == GroupEnd(g + p) - off;
        for (size_t i = 0; i < glen && same; ++i) {
          const Rec& a = rec_[starts_[g] + i];
          const Rec& b = rec_[off + i];
          same = a.ndeps == b.ndeps && sim::SameOperation(a.inst, b.inst);
          for (int j = 0; j < a.ndeps && same; ++j) {
            same = Matches(a, b, j, kinds[(at + i) * 3 + size_t(j)]);
          }
        }
        if (!same) break;
        start = g;
      }
      // Whole periods ending at the last group; anchored and strided targets must precede the
      // run (a strided one's last, in the last period, is its largest).
      const size_t periods = (groups - start) / p;
      start = groups - periods * p;
      const int64_t entry = rec_[starts_[start]].pos;
      for (size_t i = 0; i < plen && ok; ++i) {
        const Rec& r = rec_[starts_[last] + i];
        for (int j = 0; j < r.ndeps; ++j) {
          const DepKind kind = kinds[i * 3 + size_t(j)].kind;
          if ((kind == kAnchored || kind == kStrided) && r.deps[size_t(j)] >= entry) ok = false;
        }
      }
      // The simulator simulates about three iterations before it recognises a period and then
      // pays for its extrapolation, so a short repeat would cost more than it saves.
      const size_t len = starts_[start] + plen;
      if (ok && periods >= 4 && (periods - 3) * plen >= kMinRepeatSaving && len < best_len) {
        best_start = start, best_p = p, best_len = len;
        best_kinds = kinds;
      }
    }
    if (best_p == 0) {
      EmitRecs(0, rec_.size(), nullptr, 0);
      return;
    }
    const size_t first = starts_[best_start];
    EmitRecs(0, first, nullptr, 0);
    core_->BeginRepeat(int64_t((groups - best_start) / best_p));
    EmitRecs(first, best_len, &best_kinds, rec_[first].pos);
    core_->EndRepeat();
  }

  const Plan& p_;
  const sim::Target& target_;
  sim::Program* program_;
  sim::CoreProgram* core_ = nullptr;
  int64_t pos_ = 0;
  bool recording_ = false;
  std::vector<int64_t> reads_;
  std::vector<Rec> rec_;
  std::vector<size_t> starts_;

  struct Buffers {
    std::vector<int64_t> reads;
    std::vector<Rec> rec;
    std::vector<size_t> starts;
  };
  void SwapThreadBuffers() {
    thread_local Buffers buffers;
    reads_.swap(buffers.reads);
    rec_.swap(buffers.rec);
    starts_.swap(buffers.starts);
  }
};

// Executes schedule steps on the CPU: fp32 PSUM accumulation, fp32 SBUF accumulator, rounded
// output staging, stores into C.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& plan, const std::vector<float>& a, const std::vector<float>& b,
             std::vector<float>* c)
      : p_(plan), a_(a), b_(b), c_(c) {
    stride_ = std::max(p_.tile_n, int64_t(1));
    psum_.assign(std::max(p_.psum_slots, 1), std::vector<float>(p_.tile_m * p_.tile_n, 0));
    stage_.assign(kStagingBufs, std::vector<float>(p_.tile_m * p_.tile_n, 0));
  }

  static constexpr bool kCompress = false;
  void BeginCore(int) {}
  int64_t position() const { return 0; }
  size_t reads() const { return 0; }
  std::span<const int64_t> ReadsSince(size_t, size_t) const { return {}; }
  size_t Cut() { return 0; }
  size_t AnchorReads(size_t, int64_t, std::span<const int64_t>, int64_t, bool) { return 0; }
  void WrapRepeat(size_t, int64_t) {}
  void Advance(int64_t) {}
  void BeginGroups() {}
  void GroupStart() {}
  void EndGroups() {}
  void CopyCore(int) {}  // not called: every core executes (kCompress is false)
  int64_t Load(int, bool, int64_t, int64_t, int64_t, int64_t, int64_t) { return -1; }

  int64_t Matmul(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int64_t k0, int64_t ksz,
                 int slot, bool start, bool, int64_t, int64_t, int64_t) {
    std::vector<float>& acc = psum_[slot];
    if (start) std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i = 0; i < msz; ++i) {
      float* row = &acc[i * stride_];
      for (int64_t kk = 0; kk < ksz; ++kk) {
        const float av = a_[(m0 + i) * p_.k + k0 + kk];
        const float* brow = &b_[(k0 + kk) * p_.n + n0];
        for (int64_t j = 0; j < nsz; ++j) row[j] += av * brow[j];
      }
    }
    return -1;
  }

  int64_t Evict(int, EvictKind kind, EngineKind, int slot, int64_t m0, int64_t msz, int64_t n0,
                int64_t nsz, int stage, int64_t, int64_t, int64_t) {
    const std::vector<float>& ps = psum_[slot];
    std::vector<float>& acc = acc_[{m0, n0}];
    if (acc.empty()) acc.assign(p_.tile_m * p_.tile_n, 0.0f);
    for (int64_t i = 0; i < msz; ++i) {
      for (int64_t j = 0; j < nsz; ++j) {
        const int64_t at = i * stride_ + j;
        switch (kind) {
          case EvictKind::kCopyToAcc:
            acc[at] = ps[at];
            break;
          case EvictKind::kAddToAcc:
            acc[at] += ps[at];
            break;
          case EvictKind::kFinal:
            stage_[stage][at] = RoundToOutput(ps[at], p_.dtype);
            break;
          case EvictKind::kFinalAdd:
            stage_[stage][at] = RoundToOutput(acc[at] + ps[at], p_.dtype);
            break;
        }
      }
    }
    return -1;
  }

  int64_t Store(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int stage, int64_t) {
    for (int64_t i = 0; i < msz; ++i) {
      for (int64_t j = 0; j < nsz; ++j)
        (*c_)[(m0 + i) * p_.n + n0 + j] = stage_[stage][i * stride_ + j];
    }
    return -1;
  }

 private:
  const Plan& p_;
  const std::vector<float>& a_;
  const std::vector<float>& b_;
  std::vector<float>* c_;
  int64_t stride_ = 1;
  std::vector<std::vector<float>> psum_;
  std::vector<std::vector<float>> stage_;
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> acc_;
};

}  // namespace

void SetMatmulFaultForTesting(MatmulFault fault) { g_fault = fault; }
void SetMatmulLoweringForTesting(MatmulLowering lowering) { g_lowering = lowering; }

absl::Status MatmulKernel::ValidateProblem(const Problem& problem,
                                           const sim::Target& target) const {
  for (const auto& [name, value] : problem.dims.items()) {
    if (name != "M" && name != "N" && name != "K") {
      return absl::InvalidArgumentError(StrCat("matmul has dims M, N, K; got unknown dim ", name));
    }
    if (value <= 0) return absl::InvalidArgumentError(StrCat("dim ", name, " must be positive"));
  }
  for (const char* name : {"M", "N", "K"}) {
    if (!problem.dims.Has(name)) {
      return absl::InvalidArgumentError(StrCat("matmul needs dim ", name, " (M, N, K)"));
    }
  }
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok() || (*dtype != DType::kBf16 && *dtype != DType::kFp32 && *dtype != DType::kFp8)) {
    return absl::InvalidArgumentError(
        StrCat("matmul dtype must be bf16, fp32 or fp8, not '", problem.dtype, "'"));
  }
  if (!target.SupportsDType(*dtype)) {
    return absl::InvalidArgumentError(
        StrCat("dtype ", problem.dtype, " is not supported by TensorE on ", target.name));
  }
  return absl::OkStatus();
}

absl::StatusOr<Space> MatmulKernel::SpaceFor(const Problem& problem,
                                             const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  std::vector<std::string> tile_k = {"32", "64", "128"};
  if (target.MaxMatmulK(*sim::ParseDType(problem.dtype)) >= 256) tile_k.push_back("256");
  std::vector<std::string> shards;
  for (int s = 1; s <= target.cores_per_chip; s *= 2) shards.push_back(std::to_string(s));
  std::vector<std::string> blocks = {"1", "2", "4", "8", "16"};
  std::vector<Param> params = {
      {"tile_m", {"32", "64", "128"}, "M rows per hardware tile"},
      {"tile_n", {"64", "128", "256", "512"}, "N columns per hardware tile"},
      {"tile_k", tile_k, "K (contraction) per hardware tile"},
      {"block_m", blocks, "M tiles per block"},
      {"block_n", blocks, "N tiles per block"},
      {"block_k", blocks, "K tiles per block"},
      {"loop_order", {kLoopOrders.begin(), kLoopOrders.end()}, "block loops, outermost first"},
      {"bufs", {"1", "2", "3", "4"}, "rotating SBUF buffers per operand block"},
      {"hoist", {"0", "1"}, "0: reload operands every block iteration; 1: only when they change"},
      {"stationary", {"a", "b"}, "operand held in the systolic array"},
      {"evict", {"vector", "scalar", "split", "gpsimd"}, "engine evicting PSUM"},
      {"shards", shards, "cores the work is split over"},
  };
  Problem p = problem;
  sim::Target t = target;
  return Space(std::move(params), [p, t](const Config& config) -> absl::Status {
    absl::StatusOr<Plan> plan = MakePlan(p, config, t, /*strict=*/true);
    return plan.ok() ? absl::OkStatus() : plan.status();
  });
}

Config MatmulKernel::Default(const Problem&, const sim::Target&) const {
  return Config{{"tile_m", "128"}, {"tile_n", "512"},   {"tile_k", "128"},     {"block_m", "1"},
                {"block_n", "1"},  {"block_k", "1"},    {"loop_order", "mnk"}, {"bufs", "2"},
                {"hoist", "0"},    {"stationary", "a"}, {"evict", "vector"},   {"shards", "1"}};
}

absl::StatusOr<sim::Program> MatmulKernel::Lower(const Problem& problem, const Config& config,
                                                 const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  absl::StatusOr<Plan> plan = MakePlan(problem, config, target, /*strict=*/true);
  if (!plan.ok()) return plan.status();
  sim::Program program;
  program.name =
      StrCat("matmul ", problem.dims.ToString(), " ", problem.dtype, " [", config.ToString(), "]");
  if (target.systolic) {
    program.cores.resize(1);
    program.cores[0].Add(sim::MakeMatmul(plan->dtype, int(plan->k), int(plan->m), int(plan->n)),
                         {});
    return program;
  }
  if (g_lowering == MatmulLowering::kFlat) {
    SimEmitter<false> emitter(*plan, target, &program);
    Generate(*plan, emitter);
  } else {
    SimEmitter<true> emitter(*plan, target, &program);
    Generate(*plan, emitter);
  }
  return program;
}

absl::Status MatmulKernel::Verify(const Problem& problem, const Config& config,
                                  const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  absl::StatusOr<Plan> full = MakePlan(problem, config, target, /*strict=*/true);
  if (!full.ok()) return full.status();
  if (target.systolic) {
    // The systolic family runs one GEMM; verify the plain tiling with hardware-sized tiles.
    full->tile_m = 128, full->tile_n = 512, full->tile_k = 128;
    full->psum_slots = 8, full->full_k = true, full->evict = "vector";
  }
  Problem reduced = problem;
  reduced.dims = Dims{{"M", ReducedDim(full->m, full->tile_m, 2)},
                      {"N", ReducedDim(full->n, full->tile_n, 2)},
                      {"K", ReducedDim(full->k, full->tile_k, 3)}};
  Plan plan = *full;
  plan.m = *reduced.dims.Get("M");
  plan.n = *reduced.dims.Get("N");
  plan.k = *reduced.dims.Get("K");
  plan.tiles_m = CeilDiv(plan.m, plan.tile_m);
  plan.tiles_n = CeilDiv(plan.n, plan.tile_n);
  plan.tiles_k = CeilDiv(plan.k, plan.tile_k);
  plan.blocks_m = CeilDiv(plan.tiles_m, plan.block_m);
  plan.blocks_n = CeilDiv(plan.tiles_n, plan.block_n);
  plan.blocks_k = CeilDiv(plan.tiles_k, plan.block_k);
  if (plan.blocks_m >= plan.shards) {
    plan.split_m = true;
  } else if (plan.blocks_n >= plan.shards) {
    plan.split_m = false;
  } else {
    plan.split_m = plan.blocks_m >= plan.blocks_n;
    plan.shards = int(std::max(plan.blocks_m, plan.blocks_n));
  }
  if (!target.systolic) {
    plan.full_k = plan.order[2] == 'k' && plan.block_m * plan.block_n <= plan.psum_slots;
  }

  // Inputs in [-1, 1), rounded to the input dtype, seeded by the config so reruns agree.
  std::mt19937_64 rng(std::hash<std::string>()(config.ToString()) ^ uint64_t(plan.m * 31 + plan.n));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(plan.m * plan.k), b(plan.k * plan.n);
  for (float& x : a) x = RoundToDType(uniform(rng), plan.dtype);
  for (float& x : b) x = RoundToDType(uniform(rng), plan.dtype);
  std::vector<float> c(plan.m * plan.n, std::numeric_limits<float>::quiet_NaN());
  CpuEmitter emitter(plan, a, b, &c);
  Generate(plan, emitter);

  // Plain reference in double; tolerance = output rounding + fp32 accumulation error.
  const double out_eps = plan.dtype == DType::kFp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  const double acc_eps = 4.0 * double(plan.k) * std::ldexp(1.0, -24);
  std::vector<double> ref_row(plan.n), abs_row(plan.n);
  for (int64_t i = 0; i < plan.m; ++i) {
    std::fill(ref_row.begin(), ref_row.end(), 0.0);
    std::fill(abs_row.begin(), abs_row.end(), 0.0);
    for (int64_t kk = 0; kk < plan.k; ++kk) {
      const double av = a[i * plan.k + kk];
      for (int64_t j = 0; j < plan.n; ++j) {
        double prod = av * b[kk * plan.n + j];
        ref_row[j] += prod;
        abs_row[j] += std::abs(prod);
      }
    }
    for (int64_t j = 0; j < plan.n; ++j) {
      const double got = c[i * plan.n + j];
      const double tol = out_eps * std::abs(ref_row[j]) + acc_eps * abs_row[j] + 1e-30;
      if (!(std::abs(got - ref_row[j]) <= tol)) {
        return absl::DataLossError(StrCat("matmul wrong answer at C[", i, ",", j,
                                          "] of the reduced problem ", reduced.dims.ToString(),
                                          ": got ", got, ", want ", ref_row[j], " (tolerance ", tol,
                                          ")"));
      }
    }
  }
  return absl::OkStatus();
}

Kernel::Work MatmulKernel::MinimumWork(const Problem& problem) const {
  const double m = double(problem.dims.Get("M").value_or(0));
  const double n = double(problem.dims.Get("N").value_or(0));
  const double k = double(problem.dims.Get("K").value_or(0));
  auto dtype = sim::ParseDType(problem.dtype);
  const double bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  return Work{2 * m * n * k, (m * k + k * n + m * n) * bytes};
}

}  // namespace tessel::kernels

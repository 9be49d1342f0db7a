#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <random>
#include <utility>

#include "kernels/lowering/verify_util.h"
#include "kernels/matmul_estimate.h"
#include "kernels/matmul_plan.h"
#include "kernels/schedule_util.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/compact.h"

namespace tessel::kernels {
namespace {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

// Flat instructions an output-tile loop's repeat must save beyond its first three periods: the
// simulator simulates about three iterations before it recognises a period and then pays for its
// extrapolation, so a short repeat would cost more than it saves.
constexpr int64_t kMinTileRepeatSaving = 64;

MatmulFault g_fault = MatmulFault::kNone;
MatmulLowering g_lowering = MatmulLowering::kCompact;

using matmul_internal::kLoopOrders;
using matmul_internal::MakePlan;
using matmul_internal::Plan;

enum class EvictKind { kCopyToAcc, kAddToAcc, kFinal, kFinalAdd };

// Walks the plan's schedule in program order and tells `e` each step. Shared by the lowering
// (which turns steps into sim instructions) and the CPU execution in Verify, so both run the same
// tile boundaries, tails and accumulation order. Handles returned by the emitter name emitted
// instructions (-1 = none) and are passed back as dependencies.
//
// With kCompress (the compact lowering), each loop (the three block loops and each block's
// output-tile loop, levels 0-3) is emitted as runs of iterations; inside a run of "regular"
// iterations (same tile sizes, same first/last-K role, same stationary reloads) the generator
// state is compared, relative to the current position, at every iteration boundary. When it
// equals the state one or two iterations earlier, every later iteration of the run emits the
// same instructions with the same relative dependencies (reads of results from before the period
// anchored, or strided, to its start), so the emitted period is wrapped in a repeat and the
// generator state is advanced without emitting the rest. A sim::LoopCompressor per level does
// this (sim/compact.h); the generator tells it its state (Canon) and how it moves (Advance).
template <typename Emitter, bool kCompress>
class Generator {
 public:
  // The state and scratch of the thread's previous generator are taken over (their contents are
  // reset before use), so their capacity is reused; handed back when done.
  Generator(const Plan& p, Emitter& e) : p_(p), e_(e) { SwapThreadScratch(); }
  ~Generator() { SwapThreadScratch(); }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

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
      if constexpr (kCompress) {
        if (core > 0 && hi - lo == lo - prev_lo &&
            (hi < split_blocks || !ragged_[p_.split_m ? 0 : 1])) {
          e_.CopyCore(core);
          continue;
        }
      }
      e_.BeginCore(core);
      s_.Reset();
      s_.a_loads.resize(size_t(p_.bufs));
      s_.b_loads.resize(size_t(p_.bufs));
      for (auto& loads : s_.a_loads) loads.clear();
      for (auto& loads : s_.b_loads) loads.clear();
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
    std::array<int64_t, kGemmStagingBufs> stage_reader;
    // Accumulator writers in the order they are read again (the loop compressor moves it past
    // skipped periods).
    sim::HandleFifo acc;
    std::pair<int64_t, int64_t> a_key{-1, -1}, b_key{-1, -1}, last_stationary{-1, -1};

    // The state before a core's first block, keeping the vectors' capacity (Run resizes them).
    void Reset() {
      a_count = b_count = psum_count = stage_count = evict_count = 0;
      a_cur = b_cur = 0;
      acc.Clear();
      a_key = b_key = last_stationary = {-1, -1};
    }
  };

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
    if (l == 3) return RegularGroup(i);
    const int d = d_[l];
    if (d == 2) return i != 0 && i != nblocks_[d] - 1;  // first and last K blocks differ
    return i != nblocks_[d] - 1 || !ragged_[d];
  }

  // Runs iteration i of level l: a block loop's (0-2) or the output-tile loop's (3).
  void Iterate(int l, int64_t i) {
    if (l == 3) {
      Group(i);
      return;
    }
    idx_[d_[l]] = i;
    if (l == 2) {
      Block();
    } else {
      Level(l + 1);
    }
  }

  // The iterations of level l: the current core's blocks of its dimension, or the current
  // block's output tiles (l = 3).
  int64_t LevelBegin(int l) const { return l == 3 ? 0 : begin_[d_[l]]; }
  int64_t LevelEnd(int l) const { return l == 3 ? blk_.rows * blk_.cols : end_[d_[l]]; }

  void Level(int l) {
    int64_t i = LevelBegin(l);
    const int64_t end = LevelEnd(l);
    while (i < end) {
      if constexpr (kCompress) {
        if (Regular(l, i)) {
          // A run of regular iterations [i, run_end).
          int64_t run_end = i;
          while (run_end < end && Regular(l, run_end)) ++run_end;
          i = Run(l, i, run_end);
          continue;
        }
      }
      Iterate(l, i);
      ++i;
    }
  }

  // Loop level l as the loop compressor sees it (sim/compact.h).
  struct LevelBody {
    Generator& g;
    int l;
    void Iterate(int64_t i) { g.Iterate(l, i); }
    void Snapshot(int64_t i, sim::LoopState* state) {
      if (l < 3) g.idx_[g.d_[l]] = i;
      g.Canon(l, state->pos, &state->canon, &state->abs);
      const State& s = g.s_;
      state->saved.assign({s.a_count, s.b_count, s.psum_count, s.stage_count, s.evict_count});
    }
    void Skip(const sim::SkippedPeriods& skip) { g.Advance(skip, l); }
    sim::HandleFifo* fifo() { return &g.s_.acc; }
  };

  // Emits iterations [first, last) of level l (all regular), compressing periods; returns last.
  int64_t Run(int l, int64_t first, int64_t last) {
    // Too few output tiles to repay a repeat (see below), or inner loops left flat so the middle
    // loop can be compressed (InnerFlat): emit them as they are.
    if ((l == 3 && (last - first < 4 ||
                    (last - first - 3) * (blk_.tk_hi - blk_.tk_lo + 1) < kMinTileRepeatSaving)) ||
        (l >= 2 && InnerFlat())) {
      for (int64_t i = first; i < last; ++i) Iterate(l, i);
      return last;
    }
    // A tile loop's repeat must save more than the simulator spends finding its period (about
    // three iterations) and extrapolating it; an output tile pops at most one accumulator entry;
    // the tile loops' skipped reads are logged, so a block loop's repeat can anchor them.
    sim::RunOptions options;
    if (l == 3) {
      options.min_saving = kMinTileRepeatSaving;
      options.fifo_pops_per_iteration = 1;
      options.log_skipped_reads = true;
    }
    LevelBody body{*this, l};
    return loops_[size_t(l)].Run(e_.writer(), body, first, last, options);
  }

  // With K the outermost block loop, every K block after the first adds to partial sums that the
  // previous one wrote, in another loop with another period: its reads advance by a stride per
  // iteration of the middle loop, which a repeat can express only for reads outside nested
  // repeats (sim/compact.h). There, when the middle loop has at least as many iterations as the
  // inner one (and enough to repeat), the inner loops are emitted flat and the middle loop is
  // compressed. The fast path simulates about three iterations of a repeat before extrapolating
  // it, so that costs about 3 x inner iterations where compressing each inner loop costs about
  // middle x 3: worth it when middle >= inner. (4096^3 bf16, kmn, 64 M blocks per core of 4 N
  // blocks: 14.9 ms per evaluation before, 0.39 ms after at K = 2048; BENCHMARKS.md, Simulator.)
  bool InnerFlat() const {
    if (d_[0] != 2 || idx_[2] == 0) return false;
    const int64_t middle = end_[d_[1]] - begin_[d_[1]], inner = end_[d_[2]] - begin_[d_[2]];
    return middle >= 4 && middle >= inner;
  }

  // The generator state relative to the current position and loop indices. In the output-tile
  // loop (l = 3, never with full_k) two parts are left out: group_slot, which only full_k
  // reads, and the last stationary tile, which is then the previous tile's (RegularGroup).
  void Canon(int l, int64_t pos, std::vector<int64_t>* out, std::vector<int64_t>* abs) {
    // Sized first, then filled by index (Run calls this at every iteration boundary).
    const bool tiles = l == 3;
    size_t n = size_t(p_.psum_slots) + (tiles ? 0 : s_.group_slot.size()) + kGemmStagingBufs +
               (tiles ? 5 : 7);
    if (tiles) {  // the tiles read and write the current buffers only
      n += 4 + s_.a_loads[size_t(s_.a_cur)].size() + s_.b_loads[size_t(s_.b_cur)].size();
    } else {
      for (int which = 0; which < 2; ++which) {
        for (const auto& loads : which == 0 ? s_.a_loads : s_.b_loads) n += 2 + loads.size();
      }
    }
    out->resize(n);
    abs->assign(n, -1);
    int64_t* o = out->data();
    int64_t* a = abs->data();
    size_t k = 0;
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
      if (tiles) {
        const int b = which == 0 ? s_.a_cur : s_.b_cur;
        handle(reader[size_t(b)]);
        value(int64_t(loads[size_t(b)].size()));
        for (int64_t h : loads[size_t(b)]) handle(h);
        continue;
      }
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
    for (size_t g = 0; g < (tiles ? 0 : s_.group_slot.size()); ++g) {
      value(((s_.group_slot[g] - s_.psum_count) % p_.psum_slots + p_.psum_slots) % p_.psum_slots);
    }
    for (int j = 0; j < kGemmStagingBufs; ++j) {
      handle(s_.stage_reader[(s_.stage_count + j) % kGemmStagingBufs]);
    }
    value(p_.evict == "split" ? s_.evict_count % 2 : 0);
    // Keys relative to the first block of the coming iteration (inner loops at their begin).
    std::array<int64_t, 3> next = idx_;
    for (int ll = l + 1; ll < 3; ++ll) next[d_[ll]] = begin_[d_[ll]];
    value(s_.a_key.first - next[0]);
    value(s_.a_key.second - next[2]);
    value(s_.b_key.first - next[2]);
    value(s_.b_key.second - next[1]);
    if (!tiles) {
      value(s_.last_stationary.first - next[2] * p_.block_k);
      value(s_.last_stationary.second -
            (p_.stationary_b ? next[1] * p_.block_n : next[0] * p_.block_m));
    }
    assert(k == n);
  }

  // Moves the state past `skip.periods` periods of skip.p iterations of level l, from iteration
  // skip.at: it moves as it did over the period, once per period (the accumulator FIFO is moved by
  // the loop compressor).
  void Advance(const sim::SkippedPeriods& skip, int l) {
    const int64_t periods = skip.periods, at = skip.at;
    const int p = skip.p;
    auto sh = [&](int64_t& h, bool still) { skip.Move(h, still); };
    const std::vector<int64_t>& then = skip.then->saved;  // the counters at the period's start
    State& n = s_;                                        // updated in place
    // Moves every entry of `arr` (`fix`), then rotates it by `per` positions per period.
    auto rotate = [&](auto& arr, int64_t per, auto fix) {
      const int64_t size = int64_t(arr.size());
      const bool still = per % size == 0;
      for (auto& x : arr) fix(x, still);
      const int64_t delta = ((per * periods) % size + size) % size;  // entry j moves to j + delta
      std::rotate(arr.begin(), arr.end() - delta, arr.end());
    };
    const int64_t pa = n.a_count - then[0], pb = n.b_count - then[1];
    const int64_t pp = n.psum_count - then[2], ps = n.stage_count - then[3];
    const int64_t dp = pp * periods, psum_before = n.psum_count;
    n.a_count += pa * periods;
    n.b_count += pb * periods;
    n.psum_count += dp;
    n.stage_count += ps * periods;
    n.evict_count += (n.evict_count - then[4]) * periods;
    rotate(n.a_reader, pa, sh);
    rotate(n.b_reader, pb, sh);
    auto shv = [&](std::vector<int64_t>& v, bool still) {
      for (int64_t& h : v) sh(h, still);
    };
    rotate(n.a_loads, pa, shv);
    rotate(n.b_loads, pb, shv);
    rotate(n.slot_reader, pp, sh);
    rotate(n.stage_reader, ps, sh);
    if (l < 3) {
      for (int& g : n.group_slot)
        g = int(((g + dp) % p_.psum_slots + p_.psum_slots) % p_.psum_slots);
    } else {  // each skipped tile takes the next slot (full_k is off)
      for (int64_t g = at; g < at + periods * p; ++g) {
        n.group_slot[size_t(Local(g))] = int((psum_before + (g - at)) % p_.psum_slots);
      }
    }
    n.a_cur = int(((n.a_count - 1) % p_.bufs + p_.bufs) % p_.bufs);
    n.b_cur = int(((n.b_count - 1) % p_.bufs + p_.bufs) % p_.bufs);
    // Keys: the level's index moved by periods * p iterations.
    const int64_t steps = periods * int64_t(p);
    const int d = l < 3 ? d_[l] : -1;
    if (l == 3) {  // the last skipped tile's stationary tile
      n.last_stationary = {blk_.tk_hi - 1, StationaryKey(at + steps - 1)};
    } else if (d == 0) {
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

    // Loads the block's K tiles of an operand (A rows or B columns [x0, x1)) into its next buffer,
    // unless hoisting keeps the block it already holds (`held` == `key`).
    auto load_block = [&](bool is_a, std::pair<int64_t, int64_t> key,
                          std::pair<int64_t, int64_t>& held, int64_t& count, int& cur,
                          std::vector<std::vector<int64_t>>& loads,
                          const std::vector<int64_t>& reader, int64_t x0, int64_t x1) {
      if (p.hoist != 0 && held == key) return;
      held = key;
      cur = int(count++ % p.bufs);
      loads[cur].clear();
      for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
        loads[cur].push_back(e_.Load(core, is_a, tk * p.tile_k, SizeOf(tk, p.tile_k, p.k), x0,
                                     x1 - x0, reader[cur]));
      }
    };
    load_block(true, {bm, bk}, s.a_key, s.a_count, s.a_cur, s.a_loads, s.a_reader, m0, m1);
    load_block(false, {bk, bn}, s.b_key, s.b_count, s.b_cur, s.b_loads, s.b_reader, n0, n1);

    // The output tiles ("groups"), row by row; a run of regular ones compresses like the block
    // loops (level 3).
    blk_ = {tm_lo, tn_lo, tm_hi - tm_lo, tn_hi - tn_lo, tk_lo, tk_hi, bk};
    Level(3);
  }

  // The current block's output tiles: tile g is (tm_lo + g / cols, tn_lo + g % cols).
  struct BlockTiles {
    int64_t tm_lo = 0, tn_lo = 0, rows = 0, cols = 1, tk_lo = 0, tk_hi = 0, bk = 0;
  };
  int64_t TileM(int64_t g) const { return blk_.tm_lo + g / blk_.cols; }
  int64_t TileN(int64_t g) const { return blk_.tn_lo + g % blk_.cols; }
  int Local(int64_t g) const { return int(g / blk_.cols * p_.block_n + g % blk_.cols); }
  // The key of tile g's stationary tiles (with the K tile).
  int64_t StationaryKey(int64_t g) const { return p_.stationary_b ? TileN(g) : TileM(g); }

  // Whether output tile g of the block emits like its regular neighbours: full size, not the
  // first (whose first matmul reloads or not by the previous block's last), and with the same
  // stationary reloads as the tile before it. Every matmul reloads when a block has several K
  // tiles; with one, a tile's reloads when its key differs from the previous tile's, which for
  // stationary=a (key tm) happens at a row's start only. Never with full_k, whose tiles keep
  // their PSUM slots across K blocks (group_slot).
  bool RegularGroup(int64_t g) const {
    if (p_.full_k || g == 0) return false;
    if (SizeOf(TileM(g), p_.tile_m, p_.m) != p_.tile_m || NSize(TileN(g)) != p_.tile_n) {
      return false;
    }
    const bool single_k = blk_.tk_hi - blk_.tk_lo == 1;
    return !(single_k && !p_.stationary_b && g % blk_.cols == 0);
  }

  void Group(int64_t g) {
    const Plan& p = p_;
    State& s = s_;
    const int core = core_;
    const int64_t tm = TileM(g), tn = TileN(g), tk_lo = blk_.tk_lo, tk_hi = blk_.tk_hi;
    const int64_t bk = blk_.bk;
    const int64_t om0 = tm * p.tile_m, omsz = SizeOf(tm, p.tile_m, p.m);
    const int64_t on0 = tn * p.tile_n, onsz = NSize(tn);
    const int local = Local(g);
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
    if (p.full_k && !last_kblock) return;
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
    if (add && !s.acc.empty()) acc_dep = s.acc.Pop();
    const int stage = int(s.stage_count % kGemmStagingBufs);
    int64_t ev = e_.Evict(core, kind, engine, slot, om0, omsz, on0, onsz, stage, last_mm, acc_dep,
                          final ? s.stage_reader[stage] : -1);
    s.slot_reader[slot] = ev;
    if (!final) {
      s.acc.Push(ev);
      return;
    }
    ++s.stage_count;
    s.stage_reader[stage] = e_.Store(core, om0, omsz, on0, onsz, stage, ev);
  }

  const Plan& p_;
  Emitter& e_;
  int64_t tiles_k_ = 0, blocks_k_ = 0;
  std::array<int, 3> d_{};
  std::array<int64_t, 3> nblocks_{}, begin_{}, end_{}, idx_{};
  std::array<bool, 2> ragged_{};
  int core_ = 0;
  State s_;
  BlockTiles blk_;
  std::array<sim::LoopCompressor, 4> loops_;  // per loop level (the three block loops, the tiles)

  void SwapThreadScratch() {
    struct Scratch {
      State s;
      std::array<sim::LoopCompressor, 4> loops;
    };
    thread_local Scratch scratch;
    std::swap(s_, scratch.s);
    std::swap(loops_, scratch.loops);
  }
};

template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  Generator<Emitter, Emitter::kCompress> g(p, e);
  g.Run();
}

// Turns schedule steps into simulator instructions: a flat program (kCompact = false) or a
// loop-structured one, through a sim::StreamWriter (handles are flat positions).
template <bool kCompact>
class SimEmitter {
 public:
  static constexpr bool kCompress = kCompact;
  SimEmitter(const Plan& plan, const sim::Target& target, sim::Program* program)
      : p_(plan), target_(target), program_(program) {}

  // Core `core` runs the same program as core - 1.
  void CopyCore(int) { program_->RepeatPrevious(); }

  void BeginCore(int core) {
    sim::CoreProgram* c = &program_->Core(size_t(core));
    writer_.Begin(c, kCompact);
    // Room for a typical core, so the program grows without copying itself several times.
    c->instructions.reserve(kCompact ? 1024 : 4096);
    c->deps.reserve(kCompact ? 2048 : 8192);
    if (kCompact) c->segments.reserve(128);
    const int in_partitions = int(std::min<int64_t>(p_.tile_k, target_.sbuf_partitions));
    const int64_t out_part = p_.stationary_b ? p_.tile_n : p_.tile_m;
    const int out_partitions = int(std::min<int64_t>(out_part, target_.sbuf_partitions));
    const int64_t out_free = p_.stationary_b ? p_.tile_m : p_.tile_n;
    c->allocations.push_back({"a_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_a, p_.bufs});
    c->allocations.push_back({"b_blocks", Mem::kSbuf, 0, in_partitions, p_.sbuf_b, p_.bufs});
    if (p_.sbuf_acc > 0) {
      c->allocations.push_back({"c_accumulator", Mem::kSbuf, 0, out_partitions, p_.sbuf_acc, 1});
    }
    c->allocations.push_back(
        {"c_staging", Mem::kSbuf, 0, out_partitions, p_.sbuf_stage, kGemmStagingBufs});
    c->allocations.push_back({"psum", Mem::kPsum, 0, out_partitions, out_free * 4, p_.psum_slots});
  }

  sim::StreamWriter& writer() { return writer_; }

  int64_t Load(int, bool is_a, int64_t, int64_t ksz, int64_t, int64_t xsz, int64_t dep) {
    const int rows = p_.rows_per_partition;
    sim::Instruction dma = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(ksz, rows)),
                                        xsz * p_.in_bytes * rows, is_a ? kGemmQueueA : kGemmQueueB);
    dma.chunk_bytes = int32_t(xsz * p_.in_bytes);
    return writer_.Add(dma, {dep});
  }

  int64_t Matmul(int, int64_t, int64_t msz, int64_t, int64_t nsz, int64_t, int64_t ksz, int, bool,
                 bool reload, int64_t dep_a, int64_t dep_b, int64_t dep_slot) {
    sim::Instruction mm = p_.stationary_b
                              ? sim::MakeMatmul(p_.dtype, int(ksz), int(nsz), int(msz), reload)
                              : sim::MakeMatmul(p_.dtype, int(ksz), int(msz), int(nsz), reload);
    mm.partitions = int16_t(CeilDiv(ksz, p_.rows_per_partition));
    return writer_.Add(mm, {dep_a, dep_b, dep_slot});
  }

  int64_t Evict(int, EvictKind kind, EngineKind engine, int, int64_t, int64_t msz, int64_t,
                int64_t nsz, int, int64_t dep_mm, int64_t dep_acc, int64_t dep_stage) {
    const int partitions = int(p_.stationary_b ? nsz : msz);
    const int free = int(p_.stationary_b ? msz : nsz);
    const bool add = kind == EvictKind::kAddToAcc || kind == EvictKind::kFinalAdd;
    sim::Instruction inst = sim::MakeEngineOp(add ? Op::kTensorTensor : Op::kTensorCopy, engine,
                                              free, partitions, Mem::kPsum, Mem::kSbuf);
    // Reads fp32 PSUM; writes the accumulator or the staging buffer, both in the output dtype
    // (the cost of a PSUM-sourced op does not depend on it).
    inst.dtype = p_.dtype == DType::kFp32 ? DType::kFp32 : DType::kBf16;
    if (add) inst.in1 = Mem::kSbuf;
    return writer_.Add(inst, {dep_mm, add ? dep_acc : -1, dep_stage});
  }

  int64_t Store(int, int64_t, int64_t msz, int64_t, int64_t nsz, int, int64_t dep) {
    return writer_.Add(matmul_internal::TileStore(p_, msz, nsz), {dep});
  }

 private:
  const Plan& p_;
  const sim::Target& target_;
  sim::Program* program_;
  sim::StreamWriter writer_;
};

// Executes schedule steps on the CPU: fp32 PSUM accumulation, an SBUF accumulator in the output
// dtype (each partial sum rounded to it), rounded output staging, stores into C.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& plan, const std::vector<float>& a, const std::vector<float>& b,
             std::vector<float>* c)
      : p_(plan), gemm_(plan, plan, plan.psum_slots, a, b, c) {}

  static constexpr bool kCompress = false;
  void BeginCore(int) {}
  int64_t Load(int, bool, int64_t, int64_t, int64_t, int64_t, int64_t) { return -1; }

  int64_t Matmul(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int64_t k0, int64_t ksz,
                 int slot, bool start, bool, int64_t, int64_t, int64_t) {
    gemm_.Matmul(slot, start, /*batch=*/0, m0, msz, n0, nsz, k0, ksz);
    return -1;
  }

  int64_t Evict(int, EvictKind kind, EngineKind, int slot, int64_t m0, int64_t msz, int64_t n0,
                int64_t nsz, int stage, int64_t, int64_t, int64_t) {
    const std::vector<float>& ps = gemm_.psum(slot);
    std::vector<float>& staged = gemm_.stage(stage);
    std::vector<float>& acc = acc_[{m0, n0}];
    if (acc.empty()) acc.assign(p_.tile_m * p_.tile_n, 0.0f);
    for (int64_t i = 0; i < msz; ++i) {
      for (int64_t j = 0; j < nsz; ++j) {
        const int64_t at = i * gemm_.stride() + j;
        switch (kind) {
          case EvictKind::kCopyToAcc:
            acc[at] = RoundToOutput(ps[at], p_.dtype);
            break;
          case EvictKind::kAddToAcc:
            acc[at] = RoundToOutput(acc[at] + ps[at], p_.dtype);
            break;
          case EvictKind::kFinal:
            staged[at] = RoundToOutput(ps[at], p_.dtype);
            break;
          case EvictKind::kFinalAdd:
            staged[at] = RoundToOutput(acc[at] + ps[at], p_.dtype);
            break;
        }
      }
    }
    return -1;
  }

  int64_t Store(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int stage, int64_t) {
    gemm_.Store(stage, /*batch=*/0, m0, msz, n0, nsz);
    return -1;
  }

 private:
  const Plan& p_;
  CpuGemm gemm_;
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> acc_;
};

}  // namespace

void SetMatmulFaultForTesting(MatmulFault fault) { g_fault = fault; }
void SetMatmulLoweringForTesting(MatmulLowering lowering) { g_lowering = lowering; }

absl::Status MatmulKernel::ValidateProblem(const Problem& problem,
                                           const sim::Target& target) const {
  TESSEL_RETURN_IF_ERROR(CheckProblem(name(), dims(), dtypes(), problem, target));
  // Every dtype (not only fp8) must be one TensorE runs on the target.
  if (!target.SupportsDType(*sim::ParseDType(problem.dtype))) {
    return absl::InvalidArgumentError(
        StrCat("dtype ", problem.dtype, " is not supported by TensorE on ", target.name));
  }
  return absl::OkStatus();
}

absl::StatusOr<Space> MatmulKernel::SpaceFor(const Problem& problem,
                                             const sim::Target& target) const {
  TESSEL_RETURN_IF_ERROR(ValidateProblem(problem, target));
  std::vector<std::string> shards;
  for (int s = 1; s <= target.cores_per_chip; s *= 2) shards.push_back(std::to_string(s));
  std::vector<std::string> blocks = {"1", "2", "4", "8", "16"};
  std::vector<Param> params = GemmTileParams(problem, target);
  params.insert(
      params.end(),
      {
          {"block_m", blocks, "M tiles per block"},
          {"block_n", blocks, "N tiles per block"},
          {"block_k", blocks, "K tiles per block"},
          {"loop_order", {kLoopOrders.begin(), kLoopOrders.end()}, "block loops, outermost first"},
          {"bufs", {"1", "2", "3", "4"}, "rotating SBUF buffers per operand block"},
          {"hoist",
           {"0", "1"},
           "0: reload operands every block iteration; 1: only when they change"},
          StationaryParam(),
          EvictParam(),
          {"shards", shards, "cores the work is split over"},
      });
  Problem p = problem;
  sim::Target t = target;
  Space space(std::move(params), [p, t](const Config& config) -> absl::Status {
    absl::StatusOr<Plan> plan = MakePlan(p, config, t, /*strict=*/true);
    return plan.ok() ? absl::OkStatus() : plan.status();
  });
  space.set_estimate(MatmulEstimator(problem, target));
  return space;
}

Config MatmulKernel::Default(const Problem&, const sim::Target&) const {
  return Config{{"tile_m", "128"}, {"tile_n", "512"},   {"tile_k", "128"},     {"block_m", "1"},
                {"block_n", "1"},  {"block_k", "1"},    {"loop_order", "mnk"}, {"bufs", "2"},
                {"hoist", "0"},    {"stationary", "a"}, {"evict", "vector"},   {"shards", "1"}};
}

absl::StatusOr<sim::Program> MatmulKernel::Lower(const Problem& problem, const Config& config,
                                                 const sim::Target& target) const {
  TESSEL_RETURN_IF_ERROR(ValidateProblem(problem, target));
  TESSEL_ASSIGN_OR_RETURN(const Plan plan, MakePlan(problem, config, target, /*strict=*/true));
  sim::Program program;
  program.name =
      StrCat("matmul ", problem.dims.ToString(), " ", problem.dtype, " [", config.ToString(), "]");
  if (target.systolic) {
    program.cores.resize(1);
    program.cores[0].Add(sim::MakeMatmul(plan.dtype, int(plan.k), int(plan.m), int(plan.n)), {});
    return program;
  }
  if (g_lowering == MatmulLowering::kFlat) {
    SimEmitter<false> emitter(plan, target, &program);
    Generate(plan, emitter);
  } else {
    SimEmitter<true> emitter(plan, target, &program);
    Generate(plan, emitter);
  }
  return program;
}

absl::Status MatmulKernel::Verify(const Problem& problem, const Config& config,
                                  const sim::Target& target) const {
  TESSEL_RETURN_IF_ERROR(ValidateProblem(problem, target));
  TESSEL_ASSIGN_OR_RETURN(Plan full, MakePlan(problem, config, target, /*strict=*/true));
  if (target.systolic) {
    // The systolic family runs one GEMM; verify the plain tiling with hardware-sized tiles.
    full.tile_m = 128, full.tile_n = 512, full.tile_k = 128;
    full.psum_slots = 8, full.full_k = true, full.evict = "vector";
  }
  Problem reduced = problem;
  reduced.dims = Dims{{"M", ReducedDim(full.m, full.tile_m, 2)},
                      {"N", ReducedDim(full.n, full.tile_n, 2)},
                      {"K", ReducedDim(full.k, full.tile_k, 3)}};
  Plan plan = full;
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
  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.m * 31 + plan.n));
  // With an SBUF accumulator, every K block but the last leaves a partial sum rounded to the
  // output dtype.
  const bool sbuf_accumulates = !plan.full_k && plan.blocks_k > 1;
  const int acc_roundings = sbuf_accumulates ? int(plan.blocks_k - 1) : 0;
  return VerifyGemm(
      "matmul", reduced.dims.ToString(), plan, /*batches=*/1, /*batched=*/false, rng,
      [&](const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* c) {
        CpuEmitter emitter(plan, a, b, c);
        Generate(plan, emitter);
      },
      acc_roundings);
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

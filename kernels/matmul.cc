#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <utility>

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

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::StatusOr<int64_t> GetInt(const Config& config, std::string_view name) {
  return config.GetInt(name);
}

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBf16;
  int in_bytes = 2, out_bytes = 2;
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t block_m = 1, block_n = 1, block_k = 1;
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

int OutBytes(DType dtype) { return dtype == DType::kFp32 ? 4 : 2; }

// Builds the plan. `strict` adds the rules that only prune redundant configs (blocking factors
// larger than needed, more shards than blocks); Verify's reduced problem turns them off.
absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  p.m = *problem.dims.Get("M");
  p.n = *problem.dims.Get("N");
  p.k = *problem.dims.Get("K");
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  p.dtype = *dtype;
  p.in_bytes = sim::DTypeBytes(p.dtype);
  p.out_bytes = OutBytes(p.dtype);
  struct IntParam {
    const char* name;
    int64_t* out;
  };
  int64_t bufs = 0, hoist = 0, shards = 0;
  for (IntParam ip : {IntParam{"tile_m", &p.tile_m},
                      {"tile_n", &p.tile_n},
                      {"tile_k", &p.tile_k},
                      {"block_m", &p.block_m},
                      {"block_n", &p.block_n},
                      {"block_k", &p.block_k},
                      {"bufs", &bufs},
                      {"hoist", &hoist},
                      {"shards", &shards}}) {
    absl::StatusOr<int64_t> v = GetInt(config, ip.name);
    if (!v.ok()) return v.status();
    if (*v < (std::string_view(ip.name) == "hoist" ? 0 : 1)) {
      return absl::InvalidArgumentError(StrCat(ip.name, "=", *v, " is out of range"));
    }
    *ip.out = *v;
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
  const int max_k = target.MaxMatmulK(p.dtype);
  if (max_k > 0 && p.tile_k > max_k) {
    return absl::InvalidArgumentError(StrCat("tile_k=", p.tile_k,
                                             " exceeds the TensorE contraction limit K <= ", max_k,
                                             " for ", problem.dtype, " on ", target.name));
  }
  const int64_t stationary_free = p.stationary_b ? p.tile_n : p.tile_m;
  const int64_t moving_free = p.stationary_b ? p.tile_m : p.tile_n;
  if (target.matmul_max_m > 0 && stationary_free > target.matmul_max_m) {
    return absl::InvalidArgumentError(
        StrCat("stationary=", p.stationary_b ? "b: tile_n=" : "a: tile_m=", stationary_free,
               " is the stationary free size and exceeds the TensorE limit ", target.matmul_max_m));
  }
  if (target.matmul_max_n > 0 && moving_free > target.matmul_max_n) {
    return absl::InvalidArgumentError(StrCat("moving free size ", moving_free,
                                             " exceeds the TensorE limit ", target.matmul_max_n));
  }
  if (moving_free * 4 > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError(
        StrCat("a ", moving_free, "-wide fp32 PSUM tile exceeds one PSUM bank"));
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
// tile boundaries, tails and accumulation order.
template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  // The ragged tail of a dimension; the faults break it on purpose.
  auto size_of = [](int64_t index, int64_t tile, int64_t dim) {
    return std::min(tile, dim - index * tile);
  };
  int64_t tiles_k = p.tiles_k;
  if (g_fault == MatmulFault::kDropRaggedKTile && p.k % p.tile_k != 0 && p.k > p.tile_k) {
    tiles_k = p.k / p.tile_k;
  }
  const int64_t blocks_k = CeilDiv(tiles_k, p.block_k);
  auto n_size = [&](int64_t tn) {
    int64_t size = size_of(tn, p.tile_n, p.n);
    if (g_fault == MatmulFault::kRaggedNOffByOne && size < p.tile_n && size > 1) --size;
    return size;
  };

  const int64_t split_blocks = p.split_m ? p.blocks_m : p.blocks_n;
  for (int core = 0; core < p.shards; ++core) {
    const int64_t lo = split_blocks * core / p.shards;
    const int64_t hi = split_blocks * (core + 1) / p.shards;
    std::array<int64_t, 3> begin{}, end{};  // per dim m, n, k
    begin = {p.split_m ? lo : 0, p.split_m ? 0 : lo, 0};
    end = {p.split_m ? hi : p.blocks_m, p.split_m ? p.blocks_n : hi, blocks_k};
    e.BeginCore(core);

    std::vector<std::vector<int32_t>> a_loads(p.bufs), b_loads(p.bufs);
    std::vector<int32_t> a_reader(p.bufs, -1), b_reader(p.bufs, -1);
    std::vector<int32_t> slot_reader(p.psum_slots, -1);
    std::vector<int> group_slot(p.block_m * p.block_n, 0);
    std::vector<int32_t> acc_writer(p.tiles_m * p.tiles_n, -1);
    std::array<int32_t, kStagingBufs> stage_reader;
    stage_reader.fill(-1);
    int64_t a_count = 0, b_count = 0, psum_count = 0, stage_count = 0, evict_count = 0;
    std::pair<int64_t, int64_t> a_key{-1, -1}, b_key{-1, -1};
    int a_cur = 0, b_cur = 0;
    std::pair<int64_t, int64_t> last_stationary{-1, -1};

    auto dim_index = [&](char c) { return c == 'm' ? 0 : c == 'n' ? 1 : 2; };
    const int d0 = dim_index(p.order[0]), d1 = dim_index(p.order[1]), d2 = dim_index(p.order[2]);
    std::array<int64_t, 3> idx{};
    for (idx[d0] = begin[d0]; idx[d0] < end[d0]; ++idx[d0]) {
      for (idx[d1] = begin[d1]; idx[d1] < end[d1]; ++idx[d1]) {
        for (idx[d2] = begin[d2]; idx[d2] < end[d2]; ++idx[d2]) {
          const int64_t bm = idx[0], bn = idx[1], bk = idx[2];
          const int64_t tm_lo = bm * p.block_m, tm_hi = std::min(p.tiles_m, tm_lo + p.block_m);
          const int64_t tn_lo = bn * p.block_n, tn_hi = std::min(p.tiles_n, tn_lo + p.block_n);
          const int64_t tk_lo = bk * p.block_k, tk_hi = std::min(tiles_k, tk_lo + p.block_k);
          const int64_t m0 = tm_lo * p.tile_m, m1 = std::min(p.m, tm_hi * p.tile_m);
          const int64_t n0 = tn_lo * p.tile_n, n1 = std::min(p.n, tn_hi * p.tile_n);

          if (p.hoist == 0 || a_key != std::pair{bm, bk}) {
            a_key = {bm, bk};
            a_cur = int(a_count++ % p.bufs);
            a_loads[a_cur].clear();
            for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
              a_loads[a_cur].push_back(e.Load(core, /*is_a=*/true, tk * p.tile_k,
                                              size_of(tk, p.tile_k, p.k), m0, m1 - m0,
                                              a_reader[a_cur]));
            }
          }
          if (p.hoist == 0 || b_key != std::pair{bk, bn}) {
            b_key = {bk, bn};
            b_cur = int(b_count++ % p.bufs);
            b_loads[b_cur].clear();
            for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
              b_loads[b_cur].push_back(e.Load(core, /*is_a=*/false, tk * p.tile_k,
                                              size_of(tk, p.tile_k, p.k), n0, n1 - n0,
                                              b_reader[b_cur]));
            }
          }

          for (int64_t tm = tm_lo; tm < tm_hi; ++tm) {
            for (int64_t tn = tn_lo; tn < tn_hi; ++tn) {
              const int64_t om0 = tm * p.tile_m, omsz = size_of(tm, p.tile_m, p.m);
              const int64_t on0 = tn * p.tile_n, onsz = n_size(tn);
              const int local = int((tm - tm_lo) * p.block_n + (tn - tn_lo));
              const bool group_begins = !p.full_k || bk == 0;
              int slot;
              if (group_begins) {
                slot = int(psum_count++ % p.psum_slots);
                group_slot[local] = slot;
              } else {
                slot = group_slot[local];
              }
              int32_t last_mm = -1;
              for (int64_t tk = tk_lo; tk < tk_hi; ++tk) {
                const bool start = group_begins && tk == tk_lo;
                std::pair<int64_t, int64_t> stationary{tk, p.stationary_b ? tn : tm};
                const bool reload = stationary != last_stationary;
                last_stationary = stationary;
                last_mm =
                    e.Matmul(core, om0, omsz, on0, onsz, tk * p.tile_k, size_of(tk, p.tile_k, p.k),
                             slot, start, reload, a_loads[a_cur][tk - tk_lo],
                             b_loads[b_cur][tk - tk_lo], start ? slot_reader[slot] : -1);
                a_reader[a_cur] = last_mm;
                b_reader[b_cur] = last_mm;
              }
              const bool last_kblock = bk == blocks_k - 1;
              if (p.full_k && !last_kblock) continue;
              EvictKind kind;
              if (p.full_k || blocks_k == 1) {
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
                if (p.evict == "scalar" || (p.evict == "split" && evict_count % 2 == 1)) {
                  engine = EngineKind::kScalar;
                }
                ++evict_count;
              }
              const int64_t tile_id = tm * p.tiles_n + tn;
              const bool final = kind == EvictKind::kFinal || kind == EvictKind::kFinalAdd;
              const int stage = int(stage_count % kStagingBufs);
              int32_t ev = e.Evict(core, kind, engine, slot, om0, omsz, on0, onsz, stage, last_mm,
                                   acc_writer[tile_id], final ? stage_reader[stage] : -1);
              slot_reader[slot] = ev;
              if (!final) {
                acc_writer[tile_id] = ev;
                continue;
              }
              ++stage_count;
              stage_reader[stage] = e.Store(core, om0, omsz, on0, onsz, stage, ev);
            }
          }
        }
      }
    }
  }
}

// Turns schedule steps into simulator instructions.
class SimEmitter {
 public:
  SimEmitter(const Plan& plan, const sim::Target& target, sim::Program* program)
      : p_(plan), target_(target), program_(program) {}

  void BeginCore(int core) {
    program_->cores.resize(core + 1);
    core_ = &program_->cores[core];
    core_->instructions.reserve(4096);
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

  int32_t Load(int, bool is_a, int64_t, int64_t ksz, int64_t, int64_t xsz, int32_t dep) {
    const int rows = p_.rows_per_partition;
    sim::Instruction dma = sim::MakeDma(Op::kDmaLoad, int(CeilDiv(ksz, rows)),
                                        xsz * p_.in_bytes * rows, is_a ? kQueueA : kQueueB);
    dma.chunk_bytes = int32_t(xsz * p_.in_bytes);
    return core_->Add(dma, {dep});
  }

  int32_t Matmul(int, int64_t, int64_t msz, int64_t, int64_t nsz, int64_t, int64_t ksz, int, bool,
                 bool reload, int32_t dep_a, int32_t dep_b, int32_t dep_slot) {
    sim::Instruction mm = p_.stationary_b
                              ? sim::MakeMatmul(p_.dtype, int(ksz), int(nsz), int(msz), reload)
                              : sim::MakeMatmul(p_.dtype, int(ksz), int(msz), int(nsz), reload);
    mm.partitions = int16_t(CeilDiv(ksz, p_.rows_per_partition));
    return core_->Add(mm, {dep_a, dep_b, dep_slot});
  }

  int32_t Evict(int, EvictKind kind, EngineKind engine, int, int64_t, int64_t msz, int64_t,
                int64_t nsz, int, int32_t dep_mm, int32_t dep_acc, int32_t dep_stage) {
    const int partitions = int(p_.stationary_b ? nsz : msz);
    const int free = int(p_.stationary_b ? msz : nsz);
    const bool add = kind == EvictKind::kAddToAcc || kind == EvictKind::kFinalAdd;
    sim::Instruction inst = sim::MakeEngineOp(add ? Op::kTensorTensor : Op::kTensorCopy, engine,
                                              free, partitions, Mem::kPsum, Mem::kSbuf);
    inst.dtype = DType::kFp32;
    if (add) inst.in1 = Mem::kSbuf;
    return core_->Add(inst, {dep_mm, add ? dep_acc : -1, dep_stage});
  }

  int32_t Store(int, int64_t, int64_t msz, int64_t, int64_t nsz, int, int32_t dep) {
    const int partitions = int(p_.stationary_b ? nsz : msz);
    const int64_t free = p_.stationary_b ? msz : nsz;
    sim::Instruction dma =
        sim::MakeDma(Op::kDmaStore, partitions, free * p_.out_bytes, kQueueStore);
    // C is row-major in HBM: C^T tiles (stationary=b) need a transposing store.
    dma.transpose = p_.stationary_b;
    return core_->Add(dma, {dep});
  }

 private:
  const Plan& p_;
  const sim::Target& target_;
  sim::Program* program_;
  sim::CoreProgram* core_ = nullptr;
};

// Rounds to the nearest value with `mantissa_bits` explicit mantissa bits (ties to even), the
// smallest normal exponent `min_exp` (gradual underflow below) and saturation at `max_value`.
float RoundTo(float x, int mantissa_bits, int min_exp, float max_value) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exp = 0;
  std::frexp(x, &exp);  // x = f * 2^exp, 0.5 <= |f| < 1
  exp = std::max(exp - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - mantissa_bits);
  double rounded = std::nearbyint(double(x) / quantum) * quantum;
  return float(std::clamp(rounded, -double(max_value), double(max_value)));
}

float RoundInput(float x, DType dtype) {
  switch (dtype) {
    case DType::kBf16:
      return RoundTo(x, 7, -126, std::numeric_limits<float>::max());
    case DType::kFp8:
      return RoundTo(x, 3, -6, 448.0f);  // e4m3
    case DType::kFp16:
      return RoundTo(x, 10, -14, 65504.0f);
    default:
      return x;
  }
}

float RoundOutput(float x, DType dtype) {
  return dtype == DType::kFp32 ? x : RoundTo(x, 7, -126, std::numeric_limits<float>::max());
}

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

  void BeginCore(int) {}
  int32_t Load(int, bool, int64_t, int64_t, int64_t, int64_t, int32_t) { return -1; }

  int32_t Matmul(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int64_t k0, int64_t ksz,
                 int slot, bool start, bool, int32_t, int32_t, int32_t) {
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

  int32_t Evict(int, EvictKind kind, EngineKind, int slot, int64_t m0, int64_t msz, int64_t n0,
                int64_t nsz, int stage, int32_t, int32_t, int32_t) {
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
            stage_[stage][at] = RoundOutput(ps[at], p_.dtype);
            break;
          case EvictKind::kFinalAdd:
            stage_[stage][at] = RoundOutput(acc[at] + ps[at], p_.dtype);
            break;
        }
      }
    }
    return -1;
  }

  int32_t Store(int, int64_t m0, int64_t msz, int64_t n0, int64_t nsz, int stage, int32_t) {
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

// The reduced dimension Verify runs: the full dim when it is at most `keep` tiles, else `keep - 1`
// full tiles plus a ragged tail (the original tail, or half a tile plus one).
int64_t ReducedDim(int64_t dim, int64_t tile, int64_t keep) {
  if (dim <= keep * tile) return dim;
  int64_t tail = dim % tile;
  if (tail == 0) tail = tile / 2 + 1;
  if (tail >= tile) tail = tile - 1;
  return (keep - 1) * tile + std::max<int64_t>(tail, 1);
}

}  // namespace

void SetMatmulFaultForTesting(MatmulFault fault) { g_fault = fault; }

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
  SimEmitter emitter(*plan, target, &program);
  Generate(*plan, emitter);
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
  for (float& x : a) x = RoundInput(uniform(rng), plan.dtype);
  for (float& x : b) x = RoundInput(uniform(rng), plan.dtype);
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

#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>

#include "kernels/estimate_util.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"

namespace tessel::kernels {
namespace {

using sim::DType;
using sim::EngineKind;
using sim::Mem;
using sim::Op;

constexpr int kQueueK = 0, kQueueV = 1, kQueueQ = 2, kQueueP = 3, kQueueStore = 4;
constexpr int kStagingBufs = 2;
// Per-tile bookkeeping slots: two phases (step parity) of at most kv_block <= 16 tiles.
constexpr int kSlots = 32;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// What mask=matmul adds to a masked score (exact in bf16): far enough below any score that its exp
// underflows to 0, finite so that a row max stays finite.
constexpr float kMaskValue = -32768.0f;

AttentionFault g_fault = AttentionFault::kNone;

// A parsed, checked config for one problem and target, with everything the lowering derives.
struct Plan {
  int64_t bh = 0, sq = 0, sk = 0, d = 0;
  bool causal = false;
  DType dtype = DType::kBf16;
  int in_bytes = 2, out_bytes = 2;
  int64_t bq = 128, kv_tile = 512, kv_block = 1, q_group = 1;
  bool qk_k = false, pv_v = false, qk_dma = true, src_sbuf = false;
  // P^T: of every p_dma_den tiles, the first p_dma_num go through a transposing SBUF-to-SBUF DMA
  // and the rest through TensorE (0/1: all TensorE, 1/1: all DMA, 1/2, 2/3: mixed).
  int p_dma_num = 0, p_dma_den = 1;
  bool sum_vector = false, resident = false, skip = false;
  int pipeline = 0;           // stage order of the step stream, see Generate
  int lead = 0;               // how many steps ahead the scores are issued (0-2, from pipeline)
  bool stats_scalar = false;  // small running-statistics ops on ScalarE (else VectorE)
  bool step_ops = false;      // one max and one exp instruction per softmax step (else per tile)
  // softmax=two_pass: a first pass over a query tile's keys forms its row max (QK^T, max); a
  // second recomputes QK^T and runs exp and PV with that final max, so the output accumulates in
  // PSUM with no rescaling and no step waits for the previous step's statistics.
  bool two_pass = false;
  // mask=matmul: a masked score tile gets kMaskValue added above the diagonal by a TensorE
  // matmul (identity x a constant triangle) into its PSUM bank, instead of an eviction and a
  // GpSimd affine_select (mask=select).
  bool mask_matmul = false;
  // exp_layout=st (two_pass only): the exp pass computes S^T (keys on partitions, K^T chunks
  // stationary) with -m added by ones x diag(-m) per chunk, so exp writes P^T directly (no
  // transposes) and a ones column appended to V makes PV also produce the row sums.
  bool st = false;
  // max_dtype=fp8 (two_pass): the max pass's QK^T runs on fp8 copies of Q^T and K^T (made on
  // GpSimd). The max it finds is approximate, which the two-pass softmax allows: the exp pass
  // uses that same m in P and in l, so the result is exact up to rounding (P may exceed 1 by
  // the fp8 error, far from overflow).
  bool max_fp8 = false;

  std::string evict;
  int bufs = 2;
  int shards = 1;
  // The analytic estimate's sampling (EstimateAttention; 1 everywhere else): only the query
  // groups g with g % group_stride == group_stride / 2 are generated, and a resident head's K/V
  // loads are left to the caller.
  int64_t group_stride = 1;

  int64_t q_tiles = 0, kv_tiles = 0, kv_blocks = 0;
  int s_slots = 0;  // score PSUM banks in rotation (all query tiles of a group)
  int p_slots = 0;  // P / P^T SBUF buffers in rotation
  int kv_ring = 0;  // K/V tile buffers
  bool tr_bank = false, pt_bank = false;
  float scale = 1;

  void Derive() {
    q_tiles = CeilDiv(sq, bq);
    kv_tiles = CeilDiv(sk, kv_tile);
    kv_blocks = CeilDiv(kv_tiles, kv_block);
    scale = float(1.0 / std::sqrt(double(d)));
  }
  // Per query tile: a step's tile maxima and sums plus the running statistics, or with
  // two_pass every tile's row max and row sums (each reduced once).
  static int64_t StatsBytes(const Plan& p) {
    return ((p.two_pass ? 2 * p.kv_tiles : p.kv_block) + 8) * 4;
  }
  // Q^T buffers per group member: the two groups in flight, and with two_pass a third so that
  // the next group's Q^T loads while its buffer's previous group is still in its exp pass.
  int q_sets() const { return two_pass ? 3 : 2; }
  // Columns of a V chunk in SBUF: head_dim, plus the ones column with exp_layout=st.
  int64_t v_cols() const { return d + (st ? 1 : 0); }
  // Columns of the mask=matmul constant: [r, x] = kMaskValue where x > r; every masked window of
  // a tile (at most kv_tile columns) starts at x <= 128.
  int64_t mask_width() const { return 128 + kv_tile; }
  // Offset of the bottom-right aligned causal diagonal: query i sees keys j <= i + offset.
  int64_t offset() const { return sk - sq; }
};

absl::StatusOr<bool> GetChoice(const Config& config, const char* name, const char* yes,
                               const char* no) {
  std::optional<std::string_view> v = config.Get(name);
  if (!v || (*v != yes && *v != no)) {
    return absl::InvalidArgumentError(StrCat(name, " must be ", yes, " or ", no));
  }
  return *v == yes;
}

absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  p.bh = *problem.dims.Get("batch") * *problem.dims.Get("heads");
  p.sq = *problem.dims.Get("seq_q");
  p.sk = *problem.dims.Get("seq_k");
  p.d = *problem.dims.Get("head_dim");
  p.causal = *problem.dims.Get("causal") == 1;
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  p.dtype = *dtype;
  p.in_bytes = sim::DTypeBytes(p.dtype);
  p.out_bytes = OutputBytes(p.dtype);
  int64_t bufs = 0, shards = 0, resident = 0, skip = 0, pipeline = 0;
  struct IntParam {
    const char* name;
    int64_t* out;
    int64_t min, max;
  };
  for (IntParam ip : {IntParam{"block_q", &p.bq, 1, 128},
                      {"kv_tile", &p.kv_tile, 1, 512},
                      {"kv_block", &p.kv_block, 1, 16},
                      {"q_group", &p.q_group, 1, 8},
                      {"kv_resident", &resident, 0, 1},
                      {"bufs", &bufs, 1, 4},
                      {"causal_skip", &skip, 0, 1},
                      {"pipeline", &pipeline, 0, 4},
                      {"shards", &shards, 1, 1024}}) {
    absl::StatusOr<int64_t> v = config.GetInt(ip.name);
    if (!v.ok()) return v.status();
    if (*v < ip.min || *v > ip.max) {
      return absl::InvalidArgumentError(
          StrCat(ip.name, "=", *v, " is out of range ", ip.min, "..", ip.max));
    }
    *ip.out = *v;
  }
  p.resident = resident == 1;
  p.skip = skip == 1;
  p.pipeline = int(pipeline);
  p.bufs = int(bufs);
  p.shards = int(shards);
  struct Choice {
    const char* name;
    const char* yes;
    const char* no;
    bool* out;
    // Added after configs were stored (softmax, mask, exp_layout, max_dtype): when absent, `no`.
    bool optional = false;
  };
  for (Choice c : {Choice{"qk_role", "k", "q", &p.qk_k},
                   {"pv_role", "v", "p", &p.pv_v},
                   {"qk_transpose", "dma", "tensor", &p.qk_dma},
                   {"softmax_src", "sbuf", "psum", &p.src_sbuf},
                   {"sum_engine", "vector", "scalar", &p.sum_vector},
                   {"stats_engine", "scalar", "vector", &p.stats_scalar},
                   {"softmax_ops", "step", "tile", &p.step_ops},
                   {"softmax", "two_pass", "online", &p.two_pass, true},
                   {"mask", "matmul", "select", &p.mask_matmul, true},
                   {"exp_layout", "st", "s", &p.st, true},
                   {"max_dtype", "fp8", "input", &p.max_fp8, true}}) {
    if (c.optional && !config.Get(c.name)) continue;
    absl::StatusOr<bool> v = GetChoice(config, c.name, c.yes, c.no);
    if (!v.ok()) return v.status();
    *c.out = *v;
  }
  std::optional<std::string_view> pt = config.Get("p_transpose");
  if (!pt || (*pt != "tensor" && *pt != "dma" && *pt != "half" && *pt != "two_thirds")) {
    return absl::InvalidArgumentError("p_transpose must be tensor, dma, half or two_thirds");
  }
  p.p_dma_num = *pt == "tensor" ? 0 : *pt == "two_thirds" ? 2 : 1;
  p.p_dma_den = *pt == "half" ? 2 : *pt == "two_thirds" ? 3 : 1;
  std::optional<std::string_view> evict = config.Get("evict");
  if (!evict ||
      (*evict != "vector" && *evict != "scalar" && *evict != "split" && *evict != "gpsimd")) {
    return absl::InvalidArgumentError("evict must be vector, scalar, split or gpsimd");
  }
  p.evict = std::string(*evict);
  p.Derive();

  if (p.evict == "gpsimd") {
    return absl::InvalidArgumentError(
        "evict=gpsimd: GpSimd cannot access PSUM, so it cannot evict transposes or scores");
  }
  if (p.kv_tile * 4 > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError(StrCat("kv_tile=", p.kv_tile,
                                             ": an fp32 score tile exceeds one PSUM bank (",
                                             target.psum_bank_bytes_per_partition, " bytes)"));
  }
  if (target.matmul_max_n > 0 && p.kv_tile > target.matmul_max_n) {
    return absl::InvalidArgumentError(StrCat("kv_tile=", p.kv_tile,
                                             " exceeds the TensorE moving free size limit ",
                                             target.matmul_max_n));
  }
  if (p.bq > target.sbuf_partitions) {
    return absl::InvalidArgumentError(
        StrCat("block_q=", p.bq, " exceeds the ", target.sbuf_partitions, " partitions"));
  }
  if (p.skip && !p.causal) {
    return absl::InvalidArgumentError(
        "causal_skip=1 needs a causal problem (causal=1): nothing is masked");
  }
  // The two-pass options' combination rules.
  struct Rule {
    bool violated;
    const char* why;
  };
  for (const Rule& rule : {
           Rule{p.st && !p.two_pass,
                "exp_layout=st needs softmax=two_pass: the online softmax rescales P by rows"},
           {p.pipeline == 4 && !p.two_pass,
            "pipeline=4 needs softmax=two_pass: with the online softmax, the scores two steps "
            "ahead would move the running max past the step being exponentiated"},
           {p.max_fp8 && !p.two_pass,
            "max_dtype=fp8 needs softmax=two_pass: the online softmax's scores feed exp too"},
           {p.max_fp8 && p.dtype == DType::kFp8, "max_dtype=fp8 is redundant with fp8 inputs"},
           {p.st && p.pv_v,
            "exp_layout=st needs pv_role=p: P^T is the stationary operand, V (with its ones "
            "column) the moving one"},
           {p.mask_matmul && !p.causal,
            "mask=matmul needs a causal problem (causal=1): nothing is masked"},
       }) {
    if (rule.violated) return absl::InvalidArgumentError(rule.why);
  }
  if (p.max_fp8 && !target.SupportsDType(DType::kFp8)) {
    return absl::InvalidArgumentError(
        StrCat("max_dtype=fp8: TensorE on ", target.name, " does not support fp8"));
  }
  if (p.shards > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("shards=", p.shards, " exceeds the ",
                                             target.cores_per_chip, " cores per chip of ",
                                             target.name));
  }
  if (p.shards > p.bh) {
    if (strict) {
      return absl::InvalidArgumentError(
          StrCat("shards=", p.shards, " exceeds the ", p.bh, " (batch x heads) pairs it splits"));
    }
    p.shards = int(p.bh);
  }
  if (p.step_ops) {
    // A step's scores are read by one instruction: the free size caps apply to all of them.
    const int64_t cap = p.src_sbuf ? target.max_free_sbuf : target.max_free_psum;
    if (cap > 0 && p.kv_block * p.kv_tile > cap) {
      return absl::InvalidArgumentError(
          StrCat("softmax_ops=step: kv_block x kv_tile = ", p.kv_block * p.kv_tile,
                 " score columns exceed the ", cap, " elements one instruction may read from ",
                 p.src_sbuf ? "SBUF" : "PSUM"));
    }
  }
  if (strict) {
    if (p.step_ops && p.kv_block == 1) {
      return absl::InvalidArgumentError(
          "softmax_ops=step is redundant with kv_block=1: a step is one tile");
    }
    if (p.bq > 32 && p.bq / 2 >= p.sq) {
      return absl::InvalidArgumentError(StrCat("block_q=", p.bq, " is redundant: ", p.bq / 2,
                                               " already covers all ", p.sq, " queries"));
    }
    if (p.kv_tile > 128 && p.kv_tile / 2 >= p.sk) {
      return absl::InvalidArgumentError(StrCat("kv_tile=", p.kv_tile,
                                               " is redundant: ", p.kv_tile / 2,
                                               " already covers all ", p.sk, " keys"));
    }
    if (p.kv_block > 1 && p.kv_block / 2 >= p.kv_tiles) {
      return absl::InvalidArgumentError(StrCat("kv_block=", p.kv_block,
                                               " is redundant: ", p.kv_block / 2,
                                               " already covers all ", p.kv_tiles, " key tiles"));
    }
    if (p.q_group > 1 && p.q_group / 2 >= p.q_tiles) {
      return absl::InvalidArgumentError(StrCat("q_group=", p.q_group,
                                               " is redundant: ", p.q_group / 2,
                                               " already covers all ", p.q_tiles, " query tiles"));
    }
    if (p.st && (p.p_dma_num > 0 || p.sum_vector)) {
      return absl::InvalidArgumentError(
          "exp_layout=st makes no P^T and takes row sums from PV: p_transpose and sum_engine are "
          "redundant (use tensor and scalar)");
    }
    if (p.resident && p.q_tiles == 1) {
      return absl::InvalidArgumentError(
          "kv_resident=1 is redundant with one query tile: K and V are read once anyway");
    }
  }

  // PSUM: score banks in rotation, plus the P^T bank, the output bank and a bank for the
  // transposes (Q^T/K^T through TensorE, S^T, broadcasts of the O^T layout).
  p.s_slots = int(p.kv_block * (p.bufs > 1 ? 2 : 1) * p.q_group);
  // P of step s is read (P^T, PV) after step s+1's exp with pipeline=2: two steps of buffers.
  p.p_slots = int(p.kv_block * p.q_group * (p.bufs > 1 || p.pipeline >= 2 ? 2 : 1));
  // (K/V tiles of the steps whose scores are issued ahead of this step's PV stay live.)
  p.lead = p.pipeline == 4 ? 2 : p.pipeline > 0 ? 1 : 0;
  p.kv_ring = int(p.resident ? p.kv_tiles : p.kv_block * (p.bufs + p.lead));
  p.pt_bank = p.p_dma_num < p.p_dma_den && !p.st;
  p.tr_bank = !p.qk_dma || p.qk_k || p.pv_v;
  const int groups = p.s_slots + (p.pt_bank ? 1 : 0) + int(p.q_group) + (p.tr_bank ? 1 : 0);
  const int max_groups = std::min(target.psum_banks, target.max_accumulation_groups);
  if (groups > max_groups) {
    return absl::InvalidArgumentError(
        StrCat("PSUM: ", p.s_slots, " score banks (kv_block x ", p.bufs > 1 ? 2 : 1, " x q_group)",
               p.pt_bank ? " + 1 P^T bank" : "", " + ", p.q_group, " output bank(s)",
               p.tr_bank ? " + 1 transpose bank" : "", " = ", groups, " exceed the ", max_groups,
               " PSUM banks"));
  }
  const int64_t pt_bytes = CeilDiv(p.kv_tile, 128) * p.bq * 4;
  if (p.pv_v && p.bq * 4 > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError("pv_role=v: an O^T tile exceeds one PSUM bank");
  }
  if (pt_bytes > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError("a P^T tile exceeds one PSUM bank");
  }

  // SBUF per partition.
  const int64_t chunks = CeilDiv(p.kv_tile, 128);
  int64_t sbuf = 0;
  if (p.resident) {
    sbuf += p.kv_tiles * p.kv_tile * p.in_bytes;            // K^T of a head
    sbuf += p.kv_tiles * chunks * p.v_cols() * p.in_bytes;  // V of a head
  } else {
    sbuf += (p.kv_tile * p.in_bytes + chunks * p.v_cols() * p.in_bytes) * p.kv_ring;
  }
  if (!p.qk_dma) sbuf += chunks * p.d * p.in_bytes * 2;  // raw K chunks
  sbuf += (p.bq * p.in_bytes + (p.qk_dma ? 0 : p.d * p.in_bytes)) * p.q_sets() *
          p.q_group;                                       // Q^T (+ raw Q)
  sbuf += p.s_slots * p.kv_tile * 4;                       // scores evicted to SBUF
  if (p.qk_k) sbuf += chunks * p.bq * 4;                   // S^T chunks
  sbuf += p.p_slots * p.kv_tile * p.in_bytes;              // P
  sbuf += p.p_slots * chunks * p.bq * p.in_bytes;          // P^T
  sbuf += Plan::StatsBytes(p) * 2 * p.q_group;             // running stats (two groups in flight)
  if (p.mask_matmul) sbuf += (p.mask_width() + p.bq) * 2;  // bf16 triangle and identity
  if (p.st) sbuf += p.bq * 2 * (2 * p.q_group + 2);        // bf16 diag(-m) tiles, identity, ones
  if (p.max_fp8) {                                         // fp8 copies of K^T and Q^T
    sbuf += (p.resident ? p.kv_tiles : p.kv_ring) * p.kv_tile + p.bq * p.q_sets() * p.q_group;
  }
  sbuf += (p.pv_v ? p.bq : p.d) *
          (4 * 2 * p.q_group + p.out_bytes * kStagingBufs);  // O accumulators, staging
  if (sbuf > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(StrCat(
        "SBUF capacity: ", sbuf, " bytes per partition (K/V ", p.resident ? "resident" : "streamed",
        ", scores, P, P^T, accumulators) exceed the usable ", target.UsableSbufPerPartition()));
  }
  return p;
}

// One score tile of a softmax step.
struct KvTile {
  int64_t index = 0;  // key tile index
  int64_t j0 = 0, size = 0;
  bool masked = false;  // some (query, key) pair of the tile is masked
};

// Walks the plan's schedule in program order and tells `e` each step. Shared by the lowering and
// the CPU execution in Verify, so both run the same tiles, tails, skipping, softmax steps,
// accumulation order and sharding.
//
// Query tiles run in groups of q_group, their steps interleaved so that the engines always have
// independent work; each member keeps its own running statistics. The softmax steps of a head's
// groups form one stream that the pipeline walks: with pipeline > 0 the first step of the next
// group starts before the last step of the previous one finishes, so two groups' members can be
// live at once (member slots: group parity x q_group + member).
template <typename Emitter>
void Generate(const Plan& p, Emitter& e) {
  int64_t kv_tiles = p.kv_tiles;
  if (g_fault == AttentionFault::kDropRaggedKvTile && p.sk % p.kv_tile != 0 && kv_tiles > 1) {
    --kv_tiles;
  }
  struct Group {
    int members = 0;
    std::vector<int64_t> i0, qsz;
  };
  struct Step {
    size_t group = 0;
    int64_t kb = 0;
    std::vector<std::vector<KvTile>> tiles;  // per member (may be empty)
    bool first = false, last = false;        // the group's first / last step
    // softmax=two_pass: 1 = the max pass (scores, row max), 2 = the exp pass (scores, exp, P^T,
    // PV); 0 = online softmax (all of it). exp_first: the group's first step of pass 2.
    int pass = 0;
    bool exp_first = false;
  };
  for (int core = 0; core < p.shards; ++core) {
    e.BeginCore(core);
    const int64_t lo = p.bh * core / p.shards, hi = p.bh * (core + 1) / p.shards;
    for (int64_t h = lo; h < hi; ++h) {
      e.BeginHead(h);
      if (p.resident && p.group_stride == 1) {
        for (int64_t t = 0; t < kv_tiles; ++t) {
          e.LoadKv(t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile));
        }
      }
      // The head's groups and their softmax steps: per step, each member's key tiles (causal
      // skipping may leave a member, or the whole step, without any).
      std::vector<Group> groups;
      std::vector<Step> steps;
      for (int64_t qg = 0; qg < p.q_tiles; qg += p.q_group) {
        if (p.group_stride > 1 && qg / p.q_group % p.group_stride != p.group_stride / 2) continue;
        Group grp;
        grp.members = int(std::min(p.q_group, p.q_tiles - qg));
        for (int g = 0; g < grp.members; ++g) {
          grp.i0.push_back((qg + g) * p.bq);
          grp.qsz.push_back(std::min(p.bq, p.sq - grp.i0.back()));
        }
        const size_t first_step = steps.size();
        for (int64_t kb = 0; kb < p.kv_blocks; ++kb) {
          Step st{groups.size(), kb, std::vector<std::vector<KvTile>>(grp.members)};
          bool any = false;
          for (int g = 0; g < grp.members; ++g) {
            for (int64_t t = kb * p.kv_block; t < std::min(kv_tiles, (kb + 1) * p.kv_block); ++t) {
              KvTile tile{t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile), false};
              if (p.causal) {
                const int64_t last_row_sees = grp.i0[g] + grp.qsz[g] - 1 + p.offset();
                const int64_t first_row_sees = grp.i0[g] + p.offset();
                bool all_masked = tile.j0 > last_row_sees;
                if (g_fault == AttentionFault::kCausalSkipOffByOne) {
                  all_masked = tile.j0 > first_row_sees;
                }
                if (all_masked && p.skip) continue;
                // Skipping also drops the tile's columns that no query of the member sees.
                if (p.skip) tile.size = std::min(tile.size, last_row_sees - tile.j0 + 1);
                tile.masked = tile.j0 + tile.size - 1 > first_row_sees;
              }
              st.tiles[g].push_back(tile);
              any = true;
            }
          }
          if (any) steps.push_back(std::move(st));
        }
        // Every query sees key 0, so every group has at least one step.
        steps[first_step].first = true;
        if (p.two_pass) {
          // The max pass, then the same steps again as the exp pass.
          const size_t n = steps.size() - first_step;
          for (size_t x = 0; x < n; ++x) {
            steps.push_back(steps[first_step + x]);
            steps[first_step + x].pass = 1;
            steps.back().pass = 2;
            steps.back().first = false;
          }
          steps[first_step + n].exp_first = true;
        }
        steps.back().last = true;
        groups.push_back(std::move(grp));
      }
      if (p.two_pass) {
        // The stream alternates group g's exp pass with group g + 1's max pass, so that the
        // engines of one (TensorE, ScalarE, P^T) and of the other (TensorE, VectorE) overlap.
        std::vector<Step> order;
        order.reserve(steps.size());
        size_t at = 0;  // start of the current group's steps (its max pass, then its exp pass)
        auto half = [&](size_t start) {
          size_t n = 0;
          while (start + n < steps.size() && steps[start + n].pass == 1) ++n;
          return n;
        };
        size_t n = half(0);
        for (size_t x = 0; x < n; ++x) order.push_back(steps[x]);
        while (at < steps.size()) {
          const size_t next = at + 2 * n;  // the next group's first step
          const size_t n_next = next < steps.size() ? half(next) : 0;
          for (size_t x = 0; x < std::max(n, n_next); ++x) {
            if (x < n) order.push_back(steps[at + n + x]);
            if (x < n_next) order.push_back(steps[next + x]);
          }
          at = next;
          n = n_next;
        }
        steps = std::move(order);
      }
      const int slots = int(2 * p.q_group);
      std::vector<char> first_mid(slots, 1), first_back(slots, 1);
      auto member = [&](size_t group, int g) { return int(group % 2) * int(p.q_group) + g; };
      auto each = [&](size_t k, auto&& body) {
        const Step& st = steps[k];
        const Group& grp = groups[st.group];
        for (int g = 0; g < grp.members; ++g) {
          if (st.tiles[g].empty()) continue;
          e.Select(member(st.group, g));
          body(member(st.group, g), grp.qsz[g], grp.i0[g], st.tiles[g]);
        }
      };
      // Per-tile state lives in one of two phases (step parity): with pipeline=2 the next
      // step's scores and probabilities are made while this step's P is still being read.
      auto slot = [&](size_t k, size_t i) { return int((k % 2) * p.kv_block + i); };
      // softmax_ops=step: one max and one exp over a member's whole step when all its tiles
      // are read from the same memory (mask=select evicts a masked tile for the mask, so with
      // softmax_src=psum a step holding one keeps per-tile instructions).
      auto step_wide = [&](const std::vector<KvTile>& ts) {
        if (!p.step_ops || ts.size() < 2) return false;
        if (p.src_sbuf || p.mask_matmul) return true;
        return std::none_of(ts.begin(), ts.end(), [](const KvTile& t) { return t.masked; });
      };
      // Front: the group's queries (first step), the step's key tiles (once for the group),
      // scores, masks, row maxima and the new running max.
      auto front = [&](size_t k) {
        const Step& st = steps[k];
        e.SetPass(st.pass);
        if (st.first) {
          const Group& grp = groups[st.group];
          for (int g = 0; g < grp.members; ++g) {
            const int m = member(st.group, g);
            first_mid[m] = first_back[m] = 1;
            e.Select(m);
            e.LoadQ(grp.i0[g], grp.qsz[g]);
          }
        }
        if (!p.resident) {
          std::vector<char> needed(p.kv_block, 0);
          for (const std::vector<KvTile>& ts : st.tiles) {
            for (const KvTile& t : ts) needed[t.index - st.kb * p.kv_block] = 1;
          }
          for (int64_t x = 0; x < p.kv_block; ++x) {
            const int64_t t = st.kb * p.kv_block + x;
            if (needed[x]) e.LoadKv(t, t * p.kv_tile, std::min(p.kv_tile, p.sk - t * p.kv_tile));
          }
        }
        if (st.exp_first) {
          // The exp pass's bias from the final max, before its first scores (which read it
          // with exp_layout=st).
          each(k, [&](int, int64_t qsz, int64_t, const std::vector<KvTile>&) {
            e.FinalMax(qsz);
            e.CombineStats(int(k % 2), false, qsz);
          });
        }
        each(k, [&](int, int64_t qsz, int64_t i0, const std::vector<KvTile>& ts) {
          const bool max = st.pass != 2;
          for (size_t i = 0; i < ts.size(); ++i) {
            e.Scores(slot(k, i), ts[i], i0, qsz);
            e.Prepare(slot(k, i), ts[i], i0, qsz);
            if (max && !step_wide(ts)) e.RowMax(slot(k, i), ts[i], qsz);
          }
          if (!max) return;
          if (step_wide(ts)) e.RowMaxStep(slot(k, 0), ts, qsz);
          e.CombineMax(int(k % 2), slot(k, 0), step_wide(ts) ? 1 : int(ts.size()), st.pass == 1,
                       qsz);
        });
      };
      // Middle: the exp bias and rescale factor, probabilities, running sum.
      auto middle = [&](size_t k) {
        const int phase = int(k % 2);
        const int pass = steps[k].pass;
        e.SetPass(pass);
        if (pass == 1) return;
        if (pass == 0) {
          each(k, [&](int, int64_t qsz, int64_t, const std::vector<KvTile>&) {
            e.CombineStats(phase, true, qsz);
          });
        }
        each(k, [&](int m, int64_t qsz, int64_t, const std::vector<KvTile>& ts) {
          if (step_wide(ts)) {
            e.ExpStep(slot(k, 0), ts, qsz);
          } else {
            for (size_t i = 0; i < ts.size(); ++i) e.Exp(slot(k, i), ts[i], qsz);
          }
          const int partials = step_wide(ts) ? 1 : int(ts.size());
          e.UpdateSum(phase, slot(k, 0), partials, first_mid[m], pass == 0, qsz);
          first_mid[m] = 0;
        });
      };
      // Back: P^T (transpose), then PV accumulation and the rescaled output accumulator
      // (accumulate); the group's outputs after its last step.
      auto transpose = [&](size_t k) {
        if (steps[k].pass == 1) return;
        e.SetPass(steps[k].pass);
        each(k, [&](int, int64_t qsz, int64_t, const std::vector<KvTile>& ts) {
          if (step_wide(ts)) {
            e.TransposePStep(slot(k, 0), ts, qsz);
          } else {
            for (size_t i = 0; i < ts.size(); ++i) e.TransposeP(slot(k, i), ts[i], qsz);
          }
        });
      };
      int64_t finishing = -1;  // the group whose outputs are due (see finish)
      // With softmax=two_pass, PV accumulates in the output bank over all the exp pass's steps.
      auto accumulate = [&](size_t k) {
        const int phase = int(k % 2);
        const int pass = steps[k].pass;
        if (pass == 1) return;
        e.SetPass(pass);
        each(k, [&](int m, int64_t qsz, int64_t, const std::vector<KvTile>& ts) {
          for (size_t i = 0; i < ts.size(); ++i) {
            for (int64_t c0 = 0; c0 < ts[i].size; c0 += 128) {
              const int64_t csz = std::min<int64_t>(128, ts[i].size - c0);
              e.Pv(slot(k, i), ts[i], c0, csz, qsz,
                   i == 0 && c0 == 0 && (pass == 0 || first_back[m]));
            }
          }
          if (pass == 2) first_back[m] = 0;
        });
        if (pass == 0) {
          each(k, [&](int m, int64_t qsz, int64_t, const std::vector<KvTile>&) {
            e.Rescale(phase, first_back[m], g_fault != AttentionFault::kSkipRescale, qsz);
            first_back[m] = 0;
          });
        }
        if (steps[k].last) finishing = int64_t(steps[k].group);
      };
      // A group's outputs (1/l, O / l, store). With softmax=two_pass they are emitted one step
      // late, just before the next step's PV: the engines' queues then hold the following steps'
      // work ahead of the chain from the last exp to the reciprocal, and the output bank is
      // released before the next group reuses it. (The online softmax's outputs read the SBUF
      // accumulator and are emitted at once: deferring them made its best config 1% slower.)
      auto finish = [&] {
        if (finishing < 0) return;
        const Group& grp = groups[size_t(finishing)];
        for (int g = 0; g < grp.members; ++g) {
          e.Select(member(size_t(finishing), g));
          e.Finish(grp.i0[g], grp.qsz[g]);
        }
        finishing = -1;
      };
      // Software pipelining over the head's step stream (each engine runs its instructions in
      // program order, so the order decides what overlaps). pipeline=1 issues the next step's
      // scores before this step's P^T and PV (TensorE computes QK^T of step s+1 while the
      // softmax of step s runs); pipeline=2 also issues the next step's softmax before them;
      // pipeline=3 issues this step's P^T between the next step's scores and its softmax (the
      // P^T evictions fill the gap while the next running max is being formed). pipeline=4
      // (two_pass only: its exp pass's max is final) issues the scores two steps ahead and the
      // next step's softmax before this step's P^T and PV, so TensorE's in-order queue holds
      // two steps of QK^T while each PV waits for its exp.
      const size_t lead = size_t(p.lead);
      for (size_t k = 0; k < lead && k < steps.size(); ++k) front(k);
      if (p.pipeline >= 2) middle(0);
      for (size_t k = 0; k < steps.size(); ++k) {
        const bool next = k + 1 < steps.size();
        if (lead == 0) front(k);
        if (p.pipeline < 2) middle(k);
        if (lead > 0 && k + lead < steps.size()) front(k + lead);
        if (p.pipeline == 3) transpose(k);
        if (p.pipeline >= 2 && next) middle(k + 1);
        if (p.pipeline != 3) transpose(k);
        finish();
        accumulate(k);
        if (!p.two_pass) finish();
      }
      finish();
    }
  }
}

// Turns schedule steps into simulator instructions, tracking the buffers' readers and writers.
// `ProgramT` is sim::Program, or CountingProgram for the analytic estimate (which keeps only the
// instructions' costs).
template <typename ProgramT>
class SimEmitter {
 public:
  SimEmitter(const Plan& plan, const sim::Target& target, ProgramT* program)
      : p_(plan), target_(target), program_(program) {}

  void BeginCore(int core) {
    program_->cores.resize(core + 1);
    c_ = &program_->cores[core];
    const int64_t chunks = CeilDiv(p_.kv_tile, 128);
    const int d = int(p_.d), bq = int(p_.bq);
    const int kvp = int(std::min<int64_t>(128, p_.kv_tile));
    auto add = [&](const char* name, Mem mem, int partitions, int64_t bytes, int bufs) {
      c_->allocations.push_back({name, mem, 0, partitions, bytes, bufs});
    };
    if (p_.resident) {
      add("k_t", Mem::kSbuf, d, p_.kv_tiles * p_.kv_tile * p_.in_bytes, 1);
      add("v", Mem::kSbuf, kvp, p_.kv_tiles * chunks * p_.v_cols() * p_.in_bytes, 1);
    } else {
      add("k_t", Mem::kSbuf, d, p_.kv_tile * p_.in_bytes, p_.kv_ring);
      add("v", Mem::kSbuf, kvp, chunks * p_.v_cols() * p_.in_bytes, p_.kv_ring);
    }
    if (!p_.qk_dma) {
      add("k_raw", Mem::kSbuf, kvp, chunks * p_.d * p_.in_bytes, 2);
      add("q_raw", Mem::kSbuf, bq, p_.d * p_.in_bytes, p_.q_sets() * int(p_.q_group));
    }
    const int group = int(p_.q_group);
    add("q_t", Mem::kSbuf, d, p_.bq * p_.in_bytes, p_.q_sets() * group);
    add("s_sbuf", Mem::kSbuf, bq, p_.kv_tile * 4, p_.s_slots);
    if (p_.qk_k) add("s_t", Mem::kSbuf, kvp, chunks * p_.bq * 4, 1);
    add("p", Mem::kSbuf, bq, p_.kv_tile * p_.in_bytes, p_.p_slots);
    add("p_t", Mem::kSbuf, kvp, chunks * p_.bq * p_.in_bytes, p_.p_slots);
    // Member slots: two groups may be in flight (see Generate).
    add("stats", Mem::kSbuf, bq, Plan::StatsBytes(p_), 2 * group);
    const int o_part = p_.pv_v ? d : bq;
    const int64_t o_free = p_.pv_v ? p_.bq : p_.d;
    add("o_acc", Mem::kSbuf, o_part, o_free * 4, 2 * group);
    add("o_stage", Mem::kSbuf, o_part, o_free * p_.out_bytes, kStagingBufs);
    add("s_psum", Mem::kPsum, bq, p_.kv_tile * 4, p_.s_slots);
    if (p_.pt_bank) add("pt_psum", Mem::kPsum, kvp, chunks * p_.bq * 4, 1);
    add("o_psum", Mem::kPsum, o_part, o_free * 4, group);
    if (p_.tr_bank) add("tr_psum", Mem::kPsum, 128, target_.psum_bank_bytes_per_partition, 1);
    mask_ready_ = -1;
    if (p_.mask_matmul) {
      // The constants, made once per core: the triangle and the identity (GpSimd iota and
      // affine_select).
      add("mask", Mem::kSbuf, bq, (p_.mask_width() + p_.bq) * 2, 1);
      mask_ready_ = c_->Add(
          sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, int(p_.mask_width() + p_.bq), bq), {});
    }
    ones_ready_ = -1;
    if (p_.st) {
      add("m_diag", Mem::kSbuf, bq, p_.bq * 2, 2 * group);
      // The identity and a ones tile (GpSimd iota), made once per core.
      add("identity_ones", Mem::kSbuf, bq, 2 * p_.bq * 2, 1);
      ident_ready_ = c_->Add(sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, 2 * bq, bq), {});
      // The ones column of every V buffer, set once (V loads write only the head_dim columns).
      const int64_t v_bufs = p_.resident ? p_.kv_tiles : p_.kv_ring;
      ones_ready_ = c_->Add(
          sim::MakeEngineOp(Op::kMemset, EngineKind::kVector, int(v_bufs * chunks), kvp), {});
    }
    kv_reader_.assign(p_.kv_ring, -1);
    kv_buf_of_tile_.assign(p_.kv_tiles, 0);
    k_ready_.assign(kv_reader_.size(), -1);
    k8_ready_.assign(kv_reader_.size(), -1);
    k8_war_.assign(kv_reader_.size(), -1);
    k8_size_.assign(kv_reader_.size(), 0);
    v_ready_.assign(kv_reader_.size(), -1);
    s_reader_.assign(p_.s_slots, -1);
    p_reader_.assign(p_.p_slots, -1);
    stage_reader_.fill(-1);
    q_reader_.assign(p_.q_sets() * p_.q_group, -1);
    tr_reader_ = pt_reader_ = st_reader_ = -1;
    members_.assign(2 * p_.q_group, Member{});
    o_reader_.assign(p_.q_group, -1);
    current_ = 0;
    Load(members_[0]);
  }

  void BeginHead(int64_t) {}

  // Makes query tile `g` of the current group the one later calls refer to.
  void Select(int g) {
    if (g == current_) return;
    Save(members_[current_]);
    Load(members_[g]);
    current_ = g;
  }

  void LoadKv(int64_t t, int64_t, int64_t tsz) {
    const int buf = int(p_.resident ? t : kv_count_++ % p_.kv_ring);
    kv_buf_of_tile_[t] = buf;
    const int32_t war = kv_reader_[buf];
    const int kvp = int(std::min<int64_t>(128, tsz));
    const int64_t chunks = CeilDiv(tsz, 128);
    if (p_.qk_dma) {
      sim::Instruction k = sim::MakeDma(Op::kDmaLoad, int(p_.d), tsz * p_.in_bytes, kQueueK);
      k.transpose = true;
      k_ready_[buf] = c_->Add(k, {war});
    } else {
      sim::Instruction raw = sim::MakeDma(Op::kDmaLoad, kvp, chunks * p_.d * p_.in_bytes, kQueueK);
      raw.chunk_bytes = int32_t(p_.d * p_.in_bytes);
      const int32_t load = c_->Add(raw, {war});
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tsz - c * 128));
        last = Transpose(csz, int(p_.d), {load, tr_reader_});
      }
      tr_reader_ = k_ready_[buf] = Evict(int(p_.d), int(tsz), last, war);
    }
    // (max_dtype=fp8: the fp8 copy is made when the max pass first reads the tile, so that
    // GpSimd does not convert all of a head's resident tiles ahead of its first Q^T.)
    if (p_.max_fp8) k8_ready_[buf] = -1, k8_war_[buf] = war, k8_size_[buf] = int(tsz);
    sim::Instruction v = sim::MakeDma(Op::kDmaLoad, kvp, chunks * p_.d * p_.in_bytes, kQueueV);
    v.chunk_bytes = int32_t(p_.d * p_.in_bytes);
    v_ready_[buf] = c_->Add(v, {war});
  }

  void LoadQ(int64_t, int64_t qsz) {
    const int buf = int(q_count_++ % (p_.q_sets() * p_.q_group));
    const int32_t war = q_reader_[buf];
    if (p_.qk_dma) {
      sim::Instruction q = sim::MakeDma(Op::kDmaLoad, int(p_.d), qsz * p_.in_bytes, kQueueQ);
      q.transpose = true;
      q_ready_ = c_->Add(q, {war});
    } else {
      const int32_t load =
          c_->Add(sim::MakeDma(Op::kDmaLoad, int(qsz), p_.d * p_.in_bytes, kQueueQ), {war});
      const int32_t tr = Transpose(int(qsz), int(p_.d), {load, tr_reader_});
      tr_reader_ = q_ready_ = Evict(int(p_.d), int(qsz), tr, war);
    }
    if (p_.max_fp8) q8_ready_ = ToFp8(int(qsz), q_ready_, war);
    q_buf_ = buf;
    // Running max and sum start at -inf and 0.
    // (With two_pass and O in PSUM, the member's previous output is no longer in SBUF.)
    const int32_t o_war = p_.two_pass && !p_.pv_v ? -1 : oacc_;
    stats_ =
        c_->Add(sim::MakeEngineOp(Op::kMemset, EngineKind::kVector, 2, int(qsz)), {stats_, o_war});
    ids_.m = ids_.l = stats_;
    ids_.sum_last = -1, ids_.sums = 0;
    ids_.max_last = -1, ids_.maxes = 0;
  }

  // The pass the following calls belong to (softmax=two_pass: 1 max, 2 exp; 0 online).
  void SetPass(int pass) {
    st_ = p_.st && pass == 2;
    fp8_ = p_.max_fp8 && pass == 1;
  }

  void Scores(int i, const KvTile& tile, int64_t, int64_t qsz) {
    // A step's score tiles take adjacent banks (one group of kv_block), so one instruction can
    // read them all (softmax_ops=step).
    if (i % p_.kv_block == 0) s_base_ = int(s_count_++ % (p_.s_slots / p_.kv_block) * p_.kv_block);
    const int slot = s_base_ + int(i % p_.kv_block);
    slot_[i] = slot;
    const int buf = kv_buf_of_tile_[tile.index];
    const int64_t chunks = CeilDiv(tile.size, 128);
    if (st_) {
      // S^T chunks [keys, queries] side by side in the bank, each followed in its accumulation
      // group by ones[queries, keys] x diag(-m) (every key row gets -m), which needs no result
      // of the chunk's matmul.
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        c_->Add(sim::MakeMatmul(p_.dtype, int(p_.d), csz, int(qsz)),
                {q_ready_, k_ready_[buf], s_reader_[slot]});
        last = c_->Add(sim::MakeMatmul(DType::kBf16, int(qsz), csz, int(qsz)),
                       {ids_.m_diag, ident_ready_});
      }
      s_ready_[i] = ids_.m_diag_reader = last;
    } else if (!p_.qk_k) {
      sim::Instruction mm = sim::MakeMatmul(QkDType(), int(p_.d), int(qsz), int(tile.size));
      s_ready_[i] = c_->Add(mm, {QReady(), KReady(buf), s_reader_[slot]});
    } else {
      // S^T chunks with K^T stationary, evicted, then transposed back into the score bank.
      int32_t last = -1;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        sim::Instruction mm = sim::MakeMatmul(QkDType(), int(p_.d), csz, int(qsz));
        last = c_->Add(mm, {QReady(), KReady(buf), tr_reader_});
      }
      const int32_t ev =
          Evict(int(std::min<int64_t>(128, tile.size)), int(chunks * qsz), last, st_reader_);
      tr_reader_ = ev;
      for (int64_t c = 0; c < chunks; ++c) {
        const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
        last = Transpose(csz, int(qsz), {ev, s_reader_[slot]});
      }
      st_reader_ = last;
      s_ready_[i] = last;
    }
    q_reader_[q_buf_] = s_ready_[i];
    kv_reader_[buf] = std::max(kv_reader_[buf], s_ready_[i]);
    src_[i] = Mem::kPsum;
    src_bf16_[i] = false;
  }

  void Prepare(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    const int64_t chunks = CeilDiv(tile.size, 128);
    const int parts = ScoreParts(tile, qsz), free = int(ScoreFree(tile, qsz));
    const int64_t first = std::max<int64_t>(0, i0 + p_.offset() - tile.j0 + 1);
    if (tile.masked && p_.mask_matmul) {
      // Identity (stationary) x the triangle's window (moving) accumulates into the scores,
      // over the columns from the first one any query of the tile masks (S^T: each chunk
      // holding such a key). It follows QK^T on TensorE into the same accumulation group, so it
      // needs no result of it: readers wait for this last accumulation.
      if (!st_) {
        sim::Instruction mm =
            sim::MakeMatmul(DType::kBf16, int(qsz), int(qsz), int(tile.size - first));
        s_ready_[i] = c_->Add(mm, {mask_ready_});
      } else {
        for (int64_t c = first / 128; c < chunks; ++c) {
          const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
          s_ready_[i] = c_->Add(sim::MakeMatmul(DType::kBf16, csz, csz, int(qsz)), {mask_ready_});
        }
      }
    }
    if (!p_.src_sbuf && (!tile.masked || p_.mask_matmul)) return;
    int32_t ev = Evict(parts, free, s_ready_[i], -1);
    src_[i] = Mem::kSbuf;
    src_bf16_[i] = p_.src_sbuf && p_.dtype != DType::kFp32;
    if (tile.masked && !p_.mask_matmul) {
      // affine_select on GpSimd writes -inf above the diagonal.
      ev = c_->Add(sim::MakeEngineOp(Op::kIota, EngineKind::kGpSimd, free, parts), {ev});
    }
    s_reader_[slot_[i]] = ev;
    s_ready_[i] = ev;
  }

  void RowMax(int i, const KvTile& tile, int64_t qsz) {
    sim::Instruction max = sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(tile.size),
                                             int(qsz), src_[i]);
    max.dtype = src_bf16_[i] ? DType::kBf16 : DType::kFp32;
    max.add_op = true;
    max_[i] = c_->Add(max, {s_ready_[i]});
    if (src_[i] == Mem::kPsum) s_reader_[slot_[i]] = std::max(s_reader_[slot_[i]], max_[i]);
  }

  // The new running max of the step (right after its row maxima). With `deferred` (the two-pass
  // max pass) the tile maxima stay in their columns of the stats tile and FinalMax reduces them
  // all at once.
  void CombineMax(int, int base, int n, bool deferred, int64_t qsz) {
    if (deferred) {
      for (int i = base; i < base + n; ++i) ids_.max_last = std::max(ids_.max_last, max_[i]);
      ids_.maxes += n;
      return;
    }
    std::vector<int32_t> deps(max_.begin() + base, max_.begin() + base + n);
    deps.push_back(ids_.m);
    deps.push_back(ids_.m_reader);
    ids_.m =
        c_->Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, n + 1, int(qsz)), deps);
    stats_ = std::max(stats_, ids_.m);
  }

  // The deferred maxima's reduction (two_pass: at the start of the exp pass).
  void FinalMax(int64_t qsz) {
    if (ids_.maxes == 0) return;
    ids_.m =
        c_->Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, ids_.maxes, int(qsz)),
                {ids_.max_last, ids_.m, ids_.m_reader});
    stats_ = std::max(stats_, ids_.m);
    ids_.max_last = -1, ids_.maxes = 0;
  }

  // The running max's scaled negation (the exp bias) and, with `alpha` (online softmax),
  // alpha = exp(scale (m_old - m)), whose phase slot the step two back may still be reading.
  void CombineStats(int phase, bool alpha, int64_t qsz) {
    if (p_.st) {
      // exp_layout=st: diag(-m) in bf16 (the identity times -m per partition), the moving
      // operand that adds -m to the scores; the exp itself then needs no bias.
      ids_.m_diag = c_->Add(sim::MakeEngineOp(Op::kTensorScalar, StatsEngine(), int(qsz), int(qsz)),
                            {ids_.m, ids_.m_diag_reader, ident_ready_});
      ids_.m_reader = ids_.neg = ids_.m_diag;
      stats_ = std::max(stats_, ids_.m_diag);
      return;
    }
    const int32_t neg = c_->Add(sim::MakeEngineOp(Op::kTensorScalar, StatsEngine(), 1, int(qsz)),
                                {ids_.m, ids_.neg_reader});
    ids_.m_reader = ids_.neg = neg;
    stats_ = std::max(stats_, neg);
    if (!alpha) return;
    alpha_[phase] = c_->Add(sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, 1, int(qsz)),
                            {neg, ids_.alpha_reader[phase]});
    stats_ = std::max(stats_, alpha_[phase]);
  }

  // One max over all the step's tiles (adjacent banks, or SBUF when they were evicted).
  void RowMaxStep(int base, const std::vector<KvTile>& tiles, int64_t qsz) {
    int64_t total = 0;
    std::vector<int32_t> deps;
    for (size_t t = 0; t < tiles.size(); ++t) {
      total += tiles[t].size;
      deps.push_back(s_ready_[base + t]);
    }
    sim::Instruction max =
        sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(total), int(qsz), src_[base]);
    max.dtype = src_bf16_[base] ? DType::kBf16 : DType::kFp32;
    max.add_op = true;
    max_[base] = c_->Add(max, deps);
    for (size_t t = 0; t < tiles.size(); ++t) {
      max_[base + t] = max_[base];
      if (src_[base] == Mem::kPsum) {
        s_reader_[slot_[base + t]] = std::max(s_reader_[slot_[base + t]], max_[base]);
      }
    }
  }

  // One exp activation over all the step's tiles, accumulating one row sum (or one Vector
  // reduction of the step's P).
  void ExpStep(int base, const std::vector<KvTile>& tiles, int64_t qsz) {
    int64_t total = 0;
    std::vector<int32_t> deps = {ids_.neg, max_[base]};
    for (size_t t = 0; t < tiles.size(); ++t) {
      const int i = base + int(t);
      if (t == 0) p_base_ = int(p_count_++ % (p_.p_slots / p_.kv_block) * p_.kv_block);
      p_buf_[i] = p_base_ + int(t);
      total += ScoreFree(tiles[t], qsz);
      deps.push_back(s_ready_[i]);
      deps.push_back(p_reader_[p_buf_[i]]);
    }
    sim::Instruction exp = sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, int(total),
                                             ScoreParts(tiles[0], qsz), src_[base], Mem::kSbuf);
    exp.dtype = src_bf16_[base] ? DType::kBf16 : DType::kFp32;
    const int32_t id = c_->Add(exp, deps);
    ids_.neg_reader = std::max(ids_.neg_reader, id);
    int32_t sum = id;
    if (p_.sum_vector) {
      sim::Instruction red =
          sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(total), int(qsz));
      red.dtype = p_.dtype == DType::kFp32 ? DType::kFp32 : DType::kBf16;
      red.add_op = true;
      sum = c_->Add(red, {id});
    }
    for (size_t t = 0; t < tiles.size(); ++t) {
      const int i = base + int(t);
      p_ready_[i] = id;
      sum_[i] = sum;
      s_reader_[slot_[i]] = std::max(s_reader_[slot_[i]], id);
    }
  }

  void Exp(int i, const KvTile& tile, int64_t qsz) {
    if (i % p_.kv_block == 0) p_base_ = int(p_count_++ % (p_.p_slots / p_.kv_block) * p_.kv_block);
    const int buf = p_base_ + int(i % p_.kv_block);
    p_buf_[i] = buf;
    sim::Instruction exp =
        sim::MakeEngineOp(Op::kActivation, EngineKind::kScalar, int(ScoreFree(tile, qsz)),
                          ScoreParts(tile, qsz), src_[i], Mem::kSbuf);
    exp.dtype = src_bf16_[i] ? DType::kBf16 : DType::kFp32;
    p_ready_[i] = c_->Add(exp, {s_ready_[i], ids_.neg, p_reader_[buf], max_[i]});
    ids_.neg_reader = std::max(ids_.neg_reader, p_ready_[i]);
    s_reader_[slot_[i]] = std::max(s_reader_[slot_[i]], p_ready_[i]);
    sum_[i] = p_ready_[i];
    if (p_.sum_vector) {
      sim::Instruction sum =
          sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, int(tile.size), int(qsz));
      sum.dtype = p_.dtype == DType::kFp32 ? DType::kFp32 : DType::kBf16;
      sum.add_op = true;
      sum_[i] = c_->Add(sum, {p_ready_[i]});
    }
  }

  // l = l * alpha + the step's row sums (rescale: online softmax), else l + the row sums.
  void UpdateSum(int phase, int base, int n, bool, bool rescale, int64_t qsz) {
    if (st_) return;  // the row sums accumulate in PV's ones column
    if (!rescale) {
      // Two-pass softmax: each exp's row sums stay in their own column of the stats tile; Finish
      // adds them all with one reduction (so no per-step op waits for ScalarE's exp).
      for (int i = base; i < base + n; ++i) ids_.sum_last = std::max(ids_.sum_last, sum_[i]);
      ids_.sums += n;
      return;
    }
    std::vector<int32_t> deps(sum_.begin() + base, sum_.begin() + base + n);
    deps.push_back(alpha_[phase]);
    deps.push_back(ids_.l);
    // l = l * alpha + sum of the tiles' row sums: one fused op (Vector scalar_tensor_tensor, or
    // a Scalar activation with per-partition scale and bias) after summing several tiles' sums.
    int32_t partial = -1;
    if (n > 1) {
      partial =
          c_->Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, n, int(qsz)), deps);
    }
    const Op op = StatsEngine() == EngineKind::kScalar ? Op::kActivation : Op::kTensorTensor;
    sim::Instruction update = sim::MakeEngineOp(op, StatsEngine(), 1, int(qsz));
    update.dtype = DType::kFp32;
    deps.push_back(partial);
    ids_.l = c_->Add(update, deps);
    ids_.alpha_reader[phase] = std::max(ids_.alpha_reader[phase], ids_.l);
    stats_ = std::max(stats_, ids_.l);
  }

  void TransposeP(int i, const KvTile& tile, int64_t qsz) {
    if (st_) {  // exp wrote P^T
      pt_ready_[i] = p_ready_[i];
      return;
    }
    if (pt_count_++ % p_.p_dma_den < p_.p_dma_num) {
      DmaTransposeP(i, 1, tile.size, qsz);
    } else {
      TensorTransposeP(i, tile, qsz);
    }
  }

  // P^T of a whole step: one transposing DMA of the step's adjacent P buffers, or per-tile
  // TensorE transposes (p_transpose splits count steps).
  void TransposePStep(int base, const std::vector<KvTile>& tiles, int64_t qsz) {
    if (st_) {
      for (size_t t = 0; t < tiles.size(); ++t) pt_ready_[base + t] = p_ready_[base + t];
      return;
    }
    if (pt_count_++ % p_.p_dma_den < p_.p_dma_num) {
      int64_t total = 0;
      for (const KvTile& t : tiles) total += t.size;
      DmaTransposeP(base, int(tiles.size()), total, qsz);
    } else {
      for (size_t t = 0; t < tiles.size(); ++t) TensorTransposeP(base + int(t), tiles[t], qsz);
    }
  }

  void Pv(int i, const KvTile& tile, int64_t, int64_t csz, int64_t qsz, bool start) {
    const int buf = kv_buf_of_tile_[tile.index];
    // (exp_layout=st: V's ones column makes column head_dim the row sums.)
    sim::Instruction mm = p_.pv_v ? sim::MakeMatmul(p_.dtype, int(csz), int(p_.d), int(qsz))
                                  : sim::MakeMatmul(p_.dtype, int(csz), int(qsz), int(p_.v_cols()));
    // The member's output bank is shared with the same member of the other group in flight.
    last_pv_ =
        c_->Add(mm, {pt_ready_[i], v_ready_[buf], start ? o_reader_[OBank()] : -1, ones_ready_});
    p_reader_[p_buf_[i]] = std::max(p_reader_[p_buf_[i]], last_pv_);
    kv_reader_[buf] = std::max(kv_reader_[buf], last_pv_);
  }

  void Rescale(int phase, bool first, bool, int64_t qsz) {
    const int o_part = int(p_.pv_v ? p_.d : qsz);
    const int o_free = int(p_.pv_v ? qsz : p_.d);
    if (first) {
      sim::Instruction copy = sim::MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, o_free,
                                                o_part, Mem::kPsum, Mem::kSbuf);
      copy.dtype = DType::kFp32;
      oacc_ = o_reader_[OBank()] = c_->Add(copy, {last_pv_, oacc_});
      return;
    }
    if (!p_.pv_v) {
      // O = O * alpha + PV in one scalar_tensor_tensor (per-partition alpha; PV read from PSUM).
      sim::Instruction fused = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free,
                                                 o_part, Mem::kPsum, Mem::kSbuf);
      fused.in1 = Mem::kSbuf;
      fused.dtype = DType::kFp32;
      oacc_ = o_reader_[OBank()] = c_->Add(fused, {last_pv_, alpha_[phase], oacc_});
      ids_.alpha_reader[phase] = std::max(ids_.alpha_reader[phase], oacc_);
      return;
    }
    int32_t scaled;
    {
      const int32_t bcast = Broadcast(int(qsz), alpha_[phase]);
      ids_.alpha_reader[phase] = std::max(ids_.alpha_reader[phase], bcast);
      sim::Instruction mul = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free,
                                               o_part, Mem::kPsum, Mem::kSbuf);
      mul.in1 = Mem::kSbuf;
      mul.dtype = DType::kFp32;
      scaled = tr_reader_ = c_->Add(mul, {bcast, oacc_});
    }
    sim::Instruction add = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, o_free, o_part,
                                             Mem::kPsum, Mem::kSbuf);
    add.in1 = Mem::kSbuf;
    add.dtype = DType::kFp32;
    oacc_ = o_reader_[OBank()] = c_->Add(add, {last_pv_, scaled});
  }

  // O / l into the staging buffer and the store. With softmax=two_pass, O is still in its PSUM
  // bank: ScalarE scales it from there (O layout), or it is evicted first (O^T layout, whose
  // broadcast of 1/l is in PSUM too).
  void Finish(int64_t, int64_t qsz) {
    if (ids_.sums > 0) {
      ids_.l =
          c_->Add(sim::MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, ids_.sums, int(qsz)),
                  {ids_.sum_last, ids_.l});
    }
    // (exp_layout=st: l is the output bank's last column.)
    const int32_t inv =
        p_.st ? c_->Add(sim::MakeEngineOp(Op::kReciprocal, EngineKind::kVector, 1, int(qsz),
                                          Mem::kPsum, Mem::kSbuf),
                        {last_pv_})
              : c_->Add(sim::MakeEngineOp(Op::kReciprocal, EngineKind::kVector, 1, int(qsz)),
                        {ids_.l});
    const int stage = stage_count_++ % kStagingBufs;
    int32_t out;
    if (p_.two_pass && p_.pv_v) {
      oacc_ = o_reader_[OBank()] = Evict(int(p_.d), int(qsz), last_pv_, oacc_);
    }
    if (!p_.pv_v) {
      sim::Instruction mul =
          sim::MakeEngineOp(Op::kTensorScalar, EngineKind::kScalar, int(p_.d), int(qsz));
      mul.dtype = DType::kFp32;
      if (p_.two_pass) {
        mul.in0 = Mem::kPsum;
        out = o_reader_[OBank()] = c_->Add(mul, {inv, last_pv_, oacc_, stage_reader_[stage]});
      } else {
        out = c_->Add(mul, {inv, oacc_, stage_reader_[stage]});
      }
      sim::Instruction store =
          sim::MakeDma(Op::kDmaStore, int(qsz), p_.d * p_.out_bytes, kQueueStore);
      stage_reader_[stage] = c_->Add(store, {out});
    } else {
      const int32_t bcast = Broadcast(int(qsz), inv);
      sim::Instruction mul = sim::MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, int(qsz),
                                               int(p_.d), Mem::kPsum, Mem::kSbuf);
      mul.in1 = Mem::kSbuf;
      mul.dtype = DType::kFp32;
      out = tr_reader_ = c_->Add(mul, {bcast, oacc_, stage_reader_[stage]});
      // O^T tiles: a transposing store writes O row-major.
      sim::Instruction store =
          sim::MakeDma(Op::kDmaStore, int(p_.d), qsz * p_.out_bytes, kQueueStore);
      store.transpose = true;
      stage_reader_[stage] = c_->Add(store, {out});
    }
    oacc_ = out;
    stats_ = std::max(stats_, inv);
  }

 private:
  // The max pass's QK^T operands with max_dtype=fp8: the fp8 copies.
  DType QkDType() const { return fp8_ ? DType::kFp8 : p_.dtype; }
  int32_t QReady() const { return fp8_ ? q8_ready_ : q_ready_; }
  int32_t KReady(int buf) {
    if (!fp8_) return k_ready_[buf];
    if (k8_ready_[buf] < 0) k8_ready_[buf] = ToFp8(k8_size_[buf], k_ready_[buf], k8_war_[buf]);
    return k8_ready_[buf];
  }
  // An fp8 copy of a [head_dim, free] tile on GpSimd (SBUF to SBUF), after `dep`, once the
  // copy's previous readers (`war`) are done.
  int32_t ToFp8(int free, int32_t dep, int32_t war) {
    sim::Instruction copy =
        sim::MakeEngineOp(Op::kTensorCopy, EngineKind::kGpSimd, free, int(p_.d));
    copy.dtype = p_.dtype;
    return c_->Add(copy, {dep, war});
  }

  // A score tile's [partitions, free] shape: [queries, keys], or in the S^T layout [keys,
  // chunks x queries].
  int ScoreParts(const KvTile& tile, int64_t qsz) const {
    return st_ ? int(std::min<int64_t>(128, tile.size)) : int(qsz);
  }
  int64_t ScoreFree(const KvTile& tile, int64_t qsz) const {
    return st_ ? CeilDiv(tile.size, 128) * qsz : tile.size;
  }

  EngineKind NextEvictEngine() {
    const bool scalar = p_.evict == "scalar" || (p_.evict == "split" && evict_count_ % 2 == 1);
    ++evict_count_;
    return scalar ? EngineKind::kScalar : EngineKind::kVector;
  }

  int OBank() const { return current_ % int(p_.q_group); }

  // P^T of tiles [base, base + n) (adjacent buffers, `total` keys) by one SBUF-to-SBUF
  // transposing DMA.
  void DmaTransposeP(int base, int n, int64_t total, int64_t qsz) {
    std::vector<int32_t> deps;
    for (int i = base; i < base + n; ++i) {
      deps.push_back(p_ready_[i]);
      deps.push_back(p_reader_[p_buf_[i]]);
    }
    sim::Instruction tr = sim::MakeDma(Op::kDmaCopy, int(qsz), total * p_.in_bytes, kQueueP);
    tr.transpose = true;
    const int32_t id = c_->Add(tr, deps);
    for (int i = base; i < base + n; ++i) pt_ready_[i] = p_reader_[p_buf_[i]] = id;
  }

  // P^T of one tile through TensorE (128-key chunks into the P^T bank), then one eviction.
  void TensorTransposeP(int i, const KvTile& tile, int64_t qsz) {
    const int64_t chunks = CeilDiv(tile.size, 128);
    const int kvp = int(std::min<int64_t>(128, tile.size));
    const int buf = p_buf_[i];
    int32_t last = -1;
    for (int64_t c = 0; c < chunks; ++c) {
      const int csz = int(std::min<int64_t>(128, tile.size - c * 128));
      last = Transpose(int(qsz), csz, {p_ready_[i], pt_reader_});
    }
    pt_ready_[i] = pt_reader_ = Evict(kvp, int(chunks * qsz), last, p_reader_[buf]);
    p_reader_[buf] = pt_ready_[i];
  }

  EngineKind StatsEngine() const {
    return p_.stats_scalar ? EngineKind::kScalar : EngineKind::kVector;
  }

  int32_t Transpose(int partitions, int free, std::initializer_list<int32_t> deps) {
    sim::Instruction tr;
    tr.op = Op::kTranspose;
    tr.engine = EngineKind::kTensor;
    tr.partitions = int16_t(partitions);
    tr.free = free;
    tr.in0 = Mem::kSbuf;
    tr.out = Mem::kPsum;
    tr.dtype = p_.dtype;
    return c_->Add(tr, deps);
  }

  int32_t Evict(int partitions, int free, int32_t dep, int32_t war) {
    sim::Instruction ev = sim::MakeEngineOp(Op::kTensorCopy, NextEvictEngine(), free, partitions,
                                            Mem::kPsum, Mem::kSbuf);
    ev.dtype = DType::kFp32;
    return c_->Add(ev, {dep, war});
  }

  // Broadcasts a per-query column [qsz, 1] over the head_dim partitions of the O^T layout:
  // transpose to a row, evict it, then a K=1 matmul with a ones row lands [d, qsz] in PSUM.
  int32_t Broadcast(int qsz, int32_t dep) {
    const int32_t tr = Transpose(qsz, 1, {dep, tr_reader_});
    const int32_t row = Evict(1, qsz, tr, -1);
    sim::Instruction mm = sim::MakeMatmul(DType::kFp32, 1, int(p_.d), qsz);
    return c_->Add(mm, {row});
  }

  // Writers and last readers of a member's running statistics (WAR hazards across the
  // pipelined steps).
  struct StatIds {
    int32_t m = -1, m_reader = -1, neg = -1, neg_reader = -1, l = -1;
    // Two-pass softmax: the row-sum columns written so far and the last writer (one engine
    // writes them all, in order).
    int32_t sum_last = -1, sums = 0;
    // Two-pass softmax: likewise the tile maxima of the max pass (VectorE writes them all).
    int32_t max_last = -1, maxes = 0;
    // exp_layout=st: diag(-m) and its last reader.
    int32_t m_diag = -1, m_diag_reader = -1;
    std::array<int32_t, 2> alpha_reader{-1, -1};
  };
  // The per-query-tile state of a group member.
  struct Member {
    int32_t q_ready = -1, q8_ready = -1, stats = -1, oacc = -1, last_pv = -1;
    std::array<int32_t, 2> alpha{-1, -1};
    StatIds ids;
    int q_buf = 0;
    std::array<int, kSlots> slot{}, p_buf{};
    std::array<int32_t, kSlots> s_ready{}, max{}, p_ready{}, sum{}, pt_ready{};
    std::array<Mem, kSlots> src{};
    std::array<bool, kSlots> src_bf16{};
  };
  void Save(Member& m) const {
    m = Member{q_ready_, q8_ready_, stats_, oacc_,    last_pv_, alpha_,    ids_, q_buf_,   slot_,
               p_buf_,   s_ready_,  max_,   p_ready_, sum_,     pt_ready_, src_, src_bf16_};
  }
  void Load(const Member& m) {
    q_ready_ = m.q_ready, q8_ready_ = m.q8_ready, stats_ = m.stats, alpha_ = m.alpha, ids_ = m.ids;
    oacc_ = m.oacc, last_pv_ = m.last_pv, q_buf_ = m.q_buf, slot_ = m.slot, p_buf_ = m.p_buf;
    s_ready_ = m.s_ready, max_ = m.max, p_ready_ = m.p_ready, sum_ = m.sum;
    pt_ready_ = m.pt_ready, src_ = m.src, src_bf16_ = m.src_bf16;
  }

  const Plan& p_;
  const sim::Target& target_;
  ProgramT* program_;
  std::remove_reference_t<decltype(std::declval<ProgramT&>().cores[0])>* c_ = nullptr;
  std::vector<Member> members_;
  int current_ = 0;
  std::vector<int32_t> kv_reader_, k_ready_, v_ready_, s_reader_, p_reader_;
  std::vector<int> kv_buf_of_tile_;
  std::array<int32_t, kStagingBufs> stage_reader_{};
  std::vector<int32_t> q_reader_;
  int64_t kv_count_ = 0, s_count_ = 0, p_count_ = 0, evict_count_ = 0;
  int64_t pt_count_ = 0;         // P^T tiles made so far (p_transpose split)
  int s_base_ = 0, p_base_ = 0;  // first score bank / P buffer of the step being emitted
  int64_t q_count_ = 0;
  int q_buf_ = 0, stage_count_ = 0;
  int32_t q_ready_ = -1, tr_reader_ = -1, pt_reader_ = -1, st_reader_ = -1;
  int32_t q8_ready_ = -1;     // max_dtype=fp8: the member's fp8 Q^T
  int32_t mask_ready_ = -1;   // mask=matmul: the constants
  int32_t ones_ready_ = -1;   // exp_layout=st: V's ones columns
  int32_t ident_ready_ = -1;  // exp_layout=st: the identity and ones tiles
  bool st_ = false;           // emitting the exp pass in the S^T layout (SetPass)
  bool fp8_ = false;          // emitting the max pass with max_dtype=fp8 (SetPass)
  // max_dtype=fp8, per K buffer: its fp8 copy (-1: not made yet), the copy's WAR dependency and
  // the tile's keys.
  std::vector<int32_t> k8_ready_, k8_war_, k8_size_;
  std::vector<int32_t> o_reader_;                  // per output PSUM bank: its last reader
  int32_t stats_ = -1, oacc_ = -1, last_pv_ = -1;  // stats_: the last op touching the stats
  std::array<int32_t, 2> alpha_{-1, -1};           // per phase
  StatIds ids_;
  // Per tile of the two softmax steps in flight (phase x kv_block + tile).
  std::array<int, kSlots> slot_{}, p_buf_{};
  std::array<int32_t, kSlots> s_ready_{}, max_{}, p_ready_{}, sum_{}, pt_ready_{};
  std::array<Mem, kSlots> src_{};
  std::array<bool, kSlots> src_bf16_{};
};

float RoundBf16(float x) { return RoundToDType(x, DType::kBf16); }

// Executes schedule steps on the CPU with the hardware's precisions: fp32 PSUM, scores rounded to
// bf16 when they pass through SBUF as bf16, P rounded to the input dtype before PV, fp32 running
// statistics and accumulator, output rounded to the output dtype.
class CpuEmitter {
 public:
  CpuEmitter(const Plan& plan, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>* o)
      : p_(plan), q_(q), k_(k), v_(v), o_(o) {
    const size_t n = size_t(2 * p_.kv_block);  // two phases, as in the lowering
    s_.assign(n, std::vector<float>(p_.bq * p_.kv_tile));
    pm_.assign(n, std::vector<float>(p_.bq * p_.kv_tile));
    tile_max_.assign(n, std::vector<float>(p_.bq));
    tile_sum_.assign(n, std::vector<float>(p_.bq));
    m_.assign(p_.bq, kNegInf);
    l_.assign(p_.bq, 0);
    alpha_.assign(2 * p_.bq, 0);
    o_psum_.assign(p_.bq * p_.d, 0);
    o_acc_.assign(p_.bq * p_.d, 0);
    members_.resize(2 * p_.q_group);  // two groups may be in flight
    for (Member& m : members_) {
      m.s = s_, m.pm = pm_, m.tile_max = tile_max_, m.tile_sum = tile_sum_;
      m.m = m_, m.l = l_, m.alpha = alpha_, m.o_psum = o_psum_, m.o_acc = o_acc_;
    }
    if (p_.max_fp8) {  // the max pass's fp8 copies of Q and K, rounded once
      auto fp8 = [](float x) { return RoundToDType(x, DType::kFp8); };
      q8_.resize(q_.size());
      k8_.resize(k_.size());
      std::transform(q_.begin(), q_.end(), q8_.begin(), fp8);
      std::transform(k_.begin(), k_.end(), k8_.begin(), fp8);
    }
  }

  void BeginCore(int) {}
  void BeginHead(int64_t h) { h_ = h; }
  void Select(int g) {
    if (g == current_) return;
    Swap(members_[current_]);
    Swap(members_[g]);
    current_ = g;
  }
  void LoadKv(int64_t, int64_t, int64_t) {}
  void LoadQ(int64_t i0, int64_t) {
    i0_ = i0;
    std::fill(m_.begin(), m_.end(), kNegInf);
    std::fill(l_.begin(), l_.end(), 0.0f);
  }

  void SetPass(int pass) {
    st_ = p_.st && pass == 2;
    fp8_ = p_.max_fp8 && pass == 1;
  }

  void Scores(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    // max_dtype=fp8: the max pass multiplies fp8 copies.
    const float* q = &(fp8_ ? q8_ : q_)[(h_ * p_.sq + i0) * p_.d];
    const float* k = &(fp8_ ? k8_ : k_)[(h_ * p_.sk + tile.j0) * p_.d];
    // S^T evicted as bf16 (qk_role=k), except in the exp pass's S^T layout, which accumulates
    // the bf16 -m (ones x diag(-m)) onto the fp32 scores instead.
    const bool round = p_.qk_k && p_.dtype != DType::kFp32 && !st_;
    for (int64_t r = 0; r < qsz; ++r) {
      const float bias = st_ ? RoundBf16(-m_[r]) : 0.0f;
      for (int64_t c = 0; c < tile.size; ++c) {
        float acc = 0;
        for (int64_t x = 0; x < p_.d; ++x) acc += q[r * p_.d + x] * k[c * p_.d + x];
        if (st_) acc += bias;
        s_[i][r * p_.kv_tile + c] = round ? RoundBf16(acc) : acc;
      }
    }
  }

  void Prepare(int i, const KvTile& tile, int64_t i0, int64_t qsz) {
    const bool round = p_.src_sbuf && p_.dtype != DType::kFp32;
    for (int64_t r = 0; r < qsz; ++r) {
      for (int64_t c = 0; c < tile.size; ++c) {
        float& s = s_[i][r * p_.kv_tile + c];
        const bool masked = tile.masked && tile.j0 + c > i0 + r + p_.offset();
        if (masked && p_.mask_matmul) s += kMaskValue;  // fp32 PSUM accumulation
        if (round) s = RoundBf16(s);
        if (masked && !p_.mask_matmul) s = kNegInf;
      }
    }
  }

  void RowMax(int i, const KvTile& tile, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = kNegInf;
      for (int64_t c = 0; c < tile.size; ++c) mx = std::max(mx, s_[i][r * p_.kv_tile + c]);
      tile_max_[i][r] = mx;
    }
  }

  void RowMaxStep(int base, const std::vector<KvTile>& tiles, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = kNegInf;
      for (size_t t = 0; t < tiles.size(); ++t) {
        for (int64_t c = 0; c < tiles[t].size; ++c) {
          mx = std::max(mx, s_[base + t][r * p_.kv_tile + c]);
        }
      }
      tile_max_[base][r] = mx;
    }
  }

  void CombineStats(int, bool, int64_t) {}
  // The max is exact, so combining per step or once (deferred) gives the same m.
  void FinalMax(int64_t) {}
  void CombineMax(int phase, int base, int n, bool, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float mx = m_[r];
      for (int i = base; i < base + n; ++i) mx = std::max(mx, tile_max_[i][r]);
      alpha_[phase * p_.bq + r] = m_[r] == kNegInf ? 0.0f : std::exp(p_.scale * (m_[r] - mx));
      m_[r] = mx;
    }
  }

  void Exp(int i, const KvTile& tile, int64_t qsz) { ExpTiles(i, &tile, 1, qsz); }
  void ExpStep(int base, const std::vector<KvTile>& tiles, int64_t qsz) {
    ExpTiles(base, tiles.data(), tiles.size(), qsz);
  }

  void UpdateSum(int phase, int base, int n, bool first, bool rescale, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      float partial = 0;
      for (int i = base; i < base + n; ++i) partial += tile_sum_[i][r];
      l_[r] = (first ? 0.0f : rescale ? l_[r] * alpha_[phase * p_.bq + r] : l_[r]) + partial;
    }
  }

  void TransposeP(int, const KvTile&, int64_t) {}
  void TransposePStep(int, const std::vector<KvTile>&, int64_t) {}

  // P of `n` tiles from slot `base` on, with one running row sum (into tile_sum_[base]) in the
  // order one instruction accumulates it.
  void ExpTiles(int base, const KvTile* tiles, size_t n, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      // (S^T layout: -m is already in the scores; the row sums come from PV with a ones
      // column, so they add the rounded P.)
      const float bias = st_ || m_[r] == kNegInf ? 0.0f : -p_.scale * m_[r];
      const bool sum_rounded = p_.sum_vector || st_;
      float sum = 0;
      for (size_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < tiles[t].size; ++c) {
          const float e = std::exp(p_.scale * s_[base + t][r * p_.kv_tile + c] + bias);
          const float rounded = RoundToDType(e, p_.dtype);
          pm_[base + t][r * p_.kv_tile + c] = rounded;
          sum += sum_rounded ? rounded : e;  // the activation accumulates before rounding
        }
      }
      tile_sum_[base][r] = sum;
    }
  }

  void Pv(int i, const KvTile& tile, int64_t c0, int64_t csz, int64_t qsz, bool start) {
    if (start) std::fill(o_psum_.begin(), o_psum_.end(), 0.0f);
    const float* v = &v_[(h_ * p_.sk + tile.j0 + c0) * p_.d];
    for (int64_t r = 0; r < qsz; ++r) {
      float* o = &o_psum_[r * p_.d];
      for (int64_t c = 0; c < csz; ++c) {
        const float pv = pm_[i][r * p_.kv_tile + c0 + c];
        for (int64_t x = 0; x < p_.d; ++x) o[x] += pv * v[c * p_.d + x];
      }
    }
  }

  void Rescale(int phase, bool first, bool rescale, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      for (int64_t x = 0; x < p_.d; ++x) {
        float& acc = o_acc_[r * p_.d + x];
        const float add = o_psum_[r * p_.d + x];
        acc = first ? add : (rescale ? acc * alpha_[phase * p_.bq + r] : acc) + add;
      }
    }
  }

  void Finish(int64_t i0, int64_t qsz) {
    for (int64_t r = 0; r < qsz; ++r) {
      const float inv = 1.0f / l_[r];
      // softmax=two_pass: O was accumulated in PSUM over the whole exp pass.
      const std::vector<float>& o = p_.two_pass ? o_psum_ : o_acc_;
      for (int64_t x = 0; x < p_.d; ++x) {
        float out = o[r * p_.d + x] * inv;
        out = RoundToOutput(out, p_.dtype);
        (*o_)[(h_ * p_.sq + i0 + r) * p_.d + x] = out;
      }
    }
  }

 private:
  const Plan& p_;
  const std::vector<float>& q_;
  const std::vector<float>& k_;
  std::vector<float> q8_, k8_;  // max_dtype=fp8: q_ and k_ rounded to fp8
  const std::vector<float>& v_;
  std::vector<float>* o_;
  struct Member {
    std::vector<std::vector<float>> s, pm, tile_max, tile_sum;
    std::vector<float> m, l, alpha, o_psum, o_acc;
  };
  // Exchanges the working state with `m` (O(1): vectors are swapped, not copied).
  void Swap(Member& m) {
    s_.swap(m.s), pm_.swap(m.pm), tile_max_.swap(m.tile_max), tile_sum_.swap(m.tile_sum);
    m_.swap(m.m), l_.swap(m.l), alpha_.swap(m.alpha), o_psum_.swap(m.o_psum);
    o_acc_.swap(m.o_acc);
  }

  int64_t h_ = 0, i0_ = 0;
  std::vector<std::vector<float>> s_, pm_, tile_max_, tile_sum_;
  std::vector<float> m_, l_, alpha_, o_psum_, o_acc_;
  std::vector<Member> members_;
  int current_ = 0;
  bool st_ = false;   // the exp pass in the S^T layout (SetPass)
  bool fp8_ = false;  // the max pass with max_dtype=fp8 (SetPass)
};

}  // namespace

void SetAttentionFaultForTesting(AttentionFault fault) { g_fault = fault; }

absl::Status AttentionKernel::ValidateProblem(const Problem& problem,
                                              const sim::Target& target) const {
  const std::vector<std::string> names = dims();
  for (const auto& [name, value] : problem.dims.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(StrCat(
          "attention has dims batch, heads, seq_q, seq_k, head_dim, causal; got unknown dim ",
          name));
    }
    if (value <= 0) return absl::InvalidArgumentError(StrCat("dim ", name, " must be positive"));
  }
  for (const std::string& name : names) {
    if (!problem.dims.Has(name)) {
      return absl::InvalidArgumentError(
          StrCat("attention needs dim ", name, " (batch, heads, seq_q, seq_k, head_dim, causal)"));
    }
  }
  const int64_t causal = *problem.dims.Get("causal");
  if (causal != 1 && causal != 2) {
    return absl::InvalidArgumentError(
        StrCat("causal=", causal, ": use causal=1 for a causal mask, causal=2 for none"));
  }
  if (causal == 1 && *problem.dims.Get("seq_q") > *problem.dims.Get("seq_k")) {
    return absl::InvalidArgumentError(
        "causal attention needs seq_q <= seq_k: with the bottom-right aligned mask the first "
        "queries would see no key");
  }
  if (target.systolic) {
    return absl::InvalidArgumentError(StrCat(
        "attention needs a neuron target (engines, SBUF, PSUM); ", target.name, " is systolic"));
  }
  if (target.matmul_max_k > 0 && *problem.dims.Get("head_dim") > target.matmul_max_k) {
    return absl::InvalidArgumentError(StrCat(
        "head_dim=", *problem.dims.Get("head_dim"), " exceeds the TensorE contraction limit ",
        target.matmul_max_k, " (head_dim <= ", target.matmul_max_k, " is supported)"));
  }
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok() || (*dtype != DType::kBf16 && *dtype != DType::kFp32 && *dtype != DType::kFp8)) {
    return absl::InvalidArgumentError(
        StrCat("attention dtype must be bf16, fp32 or fp8, not '", problem.dtype, "'"));
  }
  if (!target.SupportsDType(*dtype)) {
    return absl::InvalidArgumentError(
        StrCat("dtype ", problem.dtype, " is not supported by TensorE on ", target.name));
  }
  return absl::OkStatus();
}

namespace {

// The analytic estimate (docs/kernels.md "Analytic estimates"): the schedule's instructions for
// one (batch, head) pair, emitted into a CountingProgram (their costs, no program, no
// simulation), bounded by the slowest resource and multiplied by the pairs of the busiest core.
// Of a head's query groups only about kSampledGroups, evenly spread, are generated, each standing
// for group_stride groups (a causal head's groups grow linearly in work, so evenly spread samples
// keep the sum).
constexpr int64_t kSampledGroups = 4;
std::optional<double> EstimateAttention(const Problem& problem, const Config& config,
                                        const sim::Target& target) {
  absl::StatusOr<Plan> plan = MakePlan(problem, config, target, /*strict=*/true);
  if (!plan.ok()) return std::nullopt;
  const int64_t pairs = CeilDiv(plan->bh, plan->shards);
  Plan one = *plan;
  one.bh = 1;
  one.shards = 1;
  const int64_t groups = CeilDiv(one.q_tiles, one.q_group);
  one.group_stride = std::max<int64_t>(1, groups / kSampledGroups);
  int64_t sampled = 0;
  for (int64_t g = 0; g < groups; ++g) sampled += g % one.group_stride == one.group_stride / 2;
  CountingProgram program(target);
  SimEmitter emitter(one, target, &program);
  program.cores.resize(1);  // Generate's BeginCore keeps it
  CountingCore& core = program.cores[0];
  core.set_weight(double(groups) / double(sampled));
  Generate(one, emitter);
  if (one.resident && one.group_stride > 1) {  // once per head, not per group
    core.set_weight(1);
    for (int64_t t = 0; t < one.kv_tiles; ++t) {
      emitter.LoadKv(t, t * one.kv_tile, std::min(one.kv_tile, one.sk - t * one.kv_tile));
    }
  }
  return double(pairs) * core.BoundNs(plan->shards);
}

}  // namespace

absl::StatusOr<Space> AttentionKernel::SpaceFor(const Problem& problem,
                                                const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  std::vector<std::string> skip = {"0"}, mask = {"select"};
  if (*problem.dims.Get("causal") == 1) skip.push_back("1"), mask.push_back("matmul");
  std::vector<Param> params = {
      {"block_q", {"32", "64", "128"}, "query rows per tile"},
      {"kv_tile", {"128", "256", "512"}, "key columns per score tile"},
      {"kv_block", {"1", "2", "4"}, "score tiles per online-softmax step"},
      {"q_group", {"1", "2", "4"}, "query tiles processed together, their steps interleaved"},
      {"qk_role", {"q", "k"}, "stationary operand of QK^T (k: S^T transposed back)"},
      {"pv_role", {"p", "v"}, "stationary operand of PV (v: O^T accumulates)"},
      {"qk_transpose", {"dma", "tensor"}, "how Q^T and K^T are made"},
      {"p_transpose",
       {"tensor", "dma", "half", "two_thirds"},
       "how P^T is made: TensorE, transposing DMA, or that share of the tiles by DMA"},
      {"softmax_src", {"psum", "sbuf"}, "where max and exp read the scores"},
      {"sum_engine", {"scalar", "vector"}, "row sums: exp accumulation or a Vector reduction"},
      {"stats_engine", {"vector", "scalar"}, "engine of the small running max/sum updates"},
      {"evict", {"vector", "scalar", "split", "gpsimd"}, "engine evicting PSUM"},
      {"kv_resident", {"0", "1"}, "1: a head's K^T and V stay in SBUF"},
      {"bufs", {"1", "2"}, "rotating buffers for K/V and score tiles"},
      {"causal_skip", skip, "1: skip score tiles above the diagonal"},
      {"pipeline",
       {"0", "1", "2", "3", "4"},
       "1: next QK^T before this PV; 2: next softmax too; 3: this P^T, then next softmax; "
       "4 (two_pass): the QK^T after next and the next softmax"},
      {"softmax_ops", {"tile", "step"}, "max and exp per score tile or per softmax step"},
      {"mask", mask, "causal mask: select (evict, GpSimd affine_select) or matmul (into PSUM)"},
      {"exp_layout",
       {"s", "st"},
       "two_pass exp pass: S then P^T by transposes, or S^T (P^T directly, -m by ones x diag(-m))"},
      {"max_dtype",
       {"input", "fp8"},
       "two_pass max pass QK^T: input dtype, or fp8 copies (2x TensorE rate; the max may be off)"},
      {"softmax",
       {"online", "two_pass"},
       "online: running max, rescaled output; two_pass: a max pass, then exp and PV (QK^T twice)"},
      {"shards", ShardValues(target), "cores the batch x heads pairs are split over"},
  };
  Problem p = problem;
  sim::Target t = target;
  Space space(std::move(params), [p, t](const Config& config) -> absl::Status {
    absl::StatusOr<Plan> plan = MakePlan(p, config, t, /*strict=*/true);
    return plan.ok() ? absl::OkStatus() : plan.status();
  });
  space.set_estimate([p, t](const Config& config) { return EstimateAttention(p, config, t); });
  return space;
}

Config AttentionKernel::Default(const Problem& problem, const sim::Target& target) const {
  // A plain compiler: full tiles, one score tile per softmax step, textbook roles (Q^T and P^T
  // stationary), DMA transposes for Q/K, TensorE for P, separate reductions on Vector, every
  // eviction on Vector, masking instead of skipping, one core. Smaller tiles only where the
  // problem is smaller than a tile (the redundancy rules would reject the full one).
  Config c{{"block_q", "128"},         {"q_group", "1"},
           {"kv_tile", "512"},         {"kv_block", "1"},
           {"qk_role", "q"},           {"pv_role", "p"},
           {"qk_transpose", "dma"},    {"p_transpose", "tensor"},
           {"softmax_src", "psum"},    {"sum_engine", "vector"},
           {"stats_engine", "vector"}, {"evict", "vector"},
           {"kv_resident", "0"},       {"bufs", "2"},
           {"causal_skip", "0"},       {"pipeline", "0"},
           {"softmax_ops", "tile"},    {"softmax", "online"},
           {"mask", "select"},         {"exp_layout", "s"},
           {"max_dtype", "input"},     {"shards", "1"}};
  absl::StatusOr<Space> space = SpaceFor(problem, target);
  if (!space.ok()) return c;
  for (const char* bq : {"128", "64", "32"}) {
    for (const char* kv : {"512", "256", "128"}) {
      c.Set("block_q", bq);
      c.Set("kv_tile", kv);
      if (space->Validate(c).ok()) return c;
    }
  }
  return c;
}

absl::StatusOr<sim::Program> AttentionKernel::Lower(const Problem& problem, const Config& config,
                                                    const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  absl::StatusOr<Plan> plan = MakePlan(problem, config, target, /*strict=*/true);
  if (!plan.ok()) return plan.status();
  sim::Program program;
  program.name = StrCat("attention ", problem.dims.ToString(), " ", problem.dtype, " [",
                        config.ToString(), "]");
  SimEmitter emitter(*plan, target, &program);
  Generate(*plan, emitter);
  return program;
}

absl::Status AttentionKernel::Verify(const Problem& problem, const Config& config,
                                     const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  absl::StatusOr<Plan> full = MakePlan(problem, config, target, /*strict=*/true);
  if (!full.ok()) return full.status();
  // Reduced problem: one more (batch, head) pair than cores, at most two query tiles and two
  // softmax steps of keys (tails kept), the same causal offset where it fits.
  Plan plan = *full;
  plan.bh = std::min(plan.bh, int64_t(plan.shards) + 1);
  plan.sq = ReducedDim(full->sq, plan.bq, 2);
  plan.sk = ReducedDim(full->sk, plan.kv_tile * plan.kv_block, 2);
  if (plan.causal) plan.sk = std::max(plan.sk, std::min(full->sk, plan.sq + full->offset()));
  if (plan.causal) plan.sk = std::max(plan.sk, plan.sq);
  plan.Derive();
  if (plan.shards > plan.bh) plan.shards = int(plan.bh);
  const Dims reduced{
      {"batch_x_heads", plan.bh}, {"seq_q", plan.sq}, {"seq_k", plan.sk}, {"head_dim", plan.d}};

  std::mt19937_64 rng(std::hash<std::string>()(config.ToString()) ^
                      uint64_t(plan.sq * 131 + plan.sk * 7 + plan.bh));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(plan.bh * plan.sq * plan.d), k(plan.bh * plan.sk * plan.d),
      v(plan.bh * plan.sk * plan.d);
  // Larger query magnitudes make the running max move between steps, exercising the rescale.
  for (float& x : q) x = RoundToDType(3.0f * uniform(rng), plan.dtype);
  for (float& x : k) x = RoundToDType(uniform(rng), plan.dtype);
  for (float& x : v) x = RoundToDType(uniform(rng), plan.dtype);
  std::vector<float> o(plan.bh * plan.sq * plan.d, std::numeric_limits<float>::quiet_NaN());
  CpuEmitter emitter(plan, q, k, v, &o);
  Generate(plan, emitter);

  // Plain reference in double. Tolerance: the probabilities' rounding to the input dtype (and
  // the scores' bf16 rounding) relative to max |V|, plus the output rounding.
  const double p_eps = plan.dtype == DType::kFp32 ? 1e-5 : plan.dtype == DType::kFp8 ? 0.08 : 0.012;
  const double out_eps = plan.dtype == DType::kFp32 ? 1e-6 : std::ldexp(1.0, -8);
  std::vector<double> s(plan.sk), ref(plan.d);
  for (int64_t h = 0; h < plan.bh; ++h) {
    double v_max = 0;
    for (int64_t j = 0; j < plan.sk * plan.d; ++j) {
      v_max = std::max(v_max, double(std::abs(v[h * plan.sk * plan.d + j])));
    }
    for (int64_t i = 0; i < plan.sq; ++i) {
      const int64_t visible = plan.causal ? std::min(plan.sk, i + plan.offset() + 1) : plan.sk;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < plan.d; ++x) {
          dot += double(q[(h * plan.sq + i) * plan.d + x]) * k[(h * plan.sk + j) * plan.d + x];
        }
        s[j] = dot * plan.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      std::fill(ref.begin(), ref.end(), 0.0);
      for (int64_t j = 0; j < visible; ++j) {
        const double p = std::exp(s[j] - mx);
        sum += p;
        for (int64_t x = 0; x < plan.d; ++x) ref[x] += p * v[(h * plan.sk + j) * plan.d + x];
      }
      for (int64_t x = 0; x < plan.d; ++x) {
        const double want = ref[x] / sum;
        const double got = o[(h * plan.sq + i) * plan.d + x];
        const double tol = p_eps * v_max + out_eps * std::abs(want) + 1e-30;
        if (!(std::abs(got - want) <= tol)) {
          return absl::DataLossError(
              StrCat("attention wrong answer at O[", h, ",", i, ",", x, "] of the reduced problem ",
                     reduced.ToString(), ": got ", got, ", want ", want, " (tolerance ", tol, ")"));
        }
      }
    }
  }
  return absl::OkStatus();
}

Kernel::Work AttentionKernel::MinimumWork(const Problem& problem) const {
  const double bh =
      double(problem.dims.Get("batch").value_or(0)) * double(problem.dims.Get("heads").value_or(0));
  const int64_t sq = problem.dims.Get("seq_q").value_or(0);
  const int64_t sk = problem.dims.Get("seq_k").value_or(0);
  const double d = double(problem.dims.Get("head_dim").value_or(0));
  const bool causal = problem.dims.Get("causal").value_or(2) == 1;
  // (query, key) pairs the mask keeps: query i sees min(sk, i + sk - sq + 1) keys.
  double pairs = double(sq) * double(sk);
  if (causal) {
    pairs = 0;
    for (int64_t i = 0; i < sq; ++i) {
      pairs += double(std::clamp<int64_t>(i + sk - sq + 1, 0, sk));
    }
  }
  auto dtype = sim::ParseDType(problem.dtype);
  const double in_bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  const double out_bytes = dtype.ok() ? OutputBytes(*dtype) : 2;
  // QK^T and PV: 2 flops per multiply-add each.
  return Work{4 * bh * pairs * d,
              bh * ((double(sq) + 2 * double(sk)) * d * in_bytes + double(sq) * d * out_bytes)};
}

}  // namespace tessel::kernels

#include "kernels/attention_plan.h"

#include <algorithm>

#include "schema/strings.h"

namespace tessel::kernels {
namespace attention_internal {
namespace {

AttentionFault g_fault = AttentionFault::kNone;

}  // namespace

AttentionFault Fault() { return g_fault; }

namespace {

absl::StatusOr<bool> GetChoice(const Config& config, const char* name, const char* yes,
                               const char* no) {
  std::optional<std::string_view> v = config.Get(name);
  if (!v || (*v != yes && *v != no)) {
    return absl::InvalidArgumentError(StrCat(name, " must be ", yes, " or ", no));
  }
  return *v == yes;
}

}  // namespace

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
                      {"q_group", &p.q_group, 1, kMaxQGroup},
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
  if (p.pv_v && p.bq * 4 > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError("pv_role=v: an O^T tile exceeds one PSUM bank");
  }
  if (p.pt_bytes(target) > target.psum_bank_bytes_per_partition) {
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

}  // namespace attention_internal

void SetAttentionFaultForTesting(AttentionFault fault) { attention_internal::g_fault = fault; }

}  // namespace tessel::kernels

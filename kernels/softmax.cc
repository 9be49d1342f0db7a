#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/lowering/verify_util.h"
#include "kernels/rowwise.h"
#include "kernels/rowwise_kernel.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

using rowwise::Fn;
using rowwise::Kind;
using rowwise::Ref;
using rowwise::Step;
using sim::DType;
using sim::EngineKind;

SoftmaxFault g_fault = SoftmaxFault::kNone;

constexpr int kQueueLoad = 0, kQueueStore = 1;
constexpr int kStatSlots = 2;      // row tiles whose statistics are live at once
constexpr int kStatsPerSlot = 16;  // stat buffers per slot (see Stat below)
constexpr int32_t kDataBase = 1000;

using rowwise::kChunks;
using rowwise::kRowsPerPartition;
using rowwise::kTileRows;

// Per-row statistics of one row tile (buffer ids within a stat slot).
enum Stat : int32_t { kMax, kMaxNext, kPartial, kNegMax, kSum, kPartialSum, kRecip, kDiff, kCorr };

struct Plan : rowwise::RowTiling {
  DType dtype = DType::kBf16;
  int in_bytes = 2;
  bool online = false, scale_on_scalar = false;
  DType exp_dtype = DType::kFp32;
};

int64_t DataBytes(const Plan& p) { return std::max(p.in_bytes, sim::DTypeBytes(p.exp_dtype)); }

std::vector<sim::Allocation> Allocations(const Plan& p) {
  const int parts = int(p.tile_rows);
  std::vector<sim::Allocation> a;
  if (p.resident) {
    a.push_back(
        {"row_tiles", sim::Mem::kSbuf, 0, parts, p.g * p.chunks * p.chunk * DataBytes(p), p.bufs});
  } else {
    a.push_back({"chunks", sim::Mem::kSbuf, 0, parts, p.g * p.chunk * DataBytes(p), p.bufs});
  }
  a.push_back({"row_stats", sim::Mem::kSbuf, 0, parts,
               kStatsPerSlot * p.g * std::max<int64_t>(p.chunks, 1) * 4, kStatSlots});
  return a;
}

int64_t SbufBytes(const Plan& p) { return rowwise::SbufBytes(Allocations(p)); }

absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  absl::StatusOr<DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  p.dtype = *dtype;
  p.in_bytes = sim::DTypeBytes(p.dtype);
  if (absl::Status s = rowwise::ParseRowTiling(problem, config, p); !s.ok()) return s;
  absl::StatusOr<std::string> algorithm =
      ChoiceParam(config, "algorithm", {"multi_pass", "online"});
  if (!algorithm.ok()) return algorithm.status();
  absl::StatusOr<std::string> scale = ChoiceParam(config, "scale_engine", {"vector", "scalar"});
  if (!scale.ok()) return scale.status();
  absl::StatusOr<std::string> exp_dtype = ChoiceParam(config, "exp_dtype", {"fp32", "bf16"});
  if (!exp_dtype.ok()) return exp_dtype.status();
  p.online = *algorithm == "online";
  p.scale_on_scalar = *scale == "scalar";
  p.exp_dtype = *exp_dtype == "bf16" ? DType::kBf16 : DType::kFp32;

  if (p.exp_dtype == DType::kBf16 && p.dtype != DType::kBf16) {
    return absl::InvalidArgumentError(
        StrCat("exp_dtype=bf16 would drop below the precision of the ", problem.dtype, " output"));
  }
  if (absl::Status s = rowwise::CheckRowTiling(p, target, strict); !s.ok()) return s;
  if (p.chunks == 1 && p.online) {
    return absl::InvalidArgumentError(StrCat("algorithm=online needs more than one chunk: chunk=",
                                             p.chunk, " already holds all ", p.cols, " columns"));
  }
  const int64_t sbuf = SbufBytes(p);
  if (sbuf > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(
        StrCat("SBUF capacity: ", p.resident ? "resident row tiles " : "chunk buffers ",
               p.g * (p.resident ? p.chunks * p.chunk : p.chunk) * DataBytes(p), " x ", p.bufs,
               " bufs + row statistics = ", sbuf, " bytes per partition exceed the usable ",
               target.UsableSbufPerPartition()));
  }
  return p;
}

// Walks the schedule and hands each step to `sink`.
template <typename Sink>
void Generate(const Plan& p, Sink& sink) {
  const int64_t nc = p.chunks;
  for (int core = 0; core < p.shards; ++core) {
    const int64_t tb = ShardBegin(p.tiles, p.shards, core);
    const int64_t te = ShardBegin(p.tiles, p.shards, core + 1);
    sink.BeginCore(core, Allocations(p));
    int64_t stream = 0;  // streaming buffer rotation
    for (int64_t t = tb; t < te; ++t) {
      const int64_t row0 = t * p.rows_per_tile;
      const int64_t rows = std::min(p.rows_per_tile, p.rows - row0);
      const int32_t stat_base = int32_t((t % kStatSlots) * kStatsPerSlot);
      auto stat = [&](Stat s, int32_t col = 0) { return Ref{stat_base + s, col}; };
      auto width = [&](int64_t j) { return std::min(p.chunk, p.cols - j * p.chunk); };
      auto step = [&](Kind kind, EngineKind engine) {
        Step s;
        s.kind = kind;
        s.engine = engine;
        s.core = core;
        s.row0 = row0;
        s.rows = rows;
        s.in_dtype = DType::kFp32;
        s.out_dtype = DType::kFp32;
        return s;
      };
      auto data = [&](int64_t j) {
        return p.resident ? Ref{int32_t(kDataBase + (t % p.bufs) * nc + j), 0}
                          : Ref{int32_t(kDataBase + (stream++ % p.bufs)), 0};
      };
      auto load = [&](Ref buf, int64_t j) {
        Step s = step(Kind::kLoad, EngineKind::kDma);
        s.dst = buf;
        s.col0 = j * p.chunk;
        s.width = width(j);
        s.in_dtype = p.dtype;
        s.queue = kQueueLoad;
        // Rows are contiguous in HBM only when a chunk holds the whole row.
        s.chunk_bytes = nc > 1 ? int32_t(s.width * p.in_bytes) : 0;
        sink(s);
      };
      auto reduce = [&](Fn fn, Ref src, DType in, int64_t w, Ref dst) {
        Step s = step(Kind::kReduce, EngineKind::kVector);
        s.fn = fn;
        s.src = src;
        s.dst = dst;
        s.width = w;
        s.in_dtype = in;
        sink(s);
      };
      auto stat_op = [&](Fn fn, Ref a, Ref b, Ref dst, int64_t w = 1) {
        Step s = step(Kind::kTensorTensor, EngineKind::kVector);
        s.fn = fn;
        s.src = a;
        s.src1 = b;
        s.dst = dst;
        s.width = w;
        sink(s);
      };
      auto negate = [&](Ref src, Ref dst) {
        Step s = step(Kind::kTensorScalar, EngineKind::kVector);
        s.fn = Fn::kMul;
        s.imm0 = -1;
        s.src = src;
        s.dst = dst;
        sink(s);
      };
      // exp(x - max) in place, kept in exp_dtype.
      auto exp_chunk = [&](Ref buf, int64_t j, Ref neg_max) {
        Step s = step(Kind::kActivation, EngineKind::kScalar);
        s.fn = Fn::kExp;
        s.src = buf;
        s.dst = buf;
        s.width = width(j);
        s.in_dtype = p.dtype;
        s.out_dtype = p.exp_dtype;
        s.imm0 = 1;
        s.scalar1 = neg_max;
        sink(s);
      };
      // Adds the chunk's exp sum to the row sum.
      auto sum_chunk = [&](Ref buf, int64_t j) {
        if (j == 0) {
          reduce(Fn::kAdd, buf, p.exp_dtype, width(j), stat(kSum));
          return;
        }
        reduce(Fn::kAdd, buf, p.exp_dtype, width(j), stat(kPartialSum));
        const bool drop =
            g_fault == SoftmaxFault::kDropTailChunkFromSum && j == nc - 1 && p.cols % p.chunk != 0;
        if (!drop) stat_op(Fn::kAdd, stat(kSum), stat(kPartialSum), stat(kSum));
      };
      // buf * scale -> output dtype, in place, then stored.
      auto scale_and_store = [&](Ref buf, int64_t j, Ref scale) {
        Step s = step(p.scale_on_scalar ? Kind::kActivation : Kind::kTensorScalar,
                      p.scale_on_scalar ? EngineKind::kScalar : EngineKind::kVector);
        s.fn = p.scale_on_scalar ? Fn::kCopy : Fn::kMul;
        s.src = buf;
        s.dst = buf;
        s.width = width(j);
        s.in_dtype = p.exp_dtype;
        s.out_dtype = p.dtype;
        s.scalar0 = scale;
        sink(s);
        Step st = step(Kind::kStore, EngineKind::kDma);
        st.src = buf;
        st.col0 = j * p.chunk;
        st.width = width(j);
        st.in_dtype = p.dtype;
        st.out_dtype = p.dtype;
        st.queue = kQueueStore;
        st.chunk_bytes = nc > 1 ? int32_t(st.width * p.in_bytes) : 0;
        sink(st);
      };

      if (!p.online) {
        // Pass 1: row max.
        std::vector<Ref> bufs(nc);
        for (int64_t j = 0; j < nc; ++j) {
          bufs[j] = data(j);
          load(bufs[j], j);
          if (j == 0) {
            reduce(Fn::kMax, bufs[j], p.dtype, width(j), stat(kMax));
          } else {
            reduce(Fn::kMax, bufs[j], p.dtype, width(j), stat(kPartial));
            stat_op(Fn::kMax, stat(kMax), stat(kPartial), stat(kMax));
          }
        }
        negate(stat(kMax), stat(kNegMax));
        // Pass 2: exp and row sum (kept in place when resident).
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = p.resident ? bufs[j] : data(j);
          if (!p.resident) load(buf, j);
          exp_chunk(buf, j, stat(kNegMax));
          sum_chunk(buf, j);
        }
        Step rcp = step(Kind::kReciprocal, EngineKind::kVector);
        rcp.src = stat(kSum);
        rcp.dst = stat(kRecip);
        sink(rcp);
        // Pass 3: normalise (recomputing exp when streaming).
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = p.resident ? bufs[j] : data(j);
          if (!p.resident) {
            load(buf, j);
            exp_chunk(buf, j, stat(kNegMax));
          }
          scale_and_store(buf, j, stat(kRecip));
        }
        continue;
      }

      // Online: running max m and sum s; s is rescaled by exp(m_old - m_new) when m grows. The
      // negated max used for each chunk is kept (column j of kNegMax) for resident rescaling.
      std::vector<Ref> bufs(nc);
      for (int64_t j = 0; j < nc; ++j) {
        bufs[j] = data(j);
        load(bufs[j], j);
        const Ref neg_j = stat(kNegMax, int32_t(j));
        if (j == 0) {
          reduce(Fn::kMax, bufs[j], p.dtype, width(j), stat(kMax));
        } else {
          reduce(Fn::kMax, bufs[j], p.dtype, width(j), stat(kPartial));
          stat_op(Fn::kMax, stat(kMax), stat(kPartial), stat(kMaxNext));
          stat_op(Fn::kSub, stat(kMax), stat(kMaxNext), stat(kDiff));
          Step corr = step(Kind::kActivation, EngineKind::kScalar);
          corr.fn = Fn::kExp;
          corr.imm0 = 1;
          corr.src = stat(kDiff);
          corr.dst = stat(kCorr);
          sink(corr);
          if (g_fault != SoftmaxFault::kSkipOnlineRescale) {
            stat_op(Fn::kMul, stat(kSum), stat(kCorr), stat(kSum));
          }
          Step copy = step(Kind::kTensorScalar, EngineKind::kVector);
          copy.fn = Fn::kMul;
          copy.imm0 = 1;
          copy.src = stat(kMaxNext);
          copy.dst = stat(kMax);
          sink(copy);
        }
        negate(stat(kMax), neg_j);
        exp_chunk(bufs[j], j, neg_j);
        sum_chunk(bufs[j], j);
      }
      Step rcp = step(Kind::kReciprocal, EngineKind::kVector);
      rcp.src = stat(kSum);
      rcp.dst = stat(kRecip);
      sink(rcp);
      if (p.resident) {
        // Factor per chunk: exp(m_j - m) / s, with -m_j in column j and -m in column nc - 1.
        Step d = step(Kind::kTensorScalar, EngineKind::kVector);
        d.fn = Fn::kSub;
        d.src = stat(kNegMax);
        d.scalar0 = stat(kNegMax, int32_t(nc - 1));
        d.dst = stat(kDiff);
        d.width = nc;
        sink(d);
        Step e = step(Kind::kActivation, EngineKind::kScalar);
        e.fn = Fn::kExp;
        e.imm0 = -1;  // exp(-(-m_j + m)) = exp(m_j - m)
        e.src = stat(kDiff);
        e.dst = stat(kCorr);
        e.width = nc;
        sink(e);
        Step f = step(Kind::kTensorScalar, EngineKind::kVector);
        f.fn = Fn::kMul;
        f.src = stat(kCorr);
        f.scalar0 = stat(kRecip);
        f.dst = stat(kCorr);
        f.width = nc;
        sink(f);
        for (int64_t j = 0; j < nc; ++j) scale_and_store(bufs[j], j, stat(kCorr, int32_t(j)));
      } else {
        const Ref neg_final = stat(kNegMax, int32_t(nc - 1));
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = data(j);
          load(buf, j);
          exp_chunk(buf, j, neg_final);
          scale_and_store(buf, j, stat(kRecip));
        }
      }
    }
  }
}

// Verify's run on the reduced problem (rowwise::ReduceForVerify), with inputs rising along each
// row so that the running max grows chunk by chunk.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  Plan plan = full;
  rowwise::ReduceForVerify(plan);
  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.cols * 131));
  const std::vector<float> x = RisingRows(plan.rows, plan.cols, rng, plan.dtype, 3.0f, 6.0f);
  std::vector<float> y = Unwritten(x.size());
  rowwise::CpuSink sink(plan.cols, x, &y, {});
  Generate(plan, sink);

  // Reference in double. bf16: output and exp roundings (2^-8 each) plus slack; fp32: fp32
  // accumulation over the row.
  const double rel = plan.dtype == DType::kFp32
                         ? 1e-6 + 2.0 * double(plan.cols) * std::ldexp(1.0, -24)
                         : std::ldexp(1.0, -6);
  std::vector<double> e(plan.cols);
  for (int64_t r = 0; r < plan.rows; ++r) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < plan.cols; ++c) mx = std::max(mx, double(x[r * plan.cols + c]));
    double sum = 0;
    for (int64_t c = 0; c < plan.cols; ++c) sum += e[c] = std::exp(x[r * plan.cols + c] - mx);
    for (int64_t c = 0; c < plan.cols; ++c) {
      const double want = e[c] / sum;
      const double got = y[r * plan.cols + c];
      const double tol = rel * want + 1e-30;
      if (!Within(got, want, tol)) {
        return WrongAnswer("softmax", StrCat("Y[", r, ",", c, "]"),
                           StrCat("rows=", plan.rows, ",cols=", plan.cols), got, want, tol);
      }
    }
  }
  return absl::OkStatus();
}

std::vector<Param> Params(const Problem&, const sim::Target& target) {
  return rowwise::TilingParams(
      {{"algorithm", {"multi_pass", "online"}, "max/sum/normalise passes or online rescaling"},
       rowwise::ResidentParam(),
       {"scale_engine", {"vector", "scalar"}, "engine of the final multiply by 1/sum"},
       {"exp_dtype", {"fp32", "bf16"}, "dtype exp results are kept in"}},
      target);
}

void Emit(const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
  rowwise::SimSink sink(target, int(plan.g), program);
  Generate(plan, sink);
}

constexpr char kDescription[] =
    "row softmax of X[rows,cols]: row tiles, rows per partition, column chunks, multi-pass vs "
    "online, SBUF residency, normalise engine, exp dtype, buffers, sharding";

}  // namespace

void SetSoftmaxFaultForTesting(SoftmaxFault fault) { g_fault = fault; }

// Version 1: initial lowering.
// (Spec: name, version, description, dims, dtypes; steps: params, plan, emit, verify, estimate.)
SoftmaxKernel::SoftmaxKernel()
    : RowwiseKernel({"softmax", 1, kDescription, {"rows", "cols"}, {"bf16", "fp32"}},
                    Erase(PlanSteps<Plan>{Params, StrictPlan(MakePlan), Emit, RunReduced, nullptr}),
                    /*vectors=*/0) {}

Config SoftmaxKernel::Default(const Problem& problem, const sim::Target&) const {
  // A plain compiler: the plain row tiling, three streaming passes, Vector normalisation, fp32
  // intermediates, one core.
  const rowwise::RowTiling t = rowwise::PlainTiling(problem);
  return rowwise::PlainConfig(t, {{"algorithm", "multi_pass"},
                                  {"resident", rowwise::ResidentValue(t)},
                                  {"scale_engine", "vector"},
                                  {"exp_dtype", "fp32"}});
}

}  // namespace tessel::kernels

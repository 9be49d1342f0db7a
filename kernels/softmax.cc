#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/lowering/verify_util.h"
#include "kernels/rowwise.h"
#include "kernels/rowwise_kernel.h"
#include "kernels/schedule_util.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/program.h"
#include "sim/target.h"

// The schedule is written in the row-wise step IR, so it lives in its namespace.
namespace tessel::kernels::rowwise {
namespace {

using sim::DType;
using sim::EngineKind;

SoftmaxFault g_fault = SoftmaxFault::kNone;

// Per-row statistics of one row tile (buffer ids within a stat slot).
enum Stat : int32_t { kMax, kMaxNext, kPartial, kNegMax, kSum, kPartialSum, kRecip, kDiff, kCorr };

struct Plan : RowTiling {
  bool online = false, scale_on_scalar = false;
  bool sum_on_scalar = false;  // the exp instruction sums its row (activation_reduce)
  DType exp_dtype = DType::kFp32;
};

int64_t DataBytes(const Plan& p) { return std::max(p.in_bytes, sim::DTypeBytes(p.exp_dtype)); }

std::vector<sim::Allocation> Allocations(const Plan& p) {
  return {DataAllocation(p, DataBytes(p)),
          {"row_stats", sim::Mem::kSbuf, 0, int(p.tile_rows),
           kStatsPerSlot * p.g * std::max<int64_t>(p.chunks, 1) * 4, kStatSlots}};
}

absl::StatusOr<Plan> MakePlan(const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  TESSEL_RETURN_IF_ERROR(ParseRowTiling(problem, config, p));
  std::string algorithm, scale, exp_dtype;
  TESSEL_RETURN_IF_ERROR(ChoiceParams(config, {{"algorithm", {"multi_pass", "online"}, &algorithm},
                                               {"scale_engine", {"vector", "scalar"}, &scale},
                                               {"exp_dtype", {"fp32", "bf16"}, &exp_dtype}}));
  p.online = algorithm == "online";
  p.scale_on_scalar = scale == "scalar";
  p.exp_dtype = exp_dtype == "bf16" ? DType::kBf16 : DType::kFp32;
  // Added after configs were stored: when absent, the Vector reduction they were tuned with.
  if (config.Get("sum_engine")) {
    std::string sum;
    TESSEL_RETURN_IF_ERROR(ChoiceParams(config, {{"sum_engine", {"vector", "scalar"}, &sum}}));
    p.sum_on_scalar = sum == "scalar";
  }

  if (p.exp_dtype == DType::kBf16 && p.dtype != DType::kBf16) {
    return absl::InvalidArgumentError(
        StrCat("exp_dtype=bf16 would drop below the precision of the ", problem.dtype, " output"));
  }
  TESSEL_RETURN_IF_ERROR(CheckRowTiling(p, target, strict));
  if (p.chunks == 1 && p.online) {
    return absl::InvalidArgumentError(StrCat("algorithm=online needs more than one chunk: chunk=",
                                             p.chunk, " already holds all ", p.cols, " columns"));
  }
  TESSEL_RETURN_IF_ERROR(CheckSbufCapacity(p, DataBytes(p), "", Allocations(p), target));
  return p;
}

// Walks the schedule and hands each step to `sink`.
template <typename Sink>
void Generate(const Plan& p, Sink& sink) {
  const int64_t nc = p.chunks;
  ForEachCore(p, Allocations(p), sink, [&](int core, int64_t tb, int64_t te) {
    int64_t stream = 0;  // streaming buffer rotation
    auto tile_steps = [&](int64_t t) {
      RowTile tile(p, core, t, &stream);
      auto stat = [&](Stat s, int32_t col = 0) { return tile.Stat(s, col); };
      auto width = [&](int64_t j) { return tile.Width(j); };
      auto data = [&](int64_t j) { return tile.Data(j); };
      auto load = [&](Ref buf, int64_t j) { sink(tile.Dma(Kind::kLoad, buf, j)); };
      auto reduce = [&](Fn fn, Ref src, DType in, int64_t w, Ref dst) {
        sink(tile.Compute(Kind::kReduce, EngineKind::kVector, fn, src, dst, w, in));
      };
      auto stat_op = [&](Fn fn, Ref a, Ref b, Ref dst, int64_t w = 1) {
        Step s = tile.Compute(Kind::kTensorTensor, EngineKind::kVector, fn, a, dst, w);
        s.src1 = b;
        sink(s);
      };
      // dst = src x imm (or x the per-row `scalar`) on Vector, `w` columns of statistics.
      auto scale_stat = [&](Ref src, Ref dst, float imm, Fn fn = Fn::kMul, Ref scalar = {},
                            int64_t w = 1) {
        Step s = tile.Compute(Kind::kTensorScalar, EngineKind::kVector, fn, src, dst, w);
        s.imm0 = imm;
        s.scalar0 = scalar;
        sink(s);
      };
      // dst = exp(src x imm + bias) on Scalar.
      auto exp_op = [&](Ref src, Ref dst, float imm, Ref bias = {}, int64_t w = 1,
                        DType in = DType::kFp32, DType out = DType::kFp32) {
        Step s =
            tile.Compute(Kind::kActivation, EngineKind::kScalar, Fn::kExp, src, dst, w, in, out);
        s.imm0 = imm;
        s.scalar1 = bias;
        sink(s);
      };
      // exp(x - max) in place, kept in exp_dtype; with `sum`, ScalarE also takes the chunk's row
      // sum in the same instruction (sum_engine=scalar) into kSum (first chunk) or kPartialSum.
      auto exp_chunk = [&](Ref buf, int64_t j, Ref neg_max, bool sum = false) {
        Step s = tile.Compute(Kind::kActivation, EngineKind::kScalar, Fn::kExp, buf, buf, width(j),
                              p.dtype, p.exp_dtype);
        s.imm0 = 1;
        s.scalar1 = neg_max;
        if (sum) s.accum = stat(j == 0 ? kSum : kPartialSum);
        sink(s);
      };
      // Loads chunk j into `buf` and takes its row max: into kMax for the first chunk, else into
      // kPartial and then max(kMax, kPartial) into `next`.
      auto load_max = [&](Ref buf, int64_t j, Stat next) {
        load(buf, j);
        if (j == 0) {
          reduce(Fn::kMax, buf, p.dtype, width(j), stat(kMax));
          return;
        }
        reduce(Fn::kMax, buf, p.dtype, width(j), stat(kPartial));
        stat_op(Fn::kMax, stat(kMax), stat(kPartial), stat(next));
      };
      // Adds the chunk's exp sum to the row sum (already taken by the exp on ScalarE with
      // sum_engine=scalar: then only the running add).
      auto sum_chunk = [&](Ref buf, int64_t j) {
        if (j == 0) {
          if (!p.sum_on_scalar) reduce(Fn::kAdd, buf, p.exp_dtype, width(j), stat(kSum));
          return;
        }
        if (!p.sum_on_scalar) reduce(Fn::kAdd, buf, p.exp_dtype, width(j), stat(kPartialSum));
        const bool drop =
            g_fault == SoftmaxFault::kDropTailChunkFromSum && j == nc - 1 && p.cols % p.chunk != 0;
        if (!drop) stat_op(Fn::kAdd, stat(kSum), stat(kPartialSum), stat(kSum));
      };
      auto reciprocal = [&] {
        sink(tile.Compute(Kind::kReciprocal, EngineKind::kVector, Fn::kNone, stat(kSum),
                          stat(kRecip)));
      };
      // buf * scale -> output dtype, in place, then stored.
      auto scale_and_store = [&](Ref buf, int64_t j, Ref scale) {
        Step s = tile.Compute(p.scale_on_scalar ? Kind::kActivation : Kind::kTensorScalar,
                              p.scale_on_scalar ? EngineKind::kScalar : EngineKind::kVector,
                              p.scale_on_scalar ? Fn::kCopy : Fn::kMul, buf, buf, width(j),
                              p.exp_dtype, p.dtype);
        s.scalar0 = scale;
        sink(s);
        sink(tile.Dma(Kind::kStore, buf, j));
      };

      if (!p.online) {
        // Pass 1: row max.
        std::vector<Ref> bufs(nc);
        for (int64_t j = 0; j < nc; ++j) {
          bufs[j] = data(j);
          load_max(bufs[j], j, kMax);
        }
        scale_stat(stat(kMax), stat(kNegMax), -1);
        // Pass 2: exp and row sum (kept in place when resident).
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = p.resident ? bufs[j] : data(j);
          if (!p.resident) load(buf, j);
          exp_chunk(buf, j, stat(kNegMax), p.sum_on_scalar);
          sum_chunk(buf, j);
        }
        reciprocal();
        // Pass 3: normalise (recomputing exp when streaming).
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = p.resident ? bufs[j] : data(j);
          if (!p.resident) {
            load(buf, j);
            exp_chunk(buf, j, stat(kNegMax));
          }
          scale_and_store(buf, j, stat(kRecip));
        }
        return;
      }

      // Online: running max m and sum s; s is rescaled by exp(m_old - m_new) when m grows. The
      // negated max used for each chunk is kept (column j of kNegMax) for resident rescaling.
      std::vector<Ref> bufs(nc);
      for (int64_t j = 0; j < nc; ++j) {
        bufs[j] = data(j);
        load_max(bufs[j], j, kMaxNext);
        const Ref neg_j = stat(kNegMax, int32_t(j));
        if (j > 0) {
          stat_op(Fn::kSub, stat(kMax), stat(kMaxNext), stat(kDiff));
          exp_op(stat(kDiff), stat(kCorr), 1);
          if (g_fault != SoftmaxFault::kSkipOnlineRescale) {
            stat_op(Fn::kMul, stat(kSum), stat(kCorr), stat(kSum));
          }
          scale_stat(stat(kMaxNext), stat(kMax), 1);
        }
        scale_stat(stat(kMax), neg_j, -1);
        exp_chunk(bufs[j], j, neg_j, p.sum_on_scalar);
        sum_chunk(bufs[j], j);
      }
      reciprocal();
      if (p.resident) {
        // Factor per chunk: exp(m_j - m) / s, with -m_j in column j and -m in column nc - 1.
        scale_stat(stat(kNegMax), stat(kDiff), 0, Fn::kSub, stat(kNegMax, int32_t(nc - 1)), nc);
        exp_op(stat(kDiff), stat(kCorr), -1, {}, nc);  // exp(-(-m_j + m)) = exp(m_j - m)
        scale_stat(stat(kCorr), stat(kCorr), 0, Fn::kMul, stat(kRecip), nc);
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
    };
    // The statistics rotate with the row tile; the data buffers with it when resident, else
    // with the chunks streamed.
    const Rotation rotations[] = {{0, kStatSlots, kStatsPerSlot, nullptr},
                                  p.resident ? Rotation{kDataBase, p.bufs, int32_t(nc), nullptr}
                                             : Rotation{kDataBase, p.bufs, 1, &stream}};
    int64_t* const counters[] = {&stream};
    sink.Tiles(tb, te, RegularEnd(p, te), TileLoop{rotations, counters}, tile_steps);
  });
}

// Verify's run on the reduced problem (ReduceForVerify), with inputs rising along each
// row so that the running max grows chunk by chunk.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  Plan plan = full;
  ReduceForVerify(plan);
  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.cols * 131));
  const std::vector<float> x = RisingRows(plan.rows, plan.cols, rng, plan.dtype, 3.0f, 6.0f);
  std::vector<float> y = Unwritten(x.size());
  CpuSink sink(plan.cols, x, &y, {});
  Generate(plan, sink);

  // Reference in double. bf16: output and exp roundings (2^-8 each) plus slack; fp32: fp32
  // accumulation over the row.
  const double rel = RowTolerance(plan, 1e-6, 2.0);
  return CompareRows(
      "softmax", plan, y,
      [&](int64_t r, std::vector<double>& want) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < plan.cols; ++c) mx = std::max(mx, double(x[r * plan.cols + c]));
        double sum = 0;
        for (int64_t c = 0; c < plan.cols; ++c)
          sum += want[c] = std::exp(x[r * plan.cols + c] - mx);
        for (int64_t c = 0; c < plan.cols; ++c) want[c] /= sum;
      },
      [&](double want) { return rel * want + 1e-30; });
}

constexpr char kDescription[] =
    "row softmax of X[rows,cols]: row tiles, rows per partition, column chunks, multi-pass vs "
    "online, SBUF residency, normalise and row-sum engines, exp dtype, buffers, sharding";

std::vector<Param> Params(const Problem&, const sim::Target& target) {
  return TilingParams(
      {{"algorithm", {"multi_pass", "online"}, "max/sum/normalise passes or online rescaling"},
       ResidentParam(),
       {"scale_engine", {"vector", "scalar"}, "engine of the final multiply by 1/sum"},
       {"sum_engine",
        {"vector", "scalar"},
        "engine of the row sum: a Vector reduction, or the exp instruction on ScalarE "
        "(activation_reduce)"},
       {"exp_dtype",
        {"fp32", "bf16"},
        "dtype exp results are kept in (bf16: a VectorE normalise runs in snc3's performance "
        "mode)"}},
      target);
}

void Emit(const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
  SimSink sink(target, int(plan.g), program);
  Generate(plan, sink);
}

}  // namespace
}  // namespace tessel::kernels::rowwise

namespace tessel::kernels {

void SetSoftmaxFaultForTesting(SoftmaxFault fault) { rowwise::g_fault = fault; }

// Version 1: initial lowering.
// (Spec: name, version, description; steps: params, plan, emit, verify, estimate.)
SoftmaxKernel::SoftmaxKernel()
    : RowwiseKernel("softmax", 1, rowwise::kDescription,
                    Erase(PlanSteps<rowwise::Plan>{rowwise::Params, StrictPlan(rowwise::MakePlan),
                                                   rowwise::Emit, rowwise::RunReduced, nullptr}),
                    /*vectors=*/0) {}

Config SoftmaxKernel::Default(const Problem& problem, const sim::Target&) const {
  // A plain compiler: the plain row tiling, three streaming passes, Vector normalisation, fp32
  // intermediates, one core.
  const rowwise::RowTiling t = rowwise::PlainTiling(problem);
  return rowwise::PlainConfig(t, {{"algorithm", "multi_pass"},
                                  {"resident", rowwise::ResidentValue(t)},
                                  {"scale_engine", "vector"},
                                  {"sum_engine", "vector"},
                                  {"exp_dtype", "fp32"}});
}

}  // namespace tessel::kernels

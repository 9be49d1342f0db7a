#include "kernels/norm.h"

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

NormFault g_fault = NormFault::kNone;

constexpr float kEps = 1e-5f;
constexpr int kQueueVector = 2;
constexpr int kBnStatsMaxFree = 512;  // fallback when the target sets no cap
constexpr int32_t kGamma = 900, kBeta = 901, kSquares = 910;

const std::vector<std::string> kStats = {"bn_stats", "sum_scalar_sq", "sum_vector_sq"};

enum Stat : int32_t {
  kSum,
  kSumSq,
  kPartial,
  kPartialSq,
  kBn,
  kMeanVar,
  kTmp,
  kRstd,
  kNegMeanRstd
};

struct Plan : RowTiling {
  bool rms = false;
  bool bn_stats = true, square_on_scalar = false, apply_on_scalar = false;
  bool affine_fused = true;
  int bn_max = kBnStatsMaxFree;
  // Derived.
  int64_t bn_groups = 0;
};

void Derive(Plan& p) {
  DeriveTiling(p);
  p.bn_groups = 0;
  for (int64_t j = 0; j < p.chunks; ++j) {
    p.bn_groups += CeilDiv(std::min(p.chunk, p.cols - j * p.chunk), p.bn_max);
  }
}

std::vector<sim::Allocation> Allocations(const Plan& p) {
  const int parts = int(p.tile_rows);
  std::vector<sim::Allocation> a = {DataAllocation(p, p.in_bytes)};
  if (!p.bn_stats) a.push_back({"squares", sim::Mem::kSbuf, 0, parts, p.g * p.chunk * 4, 2});
  a.push_back(
      {"gamma_beta", sim::Mem::kSbuf, 0, parts, p.chunks * p.chunk * p.in_bytes, p.rms ? 1 : 2});
  a.push_back({"row_stats", sim::Mem::kSbuf, 0, parts,
               p.g * (kStatsPerSlot + p.bn_groups * kBnStatsWidth) * 4, kStatSlots});
  return a;
}

absl::StatusOr<Plan> MakePlan(bool rms, const Problem& problem, const Config& config,
                              const sim::Target& target, bool strict) {
  Plan p;
  p.rms = rms;
  if (target.max_bn_stats_free > 0) p.bn_max = target.max_bn_stats_free;
  TESSEL_RETURN_IF_ERROR(ParseRowTiling(problem, config, p));
  std::string stats, apply, affine;
  TESSEL_RETURN_IF_ERROR(ChoiceParams(config, {{"stats", kStats, &stats},
                                               {"apply", {"vector", "scalar"}, &apply},
                                               {"affine", {"fused", "separate"}, &affine}}));
  p.bn_stats = stats == "bn_stats";
  p.square_on_scalar = stats == "sum_scalar_sq";
  p.apply_on_scalar = apply == "scalar";
  p.affine_fused = affine == "fused";
  Derive(p);
  TESSEL_RETURN_IF_ERROR(CheckRowTiling(p, target, strict));
  TESSEL_RETURN_IF_ERROR(CheckSbufCapacity(p, p.in_bytes,
                                           p.rms ? "gamma + squares + " : "gamma/beta + squares + ",
                                           Allocations(p), target));
  return p;
}

template <typename Sink>
void Generate(const Plan& p, Sink& sink) {
  const int64_t nc = p.chunks;
  ForEachCore(p, Allocations(p), sink, [&](int core, int64_t tb, int64_t te) {
    // gamma (and beta) broadcast to the tile's partitions once per core.
    for (int v = 0; v < (p.rms ? 1 : 2); ++v) {
      Step s;
      s.kind = Kind::kLoadVector;
      s.engine = EngineKind::kDma;
      s.core = core;
      s.dst = Ref{v == 0 ? kGamma : kBeta, 0};
      s.width = p.cols;
      s.in_dtype = p.dtype;
      s.queue = kQueueVector;
      s.vector_id = v;
      s.partitions = int(std::min<int64_t>(p.tile_rows, CeilDiv(p.rows, p.g)));
      sink(s);
    }
    int64_t stream = 0, squares = 0;
    auto tile_steps = [&](int64_t t, bool second_pass) {
      RowTile tile(p, core, t, &stream);
      auto stat = [&](Stat s, int32_t col = 0) { return tile.Stat(s, col); };
      auto width = [&](int64_t j) { return tile.Width(j); };
      auto data = [&](int64_t j) { return second_pass ? tile.Streamed() : tile.Data(j); };
      auto dma = [&](Kind kind, Ref buf, int64_t j, bool from_output) {
        Step s = tile.Dma(kind, buf, j);
        s.from_output = from_output;
        s.hbm_region = int32_t(t * nc + j);
        sink(s);
      };
      // dst = a fn b on Vector (b a broadcast [width] vector when `vec`).
      auto tt = [&](Fn fn, Ref a, Ref b, Ref dst, int64_t w, DType in, DType out, bool vec) {
        Step s = tile.Compute(Kind::kTensorTensor, EngineKind::kVector, fn, a, dst, w, in, out);
        s.src1 = b;
        s.src1_vector = vec;
        sink(s);
      };
      auto stat_tt = [&](Fn fn, Ref a, Ref b, Ref dst) {
        tt(fn, a, b, dst, 1, DType::kFp32, DType::kFp32, false);
      };
      // dst = (src fn a) fn1 b on Vector, reading and writing `dtype`.
      auto ts = [&](Ref src, Fn fn, Ref a, float ia, Fn fn1, Ref b, float ib, Ref dst, int64_t w,
                    DType dtype) {
        Step s =
            tile.Compute(Kind::kTensorScalar, EngineKind::kVector, fn, src, dst, w, dtype, dtype);
        s.scalar0 = a;
        s.imm0 = ia;
        s.fn1 = fn1;
        s.scalar1 = b;
        s.imm1 = ib;
        sink(s);
      };
      auto affine = [&](Ref buf, int64_t j) {
        tt(Fn::kMul, buf, Ref{kGamma, int32_t(j * p.chunk)}, buf, width(j), p.dtype, p.dtype, true);
        if (!p.rms) {
          tt(Fn::kAdd, buf, Ref{kBeta, int32_t(j * p.chunk)}, buf, width(j), p.dtype, p.dtype,
             true);
        }
      };

      if (second_pass) {  // affine=separate: gamma/beta over Y in HBM
        for (int64_t j = 0; j < nc; ++j) {
          Ref buf = data(j);
          dma(Kind::kLoad, buf, j, /*from_output=*/true);
          affine(buf, j);
          dma(Kind::kStore, buf, j, false);
        }
        return;
      }

      // Pass 1: statistics.
      std::vector<Ref> bufs(nc);
      int32_t group = 0;
      for (int64_t j = 0; j < nc; ++j) {
        bufs[j] = data(j);
        dma(Kind::kLoad, bufs[j], j, false);
        if (g_fault == NormFault::kDropTailChunkFromStats && j == nc - 1 && nc > 1 &&
            p.cols % p.chunk != 0) {
          continue;
        }
        const int64_t w = width(j);
        if (p.bn_stats) {
          for (int64_t c0 = 0; c0 < w; c0 += p.bn_max) {
            sink(tile.Compute(Kind::kBnStats, EngineKind::kVector, Fn::kNone,
                              Ref{bufs[j].buf, int32_t(c0)}, stat(kBn, group++ * kBnStatsWidth),
                              std::min<int64_t>(p.bn_max, w - c0), p.dtype));
          }
          continue;
        }
        auto accumulate = [&](Ref src, DType in, Stat total, Stat partial) {
          sink(tile.Compute(Kind::kReduce, EngineKind::kVector, Fn::kAdd, src,
                            stat(j == 0 ? total : partial), w, in));
          if (j > 0) stat_tt(Fn::kAdd, stat(total), stat(partial), stat(total));
        };
        if (!p.rms) accumulate(bufs[j], p.dtype, kSum, kPartial);
        const Ref sq{int32_t(kSquares + squares++ % 2), 0};
        if (p.square_on_scalar) {
          Step s = tile.Compute(Kind::kActivation, EngineKind::kScalar, Fn::kSquare, bufs[j], sq, w,
                                p.dtype);
          s.imm0 = 1;
          sink(s);
        } else {
          tt(Fn::kMul, bufs[j], bufs[j], sq, w, p.dtype, DType::kFp32, false);
        }
        accumulate(sq, DType::kFp32, kSumSq, kPartialSq);
      }
      // mean in kMeanVar col 0; variance (layernorm) or mean square (rmsnorm) in col 1.
      const Ref mean = stat(kMeanVar, 0), second = stat(kMeanVar, 1);
      const float inv_n = 1.0f / float(p.cols);
      if (p.bn_stats) {
        sink(tile.Compute(Kind::kBnAggr, EngineKind::kVector, Fn::kNone, stat(kBn), mean, group));
        if (p.rms) {  // mean(x^2) = var + mean^2
          stat_tt(Fn::kMul, mean, mean, stat(kTmp));
          stat_tt(Fn::kAdd, second, stat(kTmp), second);
        }
      } else {
        if (!p.rms) ts(stat(kSum), Fn::kMul, {}, inv_n, Fn::kNone, {}, 0, mean, 1, DType::kFp32);
        ts(stat(kSumSq), Fn::kMul, {}, inv_n, Fn::kNone, {}, 0, second, 1, DType::kFp32);
        if (!p.rms) {  // var = mean(x^2) - mean^2
          stat_tt(Fn::kMul, mean, mean, stat(kTmp));
          stat_tt(Fn::kSub, second, stat(kTmp), second);
        }
      }
      // rstd = (second + eps)^-0.5 on Vector.
      ts(second, Fn::kAdd, {}, kEps, Fn::kPow, {}, -0.5f, stat(kRstd), 1, DType::kFp32);
      if (!p.rms && p.apply_on_scalar) {
        ts(mean, Fn::kMul, stat(kRstd), 0, Fn::kMul, {}, -1.0f, stat(kNegMeanRstd), 1,
           DType::kFp32);
      }

      // Pass 2: normalise (and scale/shift when fused), store.
      for (int64_t j = 0; j < nc; ++j) {
        Ref buf = p.resident ? bufs[j] : data(j);
        if (!p.resident) dma(Kind::kLoad, buf, j, false);
        if (p.apply_on_scalar) {
          Step s = tile.Compute(Kind::kActivation, EngineKind::kScalar, Fn::kCopy, buf, buf,
                                width(j), p.dtype, p.dtype);
          s.scalar0 = stat(kRstd);
          if (!p.rms) s.scalar1 = stat(kNegMeanRstd);
          sink(s);
        } else if (p.rms) {
          ts(buf, Fn::kMul, stat(kRstd), 0, Fn::kNone, {}, 0, buf, width(j), p.dtype);
        } else {
          ts(buf, Fn::kSub, mean, 0, Fn::kMul, stat(kRstd), 0, buf, width(j), p.dtype);
        }
        if (p.affine_fused) affine(buf, j);
        dma(Kind::kStore, buf, j, false);
      }
    };
    // The statistics rotate with the row tile; the data buffers with it when resident, else
    // (and in the second pass) with the chunks streamed; the squares with their own counter.
    const Rotation stats{0, kStatSlots, kStatsPerSlot, nullptr};
    const Rotation streamed{kDataBase, p.bufs, 1, &stream};
    const Rotation first_pass[] = {
        stats,
        p.resident ? Rotation{kDataBase, p.bufs, int32_t(nc), nullptr} : streamed,
        {kSquares, 2, 1, &squares}};
    const Rotation second_pass[] = {stats, streamed};
    int64_t* const counters[] = {&stream, &squares};
    const int64_t regular_end = RegularEnd(p, te);
    if (!p.affine_fused) sink.ReadOutputsBack();
    sink.Tiles(tb, te, regular_end, TileLoop{first_pass, counters},
               [&](int64_t t) { tile_steps(t, false); });
    if (!p.affine_fused) {
      sink.Tiles(tb, te, regular_end, TileLoop{second_pass, counters, nc},
                 [&](int64_t t) { tile_steps(t, true); });
    }
  });
}

// Verify's run on the reduced problem (ReduceForVerify): inputs with a per-row offset
// and a trend along the row (so every chunk matters to the statistics); gamma around 1, beta
// around 0.
absl::Status RunReduced(const Plan& full, const Config& config, const sim::Target&) {
  Plan plan = full;
  ReduceForVerify(plan);
  Derive(plan);
  const std::string_view kernel = plan.rms ? "rmsnorm" : "layernorm";
  std::mt19937_64 rng = VerifyRng(config, uint64_t(plan.cols * 977));
  const std::vector<float> x = RisingRows(plan.rows, plan.cols, rng, plan.dtype, 1.0f, 2.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> gamma(plan.cols), beta(plan.cols);
  for (int64_t c = 0; c < plan.cols; ++c) {
    gamma[c] = RoundToDType(1.0f + 0.5f * uniform(rng), plan.dtype);
    beta[c] = RoundToDType(0.5f * uniform(rng), plan.dtype);
  }
  std::vector<float> y = Unwritten(x.size());
  CpuSink sink(plan.cols, x, &y, {gamma, beta});
  Generate(plan, sink);

  // bf16: a few output roundings (2^-8 each) on values of size ~|y| + 1; fp32: fp32 sums over
  // the row.
  const double rel = RowTolerance(plan, 1e-5, 4.0);
  return CompareRows(
      kernel, plan, y,
      [&](int64_t r, std::vector<double>& want) {
        double mean = 0, sq = 0;
        for (int64_t c = 0; c < plan.cols; ++c) {
          const double v = x[r * plan.cols + c];
          mean += v;
          sq += v * v;
        }
        mean /= double(plan.cols);
        sq /= double(plan.cols);
        const double var = sq - mean * mean;
        const double rstd = 1.0 / std::sqrt((plan.rms ? sq : var) + double(kEps));
        for (int64_t c = 0; c < plan.cols; ++c) {
          const double v = x[r * plan.cols + c];
          want[c] = plan.rms ? v * rstd * gamma[c] : (v - mean) * rstd * gamma[c] + double(beta[c]);
        }
      },
      [&](double want) { return rel * (1.0 + std::abs(want)); });
}

constexpr char kRmsDescription[] =
    "rmsnorm of X[rows,cols] with gamma: row tiles, chunks, residency, statistics method, "
    "normalise engine, fused or separate scale, buffers, sharding";
constexpr char kLayerDescription[] =
    "layernorm of X[rows,cols] with gamma/beta: row tiles, chunks, residency, bn_stats vs explicit "
    "sums, normalise engine, fused or separate affine, buffers, sharding";

RowwiseKernel::Steps NormSteps(bool rms) {
  return PlannedKernel::Erase(PlanSteps<Plan>{
      .params =
          [rms](const Problem&, const sim::Target& target) {
            return TilingParams(
                {ResidentParam(),
                 {"stats", kStats,
                  "bn_stats/bn_aggr or explicit sums (squares on Scalar or Vector)"},
                 {"apply",
                  {"vector", "scalar"},
                  "engine of the normalisation (vector: bf16 tensor_scalar in snc3's VectorE "
                  "performance mode)"},
                 {"affine",
                  {"fused", "separate"},
                  rms ? "gamma fused or a separate pass" : "gamma/beta fused or a separate pass"}},
                target);
          },
      .plan =
          [rms](const Problem& problem, const Config& config, const sim::Target& target) {
            return MakePlan(rms, problem, config, target, /*strict=*/true);
          },
      .emit =
          [](const Plan& plan, const Problem&, const sim::Target& target, sim::Program* program) {
            SimSink sink(target, int(plan.g), program);
            Generate(plan, sink);
          },
      .verify = RunReduced,
      .estimate = nullptr});
}

}  // namespace
}  // namespace tessel::kernels::rowwise

namespace tessel::kernels {

void SetNormFaultForTesting(NormFault fault) { rowwise::g_fault = fault; }

// Version 1: initial lowering. (Spec: name, version, description.)
NormKernel::NormKernel(bool rms)
    : RowwiseKernel(rms ? "rmsnorm" : "layernorm", 1,
                    rms ? rowwise::kRmsDescription : rowwise::kLayerDescription,
                    rowwise::NormSteps(rms), /*vectors=*/rms ? 1 : 2),
      rms_(rms) {}

Config NormKernel::Default(const Problem& problem, const sim::Target&) const {
  // A plain compiler: the plain row tiling (chunks streamed twice), the textbook statistics
  // (bn_stats for layernorm, x*x then a sum for rmsnorm), Vector normalisation, fused affine, one
  // core.
  const rowwise::RowTiling t = rowwise::PlainTiling(problem);
  return rowwise::PlainConfig(t, {{"resident", rowwise::ResidentValue(t)},
                                  {"stats", rms_ ? "sum_vector_sq" : "bn_stats"},
                                  {"apply", "vector"},
                                  {"affine", "fused"}});
}

}  // namespace tessel::kernels

#include "kernels/lowering/gemm_plan.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "kernels/lowering/verify_util.h"
#include "kernels/schedule_util.h"

namespace tessel::kernels {

absl::Status ReadGemmOperands(const Problem& problem, GemmOperands* out) {
  absl::StatusOr<sim::DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  out->m = *problem.dims.Get("M");
  out->n = *problem.dims.Get("N");
  out->k = *problem.dims.Get("K");
  out->dtype = *dtype;
  out->in_bytes = sim::DTypeBytes(*dtype);
  out->out_bytes = OutputBytes(*dtype);
  return absl::OkStatus();
}

absl::Status ReadGemmTiling(const Config& config, GemmTiling* out) {
  return IntParams(config, {{"tile_m", &out->tile_m},
                            {"tile_n", &out->tile_n},
                            {"tile_k", &out->tile_k},
                            {"block_m", &out->block_m},
                            {"block_n", &out->block_n},
                            {"block_k", &out->block_k}});
}

absl::Status ReadGemmChoices(const Config& config, GemmChoices* out) {
  std::optional<std::string_view> stationary = config.Get("stationary");
  if (!stationary || (*stationary != "a" && *stationary != "b")) {
    return absl::InvalidArgumentError("stationary must be a or b");
  }
  out->stationary_b = *stationary == "b";
  std::optional<std::string_view> evict = config.Get("evict");
  if (!evict ||
      (*evict != "vector" && *evict != "scalar" && *evict != "split" && *evict != "gpsimd")) {
    return absl::InvalidArgumentError("evict must be vector, scalar, split or gpsimd");
  }
  out->evict = std::string(*evict);
  return absl::OkStatus();
}

void DeriveGemmBlocks(const GemmOperands& operands, const GemmTiling& tiling, GemmBlocks* out) {
  out->tiles_m = CeilDiv(operands.m, tiling.tile_m);
  out->tiles_n = CeilDiv(operands.n, tiling.tile_n);
  out->tiles_k = CeilDiv(operands.k, tiling.tile_k);
  out->blocks_m = CeilDiv(out->tiles_m, tiling.block_m);
  out->blocks_n = CeilDiv(out->tiles_n, tiling.block_n);
  out->blocks_k = CeilDiv(out->tiles_k, tiling.block_k);
}

absl::Status CheckGemmTile(const sim::Target& target, std::string_view dtype_name,
                           const GemmOperands& operands, const GemmTiling& tiling,
                           const GemmChoices& choices) {
  const bool b = choices.stationary_b;
  if (absl::Status tile = CheckMatmulTile(
          target, operands.dtype, dtype_name, "tile_k", tiling.tile_k,
          b ? "stationary=b: tile_n=" : "stationary=a: tile_m=", b ? tiling.tile_n : tiling.tile_m,
          b ? tiling.tile_m : tiling.tile_n);
      !tile.ok()) {
    return tile;
  }
  if (choices.evict == "gpsimd") {
    return absl::InvalidArgumentError(
        "evict=gpsimd: GpSimd cannot access PSUM, so it cannot evict matmul results");
  }
  return absl::OkStatus();
}

std::vector<Param> GemmTileParams(const Problem& problem, const sim::Target& target) {
  std::vector<std::string> tile_k = {"32", "64", "128"};
  if (target.MaxMatmulK(*sim::ParseDType(problem.dtype)) >= 256) tile_k.push_back("256");
  return {
      {"tile_m", {"32", "64", "128"}, "M rows per hardware tile"},
      {"tile_n", {"64", "128", "256", "512"}, "N columns per hardware tile"},
      {"tile_k", tile_k, "K (contraction) per hardware tile"},
  };
}

Param StationaryParam() { return {"stationary", {"a", "b"}, "operand held in the systolic array"}; }

Param EvictParam() {
  return {"evict", {"vector", "scalar", "split", "gpsimd"}, "engine evicting PSUM"};
}

CpuGemm::CpuGemm(const GemmOperands& operands, const GemmTiling& tiling, int psum_slots,
                 const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* c)
    : a_(a),
      b_(b),
      c_(c),
      m_(operands.m),
      n_(operands.n),
      k_(operands.k),
      stride_(std::max<int64_t>(tiling.tile_n, 1)),
      psum_(std::max(psum_slots, 1), std::vector<float>(tiling.tile_m * tiling.tile_n, 0)),
      stage_(kGemmStagingBufs, std::vector<float>(tiling.tile_m * tiling.tile_n, 0)) {}

void CpuGemm::Matmul(int slot, bool start, int64_t batch, int64_t m0, int64_t rows, int64_t n0,
                     int64_t cols, int64_t k0, int64_t depth) {
  std::vector<float>& acc = psum_[slot];
  if (start) std::fill(acc.begin(), acc.end(), 0.0f);
  const float* a = &a_[batch * m_ * k_];
  const float* b = &b_[batch * k_ * n_];
  for (int64_t i = 0; i < rows; ++i) {
    AccumulateRowTimesMatrix(&a[(m0 + i) * k_ + k0], &b[k0 * n_ + n0], depth, cols, n_,
                             &acc[i * stride_]);
  }
}

void CpuGemm::Store(int stage, int64_t batch, int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      (*c_)[(batch * m_ + m0 + i) * n_ + n0 + j] = stage_[stage][i * stride_ + j];
    }
  }
}

absl::Status VerifyGemm(
    std::string_view kernel, std::string reduced, const GemmOperands& operands, int64_t batches,
    bool batched, std::mt19937_64& rng,
    const std::function<void(const std::vector<float>&, const std::vector<float>&,
                             std::vector<float>*)>& run,
    int acc_roundings) {
  const GemmOperands& o = operands;
  const std::vector<float> a = RandomInputs(batches * o.m * o.k, rng, o.dtype);
  const std::vector<float> b = RandomInputs(batches * o.k * o.n, rng, o.dtype);
  std::vector<float> c = Unwritten(batches * o.m * o.n);
  run(a, b, &c);
  GemmResult result;
  result.kernel = kernel;
  result.reduced = std::move(reduced);
  result.batched = batched;
  result.batches = batches;
  result.m = o.m;
  result.n = o.n;
  result.k = o.k;
  result.dtype = o.dtype;
  result.acc_roundings = acc_roundings;
  result.a = &a;
  result.b = &b;
  result.c = &c;
  return CheckGemm(result);
}

}  // namespace tessel::kernels

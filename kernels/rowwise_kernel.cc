#include "kernels/rowwise_kernel.h"

#include <algorithm>
#include <cmath>

#include "kernels/lowering/verify_util.h"
#include "kernels/schedule_util.h"
#include "schema/strings.h"

namespace tessel::kernels::rowwise {

std::vector<Param> TilingParams(std::vector<Param> own, const sim::Target& target) {
  std::vector<Param> params = {
      {"tile_rows", kTileRows, "partitions per row tile"},
      {"rows_per_partition", kRowsPerPartition, "consecutive rows per partition (free dim)"},
      {"chunk", kChunks, "columns per chunk"},
  };
  for (Param& p : own) params.push_back(std::move(p));
  params.push_back({"bufs", {"1", "2", "3"}, "rotating buffers (row tiles or chunks)"});
  params.push_back({"shards", ShardValues(target), "cores the row tiles are split over"});
  return params;
}

Param ResidentParam() {
  return {"resident", {"0", "1"}, "1: keep the row tile in SBUF between passes"};
}

Config PlainConfig(const RowTiling& t, std::vector<std::pair<std::string, std::string>> own) {
  Config config{{"tile_rows", std::to_string(t.tile_rows)},
                {"rows_per_partition", std::to_string(t.g)},
                {"chunk", std::to_string(t.chunk)}};
  for (auto& [name, value] : own) config.Set(name, std::move(value));
  config.Set("bufs", std::to_string(t.bufs));
  config.Set("shards", std::to_string(t.shards));
  return config;
}

int64_t SbufBytes(const std::vector<sim::Allocation>& allocations) {
  int64_t total = 0;
  for (const sim::Allocation& a : allocations) total += a.bytes_per_partition * a.bufs;
  return total;
}

sim::Allocation DataAllocation(const RowTiling& t, int64_t elem_bytes) {
  const int parts = int(t.tile_rows);
  if (t.resident) {
    return {"row_tiles", sim::Mem::kSbuf, 0, parts, t.g * t.chunks * t.chunk * elem_bytes, t.bufs};
  }
  return {"chunks", sim::Mem::kSbuf, 0, parts, t.g * t.chunk * elem_bytes, t.bufs};
}

absl::Status CheckSbufCapacity(const RowTiling& t, int64_t elem_bytes, std::string_view others,
                               const std::vector<sim::Allocation>& allocations,
                               const sim::Target& target) {
  const int64_t sbuf = SbufBytes(allocations);
  if (sbuf <= target.UsableSbufPerPartition()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("SBUF capacity: ", t.resident ? "resident row tiles " : "chunk buffers ",
             DataAllocation(t, elem_bytes).bytes_per_partition, " x ", t.bufs, " bufs + ", others,
             "row statistics = ", sbuf, " bytes per partition exceed the usable ",
             target.UsableSbufPerPartition()));
}

double RowTolerance(const RowTiling& reduced, double fp32_floor, double fp32_ulps_per_col) {
  if (reduced.dtype != sim::DType::kFp32) return std::ldexp(1.0, -6);
  return fp32_floor + fp32_ulps_per_col * double(reduced.cols) * std::ldexp(1.0, -24);
}

absl::Status CompareRows(std::string_view kernel, const RowTiling& reduced,
                         const std::vector<float>& y,
                         const std::function<void(int64_t, std::vector<double>&)>& reference,
                         const std::function<double(double)>& tolerance) {
  std::vector<double> want(reduced.cols);
  for (int64_t r = 0; r < reduced.rows; ++r) {
    reference(r, want);
    for (int64_t c = 0; c < reduced.cols; ++c) {
      const double got = y[r * reduced.cols + c];
      const double tol = tolerance(want[c]);
      if (!Within(got, want[c], tol)) {
        return WrongAnswer(kernel, StrCat("Y[", r, ",", c, "]"),
                           StrCat("rows=", reduced.rows, ",cols=", reduced.cols), got, want[c],
                           tol);
      }
    }
  }
  return absl::OkStatus();
}

void ReduceForVerify(RowTiling& t) {
  t.tile_rows = std::min<int64_t>(t.tile_rows, 2);
  t.rows = ReducedDim(t.rows, t.tile_rows * t.g, t.shards + 1);
  t.cols = ReducedDim(t.cols, t.chunk, 3);
  DeriveTiling(t);
  t.shards = int(std::min<int64_t>(t.shards, t.tiles));
}

absl::Status RowwiseKernel::ValidateProblem(const Problem& problem,
                                            const sim::Target& target) const {
  if (target.systolic) {
    return absl::InvalidArgumentError(
        StrCat(name(), " needs Vector/Scalar engines; ", target.name, " runs GEMMs only"));
  }
  return CheckProblem(name(), dims(), dtypes(), problem, target);
}

Kernel::Work RowwiseKernel::MinimumWork(const Problem& problem) const {
  const double rows = double(problem.dims.Get("rows").value_or(0));
  const double cols = double(problem.dims.Get("cols").value_or(0));
  auto dtype = sim::ParseDType(problem.dtype);
  const double bytes = dtype.ok() ? sim::DTypeBytes(*dtype) : 2;
  return Work{0, (2 * rows * cols + vectors_ * cols) * bytes};
}

}  // namespace tessel::kernels::rowwise

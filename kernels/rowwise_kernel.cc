#include "kernels/rowwise_kernel.h"

#include <algorithm>

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

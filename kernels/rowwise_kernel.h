// What the row-wise kernels (softmax, layernorm, rmsnorm) share above the step IR of rowwise.h:
// their problem rules, their tiling params and plain config, the reduced problem their Verify
// runs, and their minimum work. Each rule is written here once.
#ifndef TESSEL_KERNELS_ROWWISE_KERNEL_H_
#define TESSEL_KERNELS_ROWWISE_KERNEL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/lowering/planned_kernel.h"
#include "kernels/rowwise.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels::rowwise {

// The params tile_rows, rows_per_partition and chunk, then the kernel's `own` in order, then bufs
// and shards (up to the target's cores).
std::vector<Param> TilingParams(std::vector<Param> own, const sim::Target& target);
// The "resident" param (each kernel lists it among its own, where its order puts it).
Param ResidentParam();

// The plain config: `tiling`'s tile_rows, rows_per_partition and chunk, the kernel's `own`
// values in order, then the tiling's bufs and shards.
Config PlainConfig(const RowTiling& tiling, std::vector<std::pair<std::string, std::string>> own);
// "1" or "0": the plain tiling's resident value.
inline std::string ResidentValue(const RowTiling& tiling) { return tiling.resident ? "1" : "0"; }

// SBUF bytes per partition of `allocations`, all their buffers.
int64_t SbufBytes(const std::vector<sim::Allocation>& allocations);

// The SBUF allocation of the row data: resident row tiles (g rows of every chunk) or streamed
// chunks (g rows of one chunk), `bufs` of them, `elem_bytes` per element.
sim::Allocation DataAllocation(const RowTiling& tiling, int64_t elem_bytes);

// InvalidArgument "SBUF capacity: ..." when `allocations` need more SBUF per partition than
// `target` can use, else OK. The message names the data buffers (DataAllocation with
// `elem_bytes`), then `others` (e.g. "gamma + "), then the row statistics.
absl::Status CheckSbufCapacity(const RowTiling& tiling, int64_t elem_bytes, std::string_view others,
                               const std::vector<sim::Allocation>& allocations,
                               const sim::Target& target);

// The relative tolerance of a row-wise Verify on the `reduced` problem: bf16, a few output
// roundings (2^-6); fp32, `fp32_floor` plus `fp32_ulps_per_col` roundings (2^-24) per column of
// the row (fp32 accumulation over the row).
double RowTolerance(const RowTiling& reduced, double fp32_floor, double fp32_ulps_per_col);

// Compares `y` (row-major [rows, cols] of the `reduced` problem) with a reference in double:
// `reference(r, want)` fills `want` (cols elements) with row r's values, `tolerance(want)` is the
// tolerance of one element. OK on a match; WrongAnswer naming `kernel` at the first element off.
absl::Status CompareRows(std::string_view kernel, const RowTiling& reduced,
                         const std::vector<float>& y,
                         const std::function<void(int64_t, std::vector<double>&)>& reference,
                         const std::function<double(double)>& tolerance);

// Reduces `tiling` (a copy of the full one) to the problem Verify runs: rows per partition,
// chunk, residency and shards kept; 2 partitions per tile (rows are independent, so only the tile
// and shard boundaries matter), shards + 1 row tiles and up to 3 chunks (the last of each
// ragged). Derives, and clamps shards to the row tiles.
void ReduceForVerify(RowTiling& tiling);

// A row-wise kernel: a [rows, cols] problem in bf16 or fp32, on a neuron target.
class RowwiseKernel : public PlannedKernel {
 public:
  // The kernel `name` at `version`, described by `description`, on dims rows and cols in bf16 or
  // fp32. `vectors`: the [cols] parameter vectors the kernel reads (gamma, beta).
  RowwiseKernel(std::string name, int version, std::string description, Steps steps, int vectors)
      : PlannedKernel(
            {std::move(name), version, std::move(description), {"rows", "cols"}, {"bf16", "fp32"}},
            std::move(steps)),
        vectors_(vectors) {}

  // CheckProblem; also rejects systolic targets (they run GEMMs only).
  absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const final;
  // No TensorE flops; X read and Y written once, and each vector read once.
  Work MinimumWork(const Problem& problem) const final;

 private:
  int vectors_;
};

}  // namespace tessel::kernels::rowwise

#endif  // TESSEL_KERNELS_ROWWISE_KERNEL_H_

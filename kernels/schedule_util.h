// Helpers shared by the kernels' spaces, lowerings and CPU verifications: config parsing with
// readable errors, problem-dim checks, dtype rounding as the hardware stores values, the reduced
// dims Verify runs, and contiguous splits over cores.
#ifndef TESSEL_KERNELS_SCHEDULE_UTIL_H_
#define TESSEL_KERNELS_SCHEDULE_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "sim/target.h"

namespace tessel::kernels {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// OK when `problem` names exactly `dims` (each positive, or non-negative when listed in
// `may_be_zero`) and a dtype in `dtypes` that `target` supports; InvalidArgument naming the kernel
// and what is wrong otherwise.
absl::Status CheckProblem(std::string_view kernel, const std::vector<std::string>& dims,
                          const std::vector<std::string>& dtypes, const Problem& problem,
                          const sim::Target& target,
                          const std::vector<std::string>& may_be_zero = {});

// The integer value of `name`, InvalidArgument when missing, malformed or below `min`.
absl::StatusOr<int64_t> IntParam(const Config& config, std::string_view name, int64_t min = 1);
// One integer param for IntParams: where its value goes and its smallest allowed value.
struct IntField {
  std::string_view name;
  int64_t* out;
  int64_t min = 1;
};
// Reads every field with IntParam, in order; the first error.
absl::Status IntParams(const Config& config, std::initializer_list<IntField> fields);
// The value of `name` when it is one of `allowed`; InvalidArgument listing them otherwise.
absl::StatusOr<std::string> ChoiceParam(const Config& config, std::string_view name,
                                        const std::vector<std::string>& allowed);
// One choice param for ChoiceParams: its allowed values and where its value goes.
struct ChoiceField {
  std::string_view name;
  std::vector<std::string> allowed;
  std::string* out;
};
// Reads every field with ChoiceParam, in order; the first error.
absl::Status ChoiceParams(const Config& config, std::initializer_list<ChoiceField> fields);

// The TensorE rules for one matmul tile on `target`: the contraction `k` (shown as `k_name`)
// within the K limit for `dtype` (shown as `dtype_name`), the stationary free size within the
// stationary limit, the moving free size within the moving limit and within one fp32 PSUM bank.
// `stationary_label` starts the stationary message, e.g. "stationary=a: tile_m=".
// InvalidArgument naming the broken limit.
absl::Status CheckMatmulTile(const sim::Target& target, sim::DType dtype,
                             std::string_view dtype_name, std::string_view k_name, int64_t k,
                             std::string_view stationary_label, int64_t stationary_free,
                             int64_t moving_free);

// "1", "2", "4", ... up to the target's cores per chip.
std::vector<std::string> ShardValues(const sim::Target& target);

// Rounds to the nearest value with `mantissa_bits` explicit mantissa bits (ties to even), the
// smallest normal exponent `min_exp` (gradual underflow below) and saturation at `max_value`.
float RoundTo(float x, int mantissa_bits, int min_exp, float max_value);
// `x` as stored in `dtype` (fp32: unchanged; bf16, fp16, fp8 e4m3: rounded; fp8 saturates at
// sim::kFp8MaxFinite).
float RoundToDType(float x, sim::DType dtype);

// Bytes of one output element of a matmul-family kernel: fp32 for fp32 inputs, else bf16.
inline int OutputBytes(sim::DType dtype) { return dtype == sim::DType::kFp32 ? 4 : 2; }
// `x` as such an output is stored (fp32: unchanged; otherwise rounded to bf16).
inline float RoundToOutput(float x, sim::DType dtype) {
  return dtype == sim::DType::kFp32 ? x : RoundToDType(x, sim::DType::kBf16);
}

// The reduced dimension Verify runs: the full dim when it is at most `keep` tiles, else `keep - 1`
// full tiles plus a ragged tail (the original tail, or half a tile plus one).
int64_t ReducedDim(int64_t dim, int64_t tile, int64_t keep);

// Items [begin, end) of `count` that core `core` of `shards` gets (contiguous, balanced).
inline int64_t ShardBegin(int64_t count, int shards, int core) { return count * core / shards; }

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_SCHEDULE_UTIL_H_

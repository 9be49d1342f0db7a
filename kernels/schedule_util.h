// Helpers shared by the kernels' spaces, lowerings and CPU verifications: config parsing with
// readable errors, problem-dim checks, dtype rounding as the hardware stores values, the reduced
// dims Verify runs, and contiguous splits over cores.
#ifndef TESSEL_KERNELS_SCHEDULE_UTIL_H_
#define TESSEL_KERNELS_SCHEDULE_UTIL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
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

// Rounds to the nearest value with `mantissa_bits` (< 23) explicit mantissa bits (ties to even),
// the smallest normal exponent `min_exp` (>= -126; gradual underflow below) and saturation at
// `max_value`. Inline, on the float's bits: the CPU runs of Verify round every element they
// store (schedule_util_test compares it with the arithmetic definition).
inline float RoundTo(float x, int mantissa_bits, int min_exp, float max_value) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  const int biased = int((bits >> 23) & 0xFF);
  if (biased == 0xFF || (bits & 0x7FFFFFFFu) == 0) return x;  // inf, NaN, +-0
  float rounded;
  if (biased != 0 && biased - 127 >= min_exp) {
    // A normal number keeps its exponent's quantum: drop the low 23 - mantissa_bits bits, ties
    // to even (a carry moves into the exponent, which is the rounding up to the next binade).
    const int drop = 23 - mantissa_bits;
    bits += (uint32_t{1} << (drop - 1)) - 1 + ((bits >> drop) & 1);
    rounded = std::bit_cast<float>(bits & ~((uint32_t{1} << drop) - 1));
  } else {
    // Below the smallest normal exponent the quantum is fixed (both steps are exact).
    const float quantum = std::ldexp(1.0f, min_exp - mantissa_bits);
    rounded = std::nearbyint(x / quantum) * quantum;
  }
  return std::clamp(rounded, -max_value, max_value);
}
// `x` as stored in `dtype` (fp32: unchanged; bf16, fp16, fp8 e4m3: rounded; fp8 saturates at
// sim::kFp8MaxFinite).
inline float RoundToDType(float x, sim::DType dtype) {
  switch (dtype) {
    case sim::DType::kBf16:
      return RoundTo(x, 7, -126, std::numeric_limits<float>::max());
    case sim::DType::kFp8:
      return RoundTo(x, 3, -6, sim::kFp8MaxFinite);  // e4m3, saturating
    case sim::DType::kFp16:
      return RoundTo(x, 10, -14, 65504.0f);
    default:
      return x;
  }
}

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

// What the kernels' Verify steps share: seeded random inputs, NaN-filled outputs (a value the
// schedule never wrote cannot pass), the wrong-answer message, and the GEMM reference check with
// its tolerance (matmul and bmm).
#ifndef TESSEL_KERNELS_LOWERING_VERIFY_UTIL_H_
#define TESSEL_KERNELS_LOWERING_VERIFY_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "schema/key.h"
#include "sim/program.h"

namespace tessel::kernels {

// The generator of a Verify run's inputs: seeded by the config (so reruns of one config agree and
// different configs see different data) xor `salt` (the kernel's mix of the reduced dims).
std::mt19937_64 VerifyRng(const Config& config, uint64_t salt);

// `count` values scale x uniform[-1, 1), each rounded to `dtype` as the hardware would store it.
std::vector<float> RandomInputs(size_t count, std::mt19937_64& rng, sim::DType dtype,
                                float scale = 1.0f);

// A [rows, cols] row-major input whose rows rise: element (r, c) is uniform[-spread, spread)
// + a per-row offset drawn from the same distribution + rise x c / cols, rounded to `dtype` (the
// row-wise kernels' inputs: every chunk of a row matters, and a running max grows chunk by chunk).
std::vector<float> RisingRows(int64_t rows, int64_t cols, std::mt19937_64& rng, sim::DType dtype,
                              float spread, float rise);

// An output buffer of `count` NaNs.
std::vector<float> Unwritten(size_t count);

// Whether `got` is within `tolerance` of `want` (false for NaN).
inline bool Within(double got, double want, double tolerance) {
  return std::abs(got - want) <= tolerance;
}

// DataLoss "<kernel> wrong answer at <where> of the reduced problem <reduced>: got G, want W
// (tolerance T)", the message every kernel's Verify returns on a mismatch.
absl::Status WrongAnswer(std::string_view kernel, std::string_view where, std::string_view reduced,
                         double got, double want, double tolerance);

// The CPU runs' fp32 accumulation of a vector times a matrix: out[j] += sum over k < depth of
// a[k] * b[k * ldb + j], for j < cols, each sum in k order (a PSUM row accumulating along the
// contraction). Eight columns at a time in registers across the whole depth: the same multiply
// and add per element in the same order as one column at a time, so the same bits.
void AccumulateRowTimesMatrix(const float* a, const float* b, int64_t depth, int64_t cols,
                              int64_t ldb, float* out);

// A batch of GEMMs C[b] = A[b] x B[b] (A[b] M x K, B[b] K x N, C[b] M x N, all row-major and
// batches contiguous) as the CPU run of a schedule produced it.
struct GemmResult {
  std::string_view kernel;  // names the kernel in the message
  std::string reduced;      // the reduced problem, for the message
  bool batched = false;     // the message shows C[b,i,j] (else C[i,j])
  int64_t batches = 1, m = 0, n = 0, k = 0;
  sim::DType dtype = sim::DType::kBf16;  // the inputs' dtype (the output's rounding follows it)
  // Partial sums rounded to the output dtype on the way (an SBUF accumulator in that dtype).
  int acc_roundings = 0;
  const std::vector<float>* a = nullptr;
  const std::vector<float>* b = nullptr;
  const std::vector<float>* c = nullptr;
};
// Compares `result` with a plain reference in double. The tolerance is the output's rounding
// (2^-8 relative, 2^-22 for fp32) plus fp32 accumulation error (4 K 2^-24 of the sum of
// |products|) plus, per rounded partial sum, the output's rounding of the sum of |products| (a
// partial sum is at most that). OK on a match; WrongAnswer at the first element off.
absl::Status CheckGemm(const GemmResult& result);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_LOWERING_VERIFY_UTIL_H_

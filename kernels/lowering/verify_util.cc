#include "kernels/lowering/verify_util.h"

#include <cmath>
#include <functional>
#include <limits>

#include "kernels/schedule_util.h"
#include "schema/strings.h"

namespace tessel::kernels {

std::mt19937_64 VerifyRng(const Config& config, uint64_t salt) {
  return std::mt19937_64(std::hash<std::string>()(config.ToString()) ^ salt);
}

std::vector<float> RandomInputs(size_t count, std::mt19937_64& rng, sim::DType dtype, float scale) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& x : values) x = RoundToDType(scale * uniform(rng), dtype);
  return values;
}

std::vector<float> RisingRows(int64_t rows, int64_t cols, std::mt19937_64& rng, sim::DType dtype,
                              float spread, float rise) {
  std::uniform_real_distribution<float> uniform(-spread, spread);
  std::vector<float> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float offset = uniform(rng);
    for (int64_t c = 0; c < cols; ++c) {
      x[r * cols + c] = RoundToDType(uniform(rng) + offset + rise * float(c) / float(cols), dtype);
    }
  }
  return x;
}

std::vector<float> Unwritten(size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

absl::Status WrongAnswer(std::string_view kernel, std::string_view where, std::string_view reduced,
                         double got, double want, double tolerance) {
  return absl::DataLossError(StrCat(kernel, " wrong answer at ", where, " of the reduced problem ",
                                    reduced, ": got ", got, ", want ", want, " (tolerance ",
                                    tolerance, ")"));
}

absl::Status CheckGemm(const GemmResult& r) {
  const std::vector<float>& a = *r.a;
  const std::vector<float>& b = *r.b;
  const std::vector<float>& c = *r.c;
  const double out_eps = r.dtype == sim::DType::kFp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  const double acc_eps = 4.0 * double(r.k) * std::ldexp(1.0, -24);
  std::vector<double> ref_row(r.n), abs_row(r.n);
  for (int64_t batch = 0; batch < r.batches; ++batch) {
    const float* ab = &a[batch * r.m * r.k];
    const float* bb = &b[batch * r.k * r.n];
    for (int64_t i = 0; i < r.m; ++i) {
      std::fill(ref_row.begin(), ref_row.end(), 0.0);
      std::fill(abs_row.begin(), abs_row.end(), 0.0);
      for (int64_t kk = 0; kk < r.k; ++kk) {
        const double av = ab[i * r.k + kk];
        for (int64_t j = 0; j < r.n; ++j) {
          const double prod = av * bb[kk * r.n + j];
          ref_row[j] += prod;
          abs_row[j] += std::abs(prod);
        }
      }
      for (int64_t j = 0; j < r.n; ++j) {
        const double got = c[(batch * r.m + i) * r.n + j];
        const double tol = out_eps * std::abs(ref_row[j]) +
                           (acc_eps + r.acc_roundings * out_eps) * abs_row[j] + 1e-30;
        if (!Within(got, ref_row[j], tol)) {
          const std::string where =
              r.batched ? StrCat("C[", batch, ",", i, ",", j, "]") : StrCat("C[", i, ",", j, "]");
          return WrongAnswer(r.kernel, where, r.reduced, got, ref_row[j], tol);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::kernels

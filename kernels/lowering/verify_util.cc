#include "kernels/lowering/verify_util.h"

#include <cmath>
#include <cstdint>
#include <cstring>
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

void AccumulateRowTimesMatrix(const float* a, const float* b, int64_t depth, int64_t cols,
                              int64_t ldb, float* out) {
  using Float4 = float __attribute__((vector_size(16)));
  auto load4 = [](const float* p) {
    Float4 v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    Float4 lo = load4(out + j), hi = load4(out + j + 4);
    for (int64_t k = 0; k < depth; ++k) {
      const float* bp = b + k * ldb + j;
      lo += a[k] * load4(bp);
      hi += a[k] * load4(bp + 4);
    }
    std::memcpy(out + j, &lo, sizeof(lo));
    std::memcpy(out + j + 4, &hi, sizeof(hi));
  }
  for (; j < cols; ++j) {
    float sum = out[j];
    for (int64_t k = 0; k < depth; ++k) sum += a[k] * b[k * ldb + j];
    out[j] = sum;
  }
}

namespace {

// ref[j] = sum over kk of a[kk] * b[kk * n + j] and abs[j] = sum of the products' magnitudes, in
// double, for j < n, each sum in kk order. Four columns at a time in two-double vectors held in
// registers across the whole K (the same operations in the same order per column as one column
// at a time, so the same bits); |p| clears the sign bit, as std::abs does.
void ReferenceRow(const float* a, const float* b, int64_t k, int64_t n, double* ref, double* abs) {
  using Double2 = double __attribute__((vector_size(16)));
  using Bits2 = uint64_t __attribute__((vector_size(16)));
  const Bits2 magnitude = {~(uint64_t{1} << 63), ~(uint64_t{1} << 63)};
  auto fabs2 = [&](Double2 p) {
    Bits2 bits;
    std::memcpy(&bits, &p, sizeof(p));
    bits &= magnitude;
    std::memcpy(&p, &bits, sizeof(p));
    return p;
  };
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    Double2 r0 = {}, r1 = {}, s0 = {}, s1 = {};
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = a[kk];
      const float* bp = b + kk * n + j;
      const Double2 p0 = av * Double2{bp[0], bp[1]}, p1 = av * Double2{bp[2], bp[3]};
      r0 += p0, r1 += p1;
      s0 += fabs2(p0), s1 += fabs2(p1);
    }
    const Double2 rs[2] = {r0, r1}, ss[2] = {s0, s1};
    std::memcpy(ref + j, rs, sizeof(rs));
    std::memcpy(abs + j, ss, sizeof(ss));
  }
  for (; j < n; ++j) {
    double r = 0, s = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double prod = double(a[kk]) * b[kk * n + j];
      r += prod;
      s += std::abs(prod);
    }
    ref[j] = r, abs[j] = s;
  }
}

}  // namespace

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
      ReferenceRow(ab + i * r.k, bb, r.k, r.n, ref_row.data(), abs_row.data());
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

#include "kernels/schedule_util.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

using sim::DType;

// RoundTo works on the float's bits; its definition is arithmetic: the quantum of x's binade
// (2^(max(exponent, min_exp) - mantissa_bits)), ties to even, then saturation. Compared bit for
// bit on a million float patterns per dtype spread over every exponent, sign and mantissa (the
// whole 2^32 were compared once when it was written: no difference for bf16, fp16 or fp8).
float RoundToByDefinition(float x, int mantissa_bits, int min_exp, float max_value) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exp = 0;
  std::frexp(x, &exp);  // x = f * 2^exp, 0.5 <= |f| < 1
  exp = std::max(exp - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - mantissa_bits);
  const double rounded = std::nearbyint(double(x) / quantum) * quantum;
  return float(std::clamp(rounded, -double(max_value), double(max_value)));
}

TEST(RoundToTest, TheBitRoundingEqualsTheArithmeticDefinition) {
  struct Format {
    int mantissa_bits, min_exp;
    float max_value;
  };
  const Format formats[] = {{7, -126, std::numeric_limits<float>::max()},  // bf16
                            {10, -14, 65504.0f},                           // fp16
                            {3, -6, sim::kFp8MaxFinite}};                  // fp8 e4m3
  for (const Format& f : formats) {
    int64_t compared = 0;
    // A stride prime to 2^32 visits patterns of every exponent and low-bit residue; the ties
    // (the dropped bits exactly half a quantum) and their neighbours are added.
    auto check = [&](uint32_t bits) {
      const float x = std::bit_cast<float>(bits);
      const float want = RoundToByDefinition(x, f.mantissa_bits, f.min_exp, f.max_value);
      const float got = RoundTo(x, f.mantissa_bits, f.min_exp, f.max_value);
      ++compared;
      if (std::isnan(want)) return std::isnan(got);
      return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
    };
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093) {
      ASSERT_TRUE(check(uint32_t(b))) << "m=" << f.mantissa_bits << " bits=" << b;
    }
    const uint32_t half = uint32_t{1} << (22 - f.mantissa_bits);
    for (uint32_t high = 0; high < 512; ++high) {  // sign and exponent
      for (uint32_t mant : {0u, 1u, 2u, 3u, 0x7Fu}) {
        const uint32_t base = (high << 23) | (mant << (23 - f.mantissa_bits));
        for (uint32_t bits : {base + half - 1, base + half, base + half + 1, base - 1}) {
          ASSERT_TRUE(check(bits)) << "m=" << f.mantissa_bits << " bits=" << bits;
        }
      }
    }
    EXPECT_GT(compared, 1000000);
  }
}

// fp8 is NKI's float8_e4m3 (IEEE-style e4m3, as NeuronCore-v2 and -v3 hold it): eight steps of 16
// between 128 and 240, nothing finite above 240 (issue 16: "FP8 range, 240 before trn3").
TEST(RoundToDTypeTest, Fp8IsTheIeeeStyleE4m3ThatSaturatesAt240) {
  EXPECT_EQ(sim::kFp8MaxFinite, 240.0f);
  EXPECT_EQ(RoundToDType(224.0f, DType::kFp8), 224.0f);
  EXPECT_EQ(RoundToDType(232.0f, DType::kFp8), 224.0f);  // a tie goes to the even mantissa
  EXPECT_EQ(RoundToDType(236.0f, DType::kFp8), 240.0f);
  EXPECT_EQ(RoundToDType(239.0f, DType::kFp8), 240.0f);
  EXPECT_EQ(RoundToDType(300.0f, DType::kFp8), 240.0f);
  EXPECT_EQ(RoundToDType(448.0f, DType::kFp8), 240.0f);  // e4m3fn's maximum is not representable
  EXPECT_EQ(RoundToDType(-1e6f, DType::kFp8), -240.0f);
  EXPECT_EQ(RoundToDType(0.3f, DType::kFp8), 0.3125f);
  EXPECT_EQ(RoundToDType(std::ldexp(1.0f, -9), DType::kFp8), std::ldexp(1.0f, -9));  // subnormal
}

TEST(RoundToDTypeTest, Bf16AndFp16KeepTheirOwnRanges) {
  EXPECT_EQ(RoundToDType(1e6f, DType::kFp16), 65504.0f);
  EXPECT_EQ(RoundToDType(1e30f, DType::kBf16), RoundTo(1e30f, 7, -126, 3.4e38f));
  EXPECT_EQ(RoundToDType(1.00390625f, DType::kBf16), 1.0f);  // 1 + 2^-8: a tie, to even
  EXPECT_EQ(RoundToDType(0.1f, DType::kFp32), 0.1f);
}

}  // namespace
}  // namespace tessel::kernels

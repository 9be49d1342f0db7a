#include "kernels/schedule_util.h"

#include <cmath>

#include "gtest/gtest.h"
#include "sim/target.h"

namespace tessel::kernels {
namespace {

using sim::DType;

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

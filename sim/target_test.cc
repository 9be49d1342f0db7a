#include "sim/target.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel::sim {
namespace {

using ::testing::HasSubstr;

TEST(TargetTest, Snc2HasTheDocumentedNumbers) {
  absl::StatusOr<Target> t = LoadTarget("snc2");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "snc2");
  EXPECT_GE(t->version, 1);
  EXPECT_FALSE(t->systolic);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kTensor)], 2);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kScalar)], 4);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kGpSimd)], 4);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kVector)], 5);
  EXPECT_EQ(t->cores_per_chip, 2);
  EXPECT_EQ(t->UsableSbufPerPartition(), (192 - 16) * 1024);
  EXPECT_EQ(t->PsumBytesPerPartition(), 16 * 1024);
  EXPECT_EQ(t->dma_engines, 16);
  EXPECT_TRUE(t->port_conflict_vector_gpsimd_sbuf);
  // NeuronCore-v2: fp8 at the bf16 rate (trainium.rst: 190 FP16/BF16/cFP8/TF32 TFLOPS per chip).
  EXPECT_TRUE(t->SupportsDType(DType::kFp8));
  EXPECT_EQ(t->PeakTflops(DType::kFp8), t->PeakTflops(DType::kBf16));
  EXPECT_EQ(t->MaxMatmulK(DType::kFp8), 128) << "no double-row mode";
  EXPECT_EQ(t->TransposePsumDType(DType::kBf16), DType::kFp32) << "a transpose is a matmul result";
  EXPECT_DOUBLE_EQ(t->HbmGbps(1), 410);
  EXPECT_DOUBLE_EQ(t->HbmGbps(2), 820);
}

TEST(TargetTest, Snc3DiffersWhereTheHardwareDoes) {
  absl::StatusOr<Target> t = LoadTarget("snc3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cores_per_chip, 8);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kTensor)], 2);
  EXPECT_EQ(t->ticks_per_cycle[int(EngineKind::kVector)], 5);
  EXPECT_EQ(t->UsableSbufPerPartition(), (224 - 16) * 1024);
  EXPECT_TRUE(t->SupportsDType(DType::kFp8));
  EXPECT_EQ(t->MaxMatmulK(DType::kFp8), 256);
  EXPECT_FALSE(t->port_conflict_vector_scalar_psum);
  // NKI nc_transpose on NeuronCore-v3: a TensorE transpose's PSUM result has the input's dtype.
  EXPECT_EQ(t->TransposePsumDType(DType::kBf16), DType::kBf16);
  // 8 cores x 362 GB/s = 2896 GB/s, just under the chip's 2.9 TB/s.
  EXPECT_DOUBLE_EQ(t->HbmGbps(8), 2896);
  EXPECT_DOUBLE_EQ(t->HbmGbps(1), 362);
}

TEST(TargetTest, SystolicNamesAreParsedForAnySize) {
  absl::StatusOr<Target> t = LoadTarget("systolic-32x16-os");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->systolic);
  EXPECT_EQ(t->systolic_rows, 32);
  EXPECT_EQ(t->systolic_cols, 16);
  EXPECT_EQ(t->dataflow, Dataflow::kOutputStationary);
  EXPECT_EQ(t->name, "systolic-32x16-os");
}

TEST(TargetTest, UnknownTargetIsNotFoundListingKnownNames) {
  absl::StatusOr<Target> t = LoadTarget("snc9");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("snc2, snc3"));
  for (const char* bad :
       {"systolic-128x128-xs", "systolic-0x4-ws", "systolic-12-ws", "systolic-axb-os"}) {
    EXPECT_EQ(LoadTarget(bad).status().code(), absl::StatusCode::kNotFound) << bad;
  }
}

TEST(TargetTest, TargetNamesAreSortedAndLoadable) {
  std::vector<std::string> names = TargetNames();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& name : names) EXPECT_TRUE(LoadTarget(name).ok()) << name;
}

TEST(TargetTest, EveryNumberNeedsASource) {
  absl::StatusOr<Target> t = ParseTargetJson(R"({"name": "x", "version": 1, "description": "d",
      "kind": {"value": "neuron"}})");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'kind' has no source"));
}

TEST(TargetTest, ParseDTypeRoundTrips) {
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_EQ(*ParseDType(DTypeName(DType(i))), DType(i));
  }
  EXPECT_FALSE(ParseDType("int4").ok());
}

}  // namespace
}  // namespace tessel::sim

#include "worker/measure.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace tessel::worker {
namespace {

TEST(RunSeedTest, IsDeterministicAndDiffersPerRun) {
  EXPECT_EQ(RunSeed(7, 2), RunSeed(7, 2));
  EXPECT_NE(RunSeed(7, 1), RunSeed(7, 2));
  EXPECT_NE(RunSeed(7, 1), RunSeed(8, 1));
}

TEST(ShouldVerifyTest, AlwaysAndNeverAreConstant) {
  EXPECT_TRUE(*ShouldVerify("always", 1, 1));
  EXPECT_FALSE(*ShouldVerify("never", 1, 1));
  EXPECT_FALSE(*ShouldVerify("", 1, 1));
}

TEST(ShouldVerifyTest, SampleSelectsAboutTheFractionDeterministically) {
  int selected = 0;
  for (int64_t id = 0; id < 10000; ++id) {
    bool chosen = *ShouldVerify("sample:0.25", id, 42);
    EXPECT_EQ(chosen, *ShouldVerify("sample:0.25", id, 42));
    selected += chosen;
  }
  EXPECT_GT(selected, 2200);
  EXPECT_LT(selected, 2800);
  EXPECT_FALSE(*ShouldVerify("sample:0", 3, 3));
  EXPECT_TRUE(*ShouldVerify("sample:1", 3, 3));
}

TEST(ShouldVerifyTest, MalformedPoliciesAreRejectedWithTheirText) {
  for (const char* policy : {"sometimes", "sample:", "sample:x", "sample:1.5", "sample:-1"}) {
    absl::StatusOr<bool> verify = ShouldVerify(policy, 1, 1);
    ASSERT_FALSE(verify.ok()) << policy;
    EXPECT_NE(verify.status().message().find(policy), absl::string_view::npos);
  }
}

TEST(StatsJsonTest, HasEveryEngineAndTheMemoryFigures) {
  sim::SimResult result;
  result.engines[0].busy_frac = 0.5;
  result.hbm_bytes = 1024;
  result.sbuf_peak_bytes = 10;
  result.psum_peak_bytes = 20;
  result.roofline_ns = 3.5;
  result.tensor_cycles = 99;
  nlohmann::json stats = nlohmann::json::parse(StatsJson(result));
  EXPECT_EQ(stats["engines"]["tensor"]["busy_frac"], 0.5);
  for (const char* engine : {"tensor", "vector", "scalar", "gpsimd", "dma"}) {
    EXPECT_TRUE(stats["engines"].contains(engine)) << engine;
  }
  EXPECT_EQ(stats["hbm_bytes"], 1024);
  EXPECT_EQ(stats["sbuf_peak_bytes"], 10);
  EXPECT_EQ(stats["psum_peak_bytes"], 20);
  EXPECT_EQ(stats["roofline_ns"], 3.5);
  EXPECT_EQ(stats["tensor_cycles"], 99);
}

}  // namespace
}  // namespace tessel::worker

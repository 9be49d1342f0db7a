#include "kernels/softmax.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using test_support::Load;
using test_support::Parse;
using test_support::Rows;
using test_support::RunSharded;
using test_support::ShardedRuns;

using ::testing::HasSubstr;

const Kernel& Softmax() { return *FindKernel("softmax"); }

using FaultGuard = test_support::FaultGuard<SoftmaxFault, SetSoftmaxFaultForTesting>;

TEST(SoftmaxTest, DefaultIsValidAndVerifiesForAlignedAndRaggedShapesOnBothTargets) {
  test_support::ExpectDefaultsWorkOnSnc2AndSnc3(
      Softmax(), {Rows(4096, 4096), Rows(1000, 300), Rows(1, 1), Rows(77, 5000, "fp32")});
}

TEST(SoftmaxTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Rows(4096, 8192);
  Space space = *Softmax().SpaceFor(p, t);
  Config base = Softmax().Default(p, t);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  test_support::ExpectRowTilingRulesSayWhy(Softmax());
  EXPECT_THAT(reason({{"chunk", "8192"}, {"resident", "1"}, {"algorithm", "online"}}),
              HasSubstr("algorithm=online needs more than one chunk"));
  EXPECT_THAT(reason({{"shards", "4"}}), HasSubstr("shards=4 is not one of 1|2"));
  Config four = base;
  four.Set("shards", "4");
  EXPECT_THAT(Softmax().Lower(p, four, t).status().message(),
              HasSubstr("shards=4 exceeds the 2 cores per chip of snc2"));
  EXPECT_TRUE(space.Validate(base).ok());
  Space fp32 = *Softmax().SpaceFor(Rows(4096, 8192, "fp32"), t);
  Config c = base;
  c.Set("exp_dtype", "bf16");
  EXPECT_THAT(std::string(fp32.Validate(c).message()), HasSubstr("exp_dtype=bf16"));
  EXPECT_THAT(Softmax().ValidateProblem(Rows(8, 8, "fp8"), t).message(), HasSubstr("dtype"));
  EXPECT_THAT(Softmax().ValidateProblem(Rows(8, 8), Load("systolic-128x128-ws")).message(),
              HasSubstr("runs GEMMs only"));
  Problem missing{Dims{{"rows", 8}}, "bf16"};
  EXPECT_THAT(Softmax().ValidateProblem(missing, t).message(), HasSubstr("dim cols"));
}

// Random valid configs on random shapes (ragged included, sharded ones on snc3's 8 cores).
TEST(SoftmaxTest, TwoHundredRandomValidConfigsMatchTheReference) {
  std::mt19937_64 rng(7);
  int online = 0;
  test_support::ExpectRowwiseSweep(Softmax(), rng, [&](const Problem&, const Config& c) {
    online += c.Get("algorithm") == "online";
  });
  EXPECT_GE(online, 40);
}

TEST(SoftmaxTest, BrokenSchedulesAreCaught) {
  sim::Target t = Load("snc2");
  Problem p = Rows(1000, 1300);  // ragged rows and a ragged last chunk of 276 columns
  Config multi = Parse(
      "tile_rows=128,rows_per_partition=2,chunk=512,algorithm=multi_pass,resident=1,"
      "scale_engine=vector,exp_dtype=fp32,bufs=2,shards=2");
  Config online = multi;
  online.Set("algorithm", "online");
  ASSERT_TRUE(Softmax().Verify(p, multi, t).ok());
  ASSERT_TRUE(Softmax().Verify(p, online, t).ok());
  {
    FaultGuard fault(SoftmaxFault::kDropTailChunkFromSum);
    absl::Status s = Softmax().Verify(p, multi, t);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("softmax wrong answer"));
    EXPECT_EQ(Softmax().Verify(p, online, t).code(), absl::StatusCode::kDataLoss);
  }
  {
    FaultGuard fault(SoftmaxFault::kSkipOnlineRescale);
    EXPECT_EQ(Softmax().Verify(p, online, t).code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(Softmax().Verify(p, multi, t).ok());  // multi-pass has no rescaling
  }
}

// sum_engine=scalar: the exp instruction also takes its row sum on ScalarE (NKI
// activation_reduce), so VectorE no longer reduces every chunk; the result still verifies, in
// both algorithms, and a config stored before the parameter existed reads as sum_engine=vector.
TEST(SoftmaxTest, TheRowSumCanRideOnTheExpInstruction) {
  const Problem p{Dims{{"rows", 4096}, {"cols", 4096}}, "bf16"};
  const sim::Target t = Load("snc3");
  for (const char* algorithm : {"multi_pass", "online"}) {
    const std::string base =
        std::string(
            "tile_rows=128,rows_per_partition=2,chunk=2048,resident=1,scale_engine=vector,"
            "exp_dtype=bf16,bufs=3,shards=1,algorithm=") +
        algorithm;
    absl::StatusOr<sim::SimResult> vector =
        Evaluate(Softmax(), p, Parse(base + ",sum_engine=vector"), t);
    absl::StatusOr<sim::SimResult> scalar =
        Evaluate(Softmax(), p, Parse(base + ",sum_engine=scalar"), t);
    absl::StatusOr<sim::SimResult> stored = Evaluate(Softmax(), p, Parse(base), t);
    ASSERT_TRUE(vector.ok() && scalar.ok() && stored.ok()) << algorithm;
    const int v = int(sim::EngineKind::kVector);
    EXPECT_LT(scalar->engines[v].busy_ticks, vector->engines[v].busy_ticks) << algorithm;
    EXPECT_LT(scalar->time_ns, vector->time_ns) << algorithm;
    EXPECT_EQ(stored->time_ns, vector->time_ns) << algorithm;
    const Problem small{Dims{{"rows", 1000}, {"cols", 5000}}, "bf16"};
    const absl::Status verified = Softmax().Verify(small, Parse(base + ",sum_engine=scalar"), t);
    EXPECT_TRUE(verified.ok()) << algorithm << ": " << verified;
  }
}

TEST(SoftmaxTest, LargeShapesHaveThousandsOfValidConfigs) {
  test_support::ExpectValidConfigsOnSnc2AndSnc3(Softmax(), Rows(8192, 8192), 2000);
}

TEST(SoftmaxTest, ResidencyReadsXOnceAndStreamingReadsItThreeTimes) {
  // tile_rows=128,rows_per_partition=1,chunk=1024,algorithm=multi_pass,resident=0,
  // scale_engine=vector,exp_dtype=fp32,bufs=2,shards=1
  const Config streaming = test_support::RowwiseConfig({{"algorithm", "multi_pass"},
                                                        {"resident", "0"},
                                                        {"scale_engine", "vector"},
                                                        {"exp_dtype", "fp32"}});
  const std::optional<std::vector<sim::SimResult>> runs = test_support::ExpectRowwiseHbmPasses(
      Softmax(), /*vector_bytes=*/0,
      {{streaming, 4},
       {test_support::With(streaming, {{"resident", "1"}}), 2},
       {test_support::With(streaming, {{"algorithm", "online"}}), 3}});
  ASSERT_TRUE(runs.has_value());
  EXPECT_LT((*runs)[1].time_ns, (*runs)[0].time_ns);  // resident beats streaming
}

TEST(SoftmaxTest, ShardingSplitsRowTilesOverCores) {
  sim::Target t = Load("snc3");
  Problem p = Rows(4096, 2048);
  std::optional<ShardedRuns> runs = RunSharded(Softmax(), p, Softmax().Default(p, t), 8, t);
  ASSERT_TRUE(runs);
  EXPECT_GT(runs->one.time_ns / runs->sharded.time_ns, 4.0);
}

}  // namespace
}  // namespace tessel::kernels

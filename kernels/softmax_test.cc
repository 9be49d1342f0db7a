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
using test_support::RandomRows;
using test_support::Rows;
using test_support::RunSharded;
using test_support::ShardedRuns;

using ::testing::HasSubstr;

const Kernel& Softmax() { return *FindKernel("softmax"); }

using FaultGuard = test_support::FaultGuard<SoftmaxFault, SetSoftmaxFaultForTesting>;

TEST(SoftmaxTest, DefaultIsValidAndVerifiesForAlignedAndRaggedShapesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Rows(4096, 4096), Rows(1000, 300), Rows(1, 1), Rows(77, 5000, "fp32")}) {
      const std::optional<sim::SimResult> r = test_support::ExpectDefaultWorks(Softmax(), p, t);
      ASSERT_TRUE(r.has_value());
      EXPECT_GT(RooflineNs(Softmax(), p, t), 0);
    }
  }
}

TEST(SoftmaxTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Rows(4096, 8192);
  Space space = *Softmax().SpaceFor(p, t);
  Config base = Softmax().Default(p, t);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  EXPECT_THAT(reason({{"chunk", "8192"}, {"rows_per_partition", "8"}, {"resident", "1"}}),
              HasSubstr("SBUF capacity"));
  EXPECT_THAT(reason({{"chunk", "16384"}}), HasSubstr("chunk=16384 is redundant"));
  EXPECT_THAT(reason({{"chunk", "8192"}, {"resident", "0"}}),
              HasSubstr("resident=0 needs more than one chunk"));
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
  Space small = *Softmax().SpaceFor(Rows(100, 8192), t);
  c = Softmax().Default(Rows(100, 8192), t);
  c.Set("shards", "2");
  EXPECT_THAT(std::string(small.Validate(c).message()), HasSubstr("shards=2 exceeds the 1 row"));
  EXPECT_THAT(Softmax().ValidateProblem(Rows(8, 8, "fp8"), t).message(), HasSubstr("dtype"));
  EXPECT_THAT(Softmax().ValidateProblem(Rows(8, 8), Load("systolic-128x128-ws")).message(),
              HasSubstr("runs GEMMs only"));
  Problem missing{Dims{{"rows", 8}}, "bf16"};
  EXPECT_THAT(Softmax().ValidateProblem(missing, t).message(), HasSubstr("dim cols"));
}

// Random valid configs on random shapes (ragged included, sharded ones on snc3's 8 cores).
TEST(SoftmaxTest, TwoHundredRandomValidConfigsMatchTheReference) {
  std::mt19937_64 rng(7);
  int sharded = 0, ragged = 0, online = 0;
  const test_support::SweepCounts n = test_support::VerifyRandomValidConfigs(
      Softmax(), rng, RandomRows, [&](const Problem& p, const Config& c) {
        sharded += *c.GetInt("shards") > 1;
        online += c.Get("algorithm") == "online";
        ragged += *p.dims.Get("cols") % *c.GetInt("chunk") != 0;
      });
  const int verified = n.verified, simulated = n.simulated;
  EXPECT_GE(verified, 200);
  EXPECT_GE(simulated, 40);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(online, 40);
  EXPECT_GE(ragged, 100);
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

TEST(SoftmaxTest, LargeShapesHaveThousandsOfValidConfigs) {
  test_support::ForSnc2AndSnc3(Softmax(), Rows(8192, 8192),
                               [](const char* target, const Space& space) {
                                 EXPECT_GE(test_support::CountValid(space), 2000) << target;
                               });
}

TEST(SoftmaxTest, ResidencyReadsXOnceAndStreamingReadsItThreeTimes) {
  sim::Target t = Load("snc2");
  Problem p = Rows(1024, 4096);
  Config streaming = Parse(
      "tile_rows=128,rows_per_partition=1,chunk=1024,algorithm=multi_pass,resident=0,"
      "scale_engine=vector,exp_dtype=fp32,bufs=2,shards=1");
  Config resident = streaming;
  resident.Set("resident", "1");
  Config online = streaming;
  online.Set("algorithm", "online");
  absl::StatusOr<sim::SimResult> s = Evaluate(Softmax(), p, streaming, t);
  absl::StatusOr<sim::SimResult> r = Evaluate(Softmax(), p, resident, t);
  absl::StatusOr<sim::SimResult> o = Evaluate(Softmax(), p, online, t);
  ASSERT_TRUE(s.ok() && r.ok() && o.ok());
  const int64_t tensor_bytes = 1024 * 4096 * 2;
  EXPECT_EQ(r->hbm_bytes, 2 * tensor_bytes);
  EXPECT_EQ(o->hbm_bytes, 3 * tensor_bytes);
  EXPECT_EQ(s->hbm_bytes, 4 * tensor_bytes);
  EXPECT_LT(r->time_ns, s->time_ns);
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

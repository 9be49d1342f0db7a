#include "kernels/norm.h"

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

using ::testing::HasSubstr;

using FaultGuard = test_support::FaultGuard<NormFault, SetNormFaultForTesting>;

// Runs each test for layernorm and rmsnorm.
class NormTest : public ::testing::TestWithParam<const char*> {
 protected:
  const Kernel& Norm() const { return *FindKernel(GetParam()); }
};

TEST_P(NormTest, DefaultIsValidAndVerifiesForAlignedAndRaggedShapesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Rows(4096, 4096), Rows(1000, 300), Rows(1, 1), Rows(77, 5000, "fp32")}) {
      const std::optional<sim::SimResult> r = test_support::ExpectDefaultWorks(Norm(), p, t);
      ASSERT_TRUE(r.has_value());
      EXPECT_GT(RooflineNs(Norm(), p, t), 0);
    }
  }
}

TEST_P(NormTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Rows(4096, 8192);
  Space space = *Norm().SpaceFor(p, t);
  Config base = Norm().Default(p, t);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  EXPECT_TRUE(space.Validate(base).ok()) << space.Validate(base);
  EXPECT_THAT(reason({{"chunk", "8192"}, {"rows_per_partition", "8"}, {"resident", "1"}}),
              HasSubstr("SBUF capacity"));
  EXPECT_THAT(reason({{"chunk", "16384"}}), HasSubstr("chunk=16384 is redundant"));
  EXPECT_THAT(reason({{"chunk", "8192"}, {"resident", "0"}}),
              HasSubstr("resident=0 needs more than one chunk"));
  Space small = *Norm().SpaceFor(Rows(100, 8192), t);
  Config c = Norm().Default(Rows(100, 8192), t);
  c.Set("shards", "2");
  EXPECT_THAT(std::string(small.Validate(c).message()), HasSubstr("shards=2 exceeds the 1 row"));
  c = Norm().Default(Rows(100, 8192), t);
  c.Set("tile_rows", "128");
  c.Set("rows_per_partition", "2");
  EXPECT_THAT(std::string(small.Validate(c).message()),
              HasSubstr("rows_per_partition=2 is redundant"));
  EXPECT_THAT(Norm().ValidateProblem(Rows(8, 8, "int8"), t).message(), HasSubstr("dtype"));
}

TEST_P(NormTest, TwoHundredRandomValidConfigsMatchTheReference) {
  std::mt19937_64 rng(std::string(GetParam()) == "rmsnorm" ? 5 : 9);
  int sharded = 0, ragged = 0, separate = 0, bn = 0;
  const test_support::SweepCounts n = test_support::VerifyRandomValidConfigs(
      Norm(), rng, RandomRows, [&](const Problem& p, const Config& c) {
        sharded += *c.GetInt("shards") > 1;
        separate += c.Get("affine") == "separate";
        bn += c.Get("stats") == "bn_stats";
        ragged += *p.dims.Get("cols") % *c.GetInt("chunk") != 0;
      });
  const int verified = n.verified, simulated = n.simulated;
  EXPECT_GE(verified, 200);
  EXPECT_GE(simulated, 40);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(separate, 40);
  EXPECT_GE(bn, 40);
  EXPECT_GE(ragged, 100);
}

TEST_P(NormTest, DroppingTheTailChunkFromTheStatisticsIsCaught) {
  sim::Target t = Load("snc3");
  Problem p = Rows(1000, 1300);  // ragged rows and a ragged last chunk of 276 columns
  for (const char* stats : {"bn_stats", "sum_scalar_sq", "sum_vector_sq"}) {
    Config c = Parse(
        "tile_rows=128,rows_per_partition=2,chunk=512,resident=0,stats=bn_stats,apply=scalar,"
        "affine=fused,bufs=2,shards=4");
    c.Set("stats", stats);
    ASSERT_TRUE(Norm().Verify(p, c, t).ok()) << stats;
    FaultGuard fault(NormFault::kDropTailChunkFromStats);
    absl::Status s = Norm().Verify(p, c, t);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << stats << " " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("wrong answer"));
  }
}

TEST_P(NormTest, LargeShapesHaveThousandsOfValidConfigs) {
  test_support::ForSnc2AndSnc3(Norm(), Rows(8192, 8192),
                               [](const char* target, const Space& space) {
                                 EXPECT_GE(test_support::CountValid(space), 2000) << target;
                               });
}

TEST_P(NormTest, ResidencyAndFusionSaveHbmPasses) {
  sim::Target t = Load("snc2");
  Problem p = Rows(1024, 4096);
  Config streaming = Parse(
      "tile_rows=128,rows_per_partition=1,chunk=1024,resident=0,stats=bn_stats,apply=vector,"
      "affine=fused,bufs=2,shards=1");
  Config resident = streaming;
  resident.Set("resident", "1");
  Config separate = resident;
  separate.Set("affine", "separate");
  absl::StatusOr<sim::SimResult> s = Evaluate(Norm(), p, streaming, t);
  absl::StatusOr<sim::SimResult> r = Evaluate(Norm(), p, resident, t);
  absl::StatusOr<sim::SimResult> sep = Evaluate(Norm(), p, separate, t);
  ASSERT_TRUE(s.ok() && r.ok() && sep.ok());
  const int64_t tensor_bytes = 1024 * 4096 * 2;
  const int64_t vectors = (std::string(GetParam()) == "rmsnorm" ? 1 : 2) * 128 * 4096 * 2;
  EXPECT_EQ(r->hbm_bytes, 2 * tensor_bytes + vectors);
  EXPECT_EQ(s->hbm_bytes, 3 * tensor_bytes + vectors);
  EXPECT_EQ(sep->hbm_bytes, 4 * tensor_bytes + vectors);
  EXPECT_LT(r->time_ns, s->time_ns);
}

INSTANTIATE_TEST_SUITE_P(LayerNormAndRmsNorm, NormTest, ::testing::Values("layernorm", "rmsnorm"));

}  // namespace
}  // namespace tessel::kernels

#include "kernels/conv2d.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using test_support::Load;
using test_support::Parse;

using ::testing::HasSubstr;

const Kernel& Conv2d() { return *FindKernel("conv2d"); }

// A square r x r filter.
Problem Conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t stride,
             int64_t pad, std::string dtype = "bf16") {
  return test_support::ProblemOf(Conv2d(), {n, c, h, w, k, r, r, stride, pad}, std::move(dtype));
}

using FaultGuard = test_support::FaultGuard<Conv2dFault, SetConv2dFaultForTesting>;

TEST(Conv2dTest, DefaultIsValidAndVerifiesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Conv(1, 64, 56, 56, 64, 3, 1, 1), Conv(2, 3, 224, 224, 64, 7, 2, 3),
                      Conv(4, 100, 13, 13, 200, 3, 1, 0), Conv(1, 1, 1, 1, 1, 1, 1, 0),
                      Conv(2, 256, 14, 14, 512, 1, 1, 0, "fp32")}) {
      const std::optional<sim::SimResult> r = test_support::ExpectDefaultWorks(Conv2d(), p, t);
      ASSERT_TRUE(r.has_value());
    }
  }
}

TEST(Conv2dTest, ProblemAndConfigErrorsSayWhy) {
  sim::Target t2 = Load("snc2");
  sim::Target no_fp8 = t2;
  no_fp8.matmul_fp8_factor = 0;
  EXPECT_THAT(Conv2d().ValidateProblem(Conv(1, 8, 8, 8, 8, 3, 1, 1, "fp8"), no_fp8).message(),
              HasSubstr("fp8 is not supported by TensorE on snc2"));
  EXPECT_TRUE(Conv2d().ValidateProblem(Conv(1, 8, 8, 8, 8, 3, 1, 1, "fp8"), t2).ok());
  EXPECT_TRUE(Conv2d().ValidateProblem(Conv(1, 8, 8, 8, 8, 3, 1, 1, "fp8"), Load("snc3")).ok());
  EXPECT_THAT(Conv2d().ValidateProblem(Conv(1, 8, 2, 2, 8, 5, 1, 0), t2).message(),
              HasSubstr("larger than the padded input"));
  EXPECT_THAT(Conv2d().ValidateProblem(Conv(1, 8, 8, 8, 8, 3, 1, 3), t2).message(),
              HasSubstr("padding=3 must be smaller"));
  Problem p = Conv(8, 256, 56, 56, 256, 3, 1, 1);
  Space space = *Conv2d().SpaceFor(p, t2);
  Config base = Conv2d().Default(p, t2);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  EXPECT_TRUE(space.Validate(base).ok()) << space.Validate(base);
  EXPECT_THAT(reason({{"tile_k", "256"}}),
              HasSubstr("tile_k=256 is the stationary free size and exceeds the TensorE limit"));
  EXPECT_THAT(reason({{"stationary", "input"}}),
              HasSubstr("tile_pix=512 is the stationary free size"));
  EXPECT_THAT(reason({{"stationary", "input"}, {"tile_pix", "128"}, {"tile_k", "256"}}), "");
  EXPECT_THAT(reason({{"stationary", "input"}, {"tile_pix", "128"}, {"tile_k", "512"}}),
              HasSubstr("tile_k=512 is redundant: 256 already covers all 256"));
  Problem tiny = Conv(1, 16, 8, 8, 16, 3, 1, 1);
  Config c = Conv2d().Default(tiny, t2);
  c.Set("tile_c", "64");
  EXPECT_THAT(std::string(Conv2d().SpaceFor(tiny, t2)->Validate(c).message()),
              HasSubstr("tile_c=64 is redundant"));
}

TEST(Conv2dTest, TwoHundredRandomValidConfigsMatchTheReference) {
  std::mt19937_64 rng(3);
  int sharded = 0, input_stationary = 0, k_outer = 0, strided = 0;
  auto shape = [](const std::string& target, std::mt19937_64& rng) {
    const int64_t r = std::array<int64_t, 3>{1, 3, 5}[rng() % 3];
    const int64_t stride = 1 + int64_t(rng() % 2), pad = int64_t(rng() % r);
    const int64_t h = r + int64_t(rng() % 60), w = r + int64_t(rng() % 60);
    const char* dtype = target == "snc3" && rng() % 4 == 0 ? "fp8"
                        : rng() % 4 == 0                   ? "fp32"
                                                           : "bf16";
    return Conv(1 + int64_t(rng() % 8), 1 + int64_t(rng() % 300), h, w, 1 + int64_t(rng() % 600), r,
                stride, pad, dtype);
  };
  const test_support::SweepCounts n = test_support::VerifyRandomValidConfigs(
      Conv2d(), rng, shape, [&](const Problem& p, const Config& c) {
        sharded += *c.GetInt("shards") > 1;
        input_stationary += c.Get("stationary") == "input";
        k_outer += c.Get("loop_order") == "k_outer";
        strided += *p.dims.Get("stride") > 1;
      });
  const int verified = n.verified, simulated = n.simulated;
  EXPECT_GE(verified, 200);
  EXPECT_GE(simulated, 40);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(input_stationary, 40);
  EXPECT_GE(k_outer, 40);
  EXPECT_GE(strided, 40);
}

TEST(Conv2dTest, BrokenSchedulesAreCaught) {
  sim::Target t = Load("snc3");
  Problem p = Conv(3, 200, 30, 30, 300, 3, 1, 1);  // 200 channels: a ragged channel tile
  for (const char* text :
       {"stationary=weights,tile_c=128,tile_k=128,tile_pix=512,block_k=2,weights_resident=0,"
        "loop_order=spatial_outer,bufs=2,evict=split,shards=2",
        "stationary=input,tile_c=64,tile_k=512,tile_pix=128,block_k=1,weights_resident=1,"
        "loop_order=k_outer,bufs=3,evict=vector,shards=4"}) {
    Config c = Parse(text);
    ASSERT_TRUE(Conv2d().Verify(p, c, t).ok()) << Conv2d().Verify(p, c, t);
    {
      FaultGuard fault(Conv2dFault::kDropRaggedChannelTile);
      absl::Status s = Conv2d().Verify(p, c, t);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("conv2d wrong answer"));
    }
    {
      FaultGuard fault(Conv2dFault::kHaloOneRowShort);
      EXPECT_EQ(Conv2d().Verify(p, c, t).code(), absl::StatusCode::kDataLoss);
    }
  }
}

TEST(Conv2dTest, LargeShapeHasThousandsOfValidConfigs) {
  test_support::ForSnc2AndSnc3(Conv2d(), Conv(16, 256, 56, 56, 256, 3, 1, 1),
                               [](const char* target, const Space& space) {
                                 EXPECT_GE(test_support::CountValid(space), 2000) << target;
                               });
}

TEST(Conv2dTest, ShardsSplitTheKBlocksWhenThereAreTooFewPixelTiles) {
  sim::Target t = Load("snc3");
  Problem p = Conv(1, 64, 8, 8, 500, 3, 1, 1);  // one 64-pixel item; 8 k tiles, the last ragged
  Config c = Parse(
      "stationary=weights,tile_c=64,tile_k=64,tile_pix=64,block_k=1,weights_resident=1,"
      "loop_order=spatial_outer,bufs=1,evict=scalar,shards=8");
  ASSERT_TRUE(Conv2d().SpaceFor(p, t)->Validate(c).ok()) << Conv2d().SpaceFor(p, t)->Validate(c);
  absl::StatusOr<sim::Program> program = Conv2d().Lower(p, c, t);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->cores.size(), 8u);
  EXPECT_TRUE(Conv2d().Verify(p, c, t).ok()) << Conv2d().Verify(p, c, t);
  FaultGuard fault(Conv2dFault::kHaloOneRowShort);
  EXPECT_EQ(Conv2d().Verify(p, c, t).code(), absl::StatusCode::kDataLoss);
}

TEST(Conv2dTest, Fp8DoubleRowChannelTilesOnlyOnSnc3) {
  sim::Target t3 = Load("snc3");
  Problem fp8 = Conv(4, 512, 28, 28, 256, 3, 1, 1, "fp8");
  Config c = Conv2d().Default(fp8, t3);
  c.Set("tile_c", "256");
  ASSERT_TRUE(Conv2d().SpaceFor(fp8, t3)->Validate(c).ok())
      << Conv2d().SpaceFor(fp8, t3)->Validate(c);
  absl::StatusOr<sim::Program> program = Conv2d().Lower(fp8, c, t3);
  ASSERT_TRUE(program.ok()) << program.status();
  for (const sim::Instruction& inst : program->cores[0].instructions) {
    if (inst.op == sim::Op::kMatmul) {
      EXPECT_EQ(inst.k, 256);
      EXPECT_EQ(inst.partitions, 128);
      break;
    }
  }
  EXPECT_TRUE(Conv2d().Verify(fp8, c, t3).ok());
  // Half the matmuls of tile_c=128, each the same cost: fewer TensorE cycles.
  Config c128 = c;
  c128.Set("tile_c", "128");
  absl::StatusOr<sim::SimResult> a = Evaluate(Conv2d(), fp8, c, t3);
  absl::StatusOr<sim::SimResult> b = Evaluate(Conv2d(), fp8, c128, t3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(2 * a->engines[int(sim::EngineKind::kTensor)].instructions,
            b->engines[int(sim::EngineKind::kTensor)].instructions);
  Problem bf16 = fp8;
  bf16.dtype = "bf16";
  EXPECT_THAT(Conv2d().Lower(bf16, c, t3).status().message(),
              HasSubstr("tile_c=256 exceeds the TensorE contraction limit K <= 128"));
}

TEST(Conv2dTest, ResidentWeightsAreLoadedOnce) {
  sim::Target t = Load("snc2");
  Problem p = Conv(4, 128, 28, 28, 128, 3, 1, 1);
  Config reload = Conv2d().Default(p, t);
  Config resident = reload;
  resident.Set("weights_resident", "1");
  absl::StatusOr<sim::SimResult> a = Evaluate(Conv2d(), p, reload, t);
  absl::StatusOr<sim::SimResult> b = Evaluate(Conv2d(), p, resident, t);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t weight_bytes = 128 * 128 * 9 * 2;
  // 28x28 outputs in tiles of 18 rows (512 / 28): 2 pixel tiles per image, 8 items.
  EXPECT_EQ(a->hbm_bytes - b->hbm_bytes, 7 * weight_bytes);
}

}  // namespace
}  // namespace tessel::kernels

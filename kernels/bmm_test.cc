#include "kernels/bmm.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using test_support::ForSnc2AndSnc3;
using test_support::Load;
using test_support::Parse;
using test_support::SampleValid;

using ::testing::HasSubstr;

Problem Batched(int64_t b, int64_t m, int64_t n, int64_t k, std::string dtype = "bf16") {
  return Problem{Dims{{"B", b}, {"M", m}, {"N", n}, {"K", k}}, std::move(dtype)};
}

const Kernel& Bmm() { return *FindKernel("bmm"); }

std::optional<Config> RandomValid(const Space& space, std::mt19937_64& rng) {
  return test_support::RandomValid(space, rng, 2000);
}

TEST(BmmTest, IsRegisteredWithItsDims) {
  ASSERT_NE(FindKernel("bmm"), nullptr);
  EXPECT_EQ(Bmm().dims(), (std::vector<std::string>{"B", "M", "N", "K"}));
}

TEST(BmmTest, DefaultIsValidAndSimulatesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Batched(4, 512, 512, 512), Batched(3, 100, 300, 77), Batched(1, 1, 1, 1),
                      Batched(2, 1024, 1024, 1024, "fp32")}) {
      const std::optional<sim::SimResult> r = test_support::ExpectDefaultWorks(Bmm(), p, t);
      ASSERT_TRUE(r.has_value());
      EXPECT_GE(r->time_ns, r->roofline_ns);
    }
  }
}

TEST(BmmTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Batched(16, 1024, 1024, 1024);
  Space space = *Bmm().SpaceFor(p, t);
  Config base = Bmm().Default(p, t);
  auto reason = [&](test_support::Changes changes) {
    return test_support::Reason(space, base, changes);
  };
  EXPECT_THAT(reason({{"evict", "gpsimd"}}), HasSubstr("GpSimd cannot access PSUM"));
  EXPECT_THAT(reason({{"shards", "4"}}), HasSubstr("shards=4 is not one of 1|2"));
  EXPECT_THAT(reason({{"shard_dim", "m"}}), HasSubstr("shard_dim=m with shards=1 is redundant"));
  EXPECT_THAT(reason({{"batch_group", "8"}, {"interleave", "1"}, {"block_m", "2"}}),
              HasSubstr("8 PSUM banks"));
  EXPECT_THAT(reason({{"interleave", "1"}}), HasSubstr("one batch to interleave"));
  EXPECT_THAT(reason({{"batch_group", "8"}, {"block_k", "8"}, {"block_n", "2"}}),
              HasSubstr("SBUF capacity"));
  Space few = *Bmm().SpaceFor(Batched(3, 128, 512, 128), t);
  Config c = base;
  c.Set("batch_group", "8");
  EXPECT_THAT(std::string(few.Validate(c).message()), HasSubstr("batch_group=8 is redundant"));
  c.Set("batch_group", "4");
  EXPECT_TRUE(few.Validate(c).ok()) << few.Validate(c);
  c.Set("shards", "2");
  c.Set("shard_dim", "m");
  EXPECT_THAT(std::string(few.Validate(c).message()), HasSubstr("exceeds the 1 M blocks"));
}

TEST(BmmTest, LargeShapeSpaceHasManyValidConfigs) {
  ForSnc2AndSnc3(Bmm(), Batched(64, 1024, 1024, 1024), [](const char* target, const Space& space) {
    std::mt19937_64 rng(7);
    const int samples = 20000;
    const int valid = SampleValid(space, rng, samples);
    const double estimate = double(valid) / samples * double(space.Size());
    EXPECT_GT(estimate, 2000.0) << target << ": " << valid << " of " << samples;
  });
}

// The acceptance test of issue 4: at least 200 random valid configs on random (often ragged,
// often sharded) shapes match the reference on the CPU.
TEST(BmmTest, RandomValidConfigsVerify) {
  std::mt19937_64 rng(2024);
  int verified = 0, sharded = 0, ragged = 0;
  for (int i = 0; i < 240; ++i) {
    sim::Target t = Load(i % 2 ? "snc3" : "snc2");
    std::uniform_int_distribution<int64_t> batches(1, 12), dim(1, 300);
    const char* dtype = i % 5 == 0 ? "fp32" : (i % 7 == 0 && i % 2 ? "fp8" : "bf16");
    Problem p = Batched(batches(rng), dim(rng), dim(rng), dim(rng), dtype);
    Space space = *Bmm().SpaceFor(p, t);
    std::optional<Config> c = RandomValid(space, rng);
    ASSERT_TRUE(c.has_value()) << p.dims.ToString();
    absl::Status status = Bmm().Verify(p, *c, t);
    ASSERT_TRUE(status.ok()) << p.dims.ToString() << " " << c->ToString() << ": " << status;
    ++verified;
    sharded += *c->GetInt("shards") > 1;
    ragged += *p.dims.Get("M") % *c->GetInt("tile_m") != 0;
  }
  EXPECT_GE(verified, 200);
  EXPECT_GE(sharded, 40);
  EXPECT_GE(ragged, 100);
}

TEST(BmmTest, BrokenLoweringsAreCaughtAsDataLoss) {
  sim::Target t = Load("snc3");
  Problem p = Batched(7, 200, 130, 96);
  Config c = Parse(
      "tile_m=128,tile_n=128,tile_k=64,block_m=2,block_n=1,block_k=1,batch_group=2,interleave=1,"
      "bufs=2,stationary=a,evict=split,shard_dim=batch,shards=2");
  ASSERT_TRUE(Bmm().SpaceFor(p, t)->Validate(c).ok());
  ASSERT_TRUE(Bmm().Verify(p, c, t).ok());
  for (BmmFault fault : {BmmFault::kDropRaggedBatchGroup, BmmFault::kRaggedMOffByOne}) {
    SetBmmFaultForTesting(fault);
    absl::Status status = Bmm().Verify(p, c, t);
    SetBmmFaultForTesting(BmmFault::kNone);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("bmm wrong answer"));
  }
}

TEST(BmmTest, BatchGroupingBeatsTheDefaultOnManySmallMatrices) {
  // 64 small 128x128x128 products: the default pays a fixed DMA cost per tile per batch;
  // grouping batches moves more bytes per transfer and sharding uses both cores.
  sim::Target t = Load("snc2");
  Problem p = Batched(64, 128, 128, 128);
  absl::StatusOr<sim::SimResult> def = Evaluate(Bmm(), p, Bmm().Default(p, t), t);
  Config tuned = Parse(
      "tile_m=128,tile_n=128,tile_k=128,block_m=1,block_n=1,block_k=1,batch_group=8,"
      "interleave=1,bufs=2,stationary=a,evict=split,shard_dim=batch,shards=2");
  absl::StatusOr<sim::SimResult> best = Evaluate(Bmm(), p, tuned, t);
  ASSERT_TRUE(def.ok() && best.ok()) << def.status() << best.status();
  EXPECT_LT(best->time_ns * 1.5, def->time_ns) << best->time_ns << " vs " << def->time_ns;
}

}  // namespace
}  // namespace tessel::kernels

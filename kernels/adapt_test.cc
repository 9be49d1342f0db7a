#include "kernels/adapt.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload.h"

namespace tessel::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Space MatmulSpace(int64_t m, int64_t n, int64_t k, const std::string& target) {
  Dims dims;
  dims.Set("M", m);
  dims.Set("N", n);
  dims.Set("K", k);
  auto resolved = Resolve({.kernel = "matmul", .dims = dims, .dtype = "bf16", .target = target});
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  auto space = resolved->kernel->SpaceFor(resolved->problem, resolved->target);
  EXPECT_TRUE(space.ok()) << space.status();
  return *space;
}

constexpr char kTunedFor1024[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=8,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=scalar,shards=2";

TEST(AdaptConfigTest, AValidConfigIsKeptAsItIs) {
  const Config config = *Config::Parse(kTunedFor1024);
  auto adapted = AdaptConfig(MatmulSpace(1024, 1024, 1024, "snc2"), config);
  ASSERT_TRUE(adapted.ok()) << adapted.status();
  EXPECT_EQ(adapted->config, config);
  EXPECT_TRUE(adapted->changes.empty());
}

TEST(AdaptConfigTest, BlockingFactorsAndShardsShrinkToWhatASmallerShapeHas) {
  const Space small = MatmulSpace(512, 512, 512, "snc2");
  const Config config = *Config::Parse(kTunedFor1024);
  ASSERT_FALSE(small.Validate(config).ok());
  auto adapted = AdaptConfig(small, config);
  ASSERT_TRUE(adapted.ok()) << adapted.status();
  EXPECT_TRUE(small.Validate(adapted->config).ok());
  EXPECT_FALSE(adapted->changes.empty());
  for (const auto& [name, value] : config.items()) {
    if (!IsShrinkableParam(name)) {
      EXPECT_EQ(*adapted->config.Get(name), value) << name << " is not a blocking factor";
    } else {
      EXPECT_LE(*adapted->config.GetInt(name), *config.GetInt(name)) << name;
    }
  }
}

TEST(AdaptConfigTest, ShardsAreCappedAtTheTargetsCores) {
  // Tuned on snc3 (8 cores) with 8 shards; snc2 has 2.
  const Space snc2 = MatmulSpace(4096, 4096, 4096, "snc2");
  Config config = *Config::Parse(kTunedFor1024);
  config.SetInt("shards", 8);
  auto adapted = AdaptConfig(snc2, config);
  ASSERT_TRUE(adapted.ok()) << adapted.status();
  EXPECT_TRUE(snc2.Validate(adapted->config).ok());
  EXPECT_LE(*adapted->config.GetInt("shards"), 2);
  EXPECT_THAT(adapted->changes, ::testing::Contains(HasSubstr("shards 8->")));
}

TEST(AdaptConfigTest, OtherParamsAreNeverChangedSoSomeConfigsCannotBeAdapted) {
  Config config = *Config::Parse(kTunedFor1024);
  config.Set("tile_m", "7");
  auto adapted = AdaptConfig(MatmulSpace(512, 512, 512, "snc2"), config);
  EXPECT_EQ(adapted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(adapted.status().message()), HasSubstr("tile_m"));
}

TEST(AdaptConfigTest, TheChangesNameEachParamThatMoved) {
  Config config = *Config::Parse(kTunedFor1024);
  config.SetInt("shards", 1);
  config.SetInt("block_m", 1);
  config.SetInt("block_n", 1);
  // Only block_k is too large for K=512 with 128-wide tiles (4 tiles).
  auto adapted = AdaptConfig(MatmulSpace(512, 512, 512, "snc2"), config);
  ASSERT_TRUE(adapted.ok()) << adapted.status();
  EXPECT_THAT(adapted->changes, ElementsAre(HasSubstr("block_k 8->")));
}

}  // namespace
}  // namespace tessel::kernels

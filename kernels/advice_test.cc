#include "kernels/advice.h"

#include <gtest/gtest.h>

namespace tessel::kernels {
namespace {

Space TestSpace() {
  return Space({{"tile_n", {"128", "256", "512"}, ""},
                {"block_k", {"1", "2", "4"}, ""},
                {"bufs", {"2", "3"}, ""},
                {"kv_resident", {"0", "1"}, ""},
                {"evict", {"vector", "scalar", "split"}, ""},
                {"shards", {"1", "2"}, ""}},
               [](const Config&) { return absl::OkStatus(); });
}

sim::SimResult Bound(const std::string& bound, sim::EngineKind busiest, double frac) {
  sim::SimResult r;
  r.bound = bound;
  r.busiest[0] = {busiest, frac};
  r.busiest[1] = {sim::EngineKind::kTensor, 0.4};
  return r;
}

const Config kConfig{{"tile_n", "512"},    {"block_k", "1"},    {"bufs", "2"},
                     {"kv_resident", "0"}, {"evict", "vector"}, {"shards", "1"}};

TEST(AdviceTest, DmaBoundSuggestsLargerTransfersBuffersAndResidencyBelowTheirMaximum) {
  const Bottleneck b =
      FindBottleneck(TestSpace(), kConfig, Bound("dma", sim::EngineKind::kDma, 0.95));
  // tile_n is at its largest value: not suggested.
  EXPECT_EQ(b.try_next,
            (std::vector<std::string>{"larger block_k (now 1)", "bufs=3", "kv_resident=1"}));
  EXPECT_EQ(b.Summary(),
            "dma-bound (dma 95%, tensor 40%): try larger block_k (now 1), bufs=3, kv_resident=1");
}

TEST(AdviceTest, AComputeEngineBoundSuggestsMovingWorkToAnotherEngine) {
  const Bottleneck b =
      FindBottleneck(TestSpace(), kConfig, Bound("vector", sim::EngineKind::kVector, 0.9));
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"evict=scalar"}));
}

TEST(AdviceTest, TensorAndLatencyBoundsSuggestShardsOnlyWhereMoreExist) {
  Bottleneck b =
      FindBottleneck(TestSpace(), kConfig, Bound("tensor", sim::EngineKind::kTensor, 0.9));
  EXPECT_EQ(b.try_next[0], "larger shards (now 1)");
  Config two = kConfig;
  two.Set("shards", "2");
  two.Set("bufs", "3");
  b = FindBottleneck(TestSpace(), two, Bound("latency", sim::EngineKind::kDma, 0.5));
  EXPECT_TRUE(b.try_next.empty());
  EXPECT_EQ(b.Summary(), "latency-bound (dma 50%, tensor 40%)");
}

}  // namespace
}  // namespace tessel::kernels

#include "kernels/advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/target.h"

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
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"block_k=2", "bufs=3", "kv_resident=1"}));
  EXPECT_EQ(b.Summary(), "dma-bound (dma 95%, tensor 40%): try block_k=2, bufs=3, kv_resident=1");
}

TEST(AdviceTest, AComputeEngineBoundSuggestsMovingWorkToAnotherEngine) {
  const Bottleneck b =
      FindBottleneck(TestSpace(), kConfig, Bound("vector", sim::EngineKind::kVector, 0.9));
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"evict=scalar"}));
}

TEST(AdviceTest, TensorAndLatencyBoundsSuggestShardsOnlyWhereMoreExist) {
  Bottleneck b =
      FindBottleneck(TestSpace(), kConfig, Bound("tensor", sim::EngineKind::kTensor, 0.9));
  // TensorE: larger tiles (block_k; tile_n is at its largest) and more shards, in param order.
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"block_k=2", "shards=2"}));
  Config two = kConfig;
  two.Set("shards", "2");
  two.Set("bufs", "3");
  b = FindBottleneck(TestSpace(), two, Bound("latency", sim::EngineKind::kDma, 0.5));
  EXPECT_TRUE(b.try_next.empty());
  EXPECT_EQ(b.Summary(), "latency-bound (dma 50%, tensor 40%)");
}

// A space whose rule rejects the changes a suggestion would name: more buffers (they no longer
// fit), block_k above 2, kv_resident=1 and evict=scalar.
Space RejectingSpace() {
  return Space(TestSpace().params(), [](const Config& c) {
    if (c.Get("bufs") == "3") return absl::InvalidArgumentError("bufs: no room");
    if (c.Get("block_k") == "4" || c.Get("kv_resident") == "1" || c.Get("evict") == "scalar") {
      return absl::InvalidArgumentError("rejected");
    }
    return absl::OkStatus();
  });
}

TEST(AdviceTest, NoSuggestionNamesAChangeTheSpaceRejects) {
  Bottleneck b =
      FindBottleneck(RejectingSpace(), kConfig, Bound("dma", sim::EngineKind::kDma, 0.95));
  // block_k=2 is still valid, so it stays; bufs=3 and kv_resident=1 are rejected.
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"block_k=2"}));
  Config two = kConfig;
  two.Set("block_k", "2");
  b = FindBottleneck(RejectingSpace(), two, Bound("dma", sim::EngineKind::kDma, 0.95));
  EXPECT_TRUE(b.try_next.empty()) << b.Summary();
  // The first other engine the space accepts: split, not the rejected scalar.
  b = FindBottleneck(RejectingSpace(), kConfig, Bound("vector", sim::EngineKind::kVector, 0.9));
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"evict=split"}));
  b = FindBottleneck(RejectingSpace(), kConfig, Bound("latency", sim::EngineKind::kDma, 0.5));
  EXPECT_EQ(b.try_next, (std::vector<std::string>{"shards=2"}));
}

TEST(AdviceTest, ATensorBoundSuggestsADTypeOnlyWhereTheTargetRunsItFaster) {
  const Kernel& matmul = *FindKernel("matmul");
  const sim::Target snc2 = *sim::LoadTarget("snc2");
  const sim::Target snc3 = *sim::LoadTarget("snc3");
  // snc3's TensorE peak for fp8 is twice bf16's; snc2 runs fp8 at the bf16 rate.
  EXPECT_EQ(FasterDTypes(matmul, "bf16", snc3), (std::vector<std::string>{"fp8"}));
  EXPECT_TRUE(FasterDTypes(matmul, "bf16", snc2).empty());
  EXPECT_TRUE(FasterDTypes(matmul, "fp8", snc3).empty());
  const std::vector<std::string> from_fp32 = FasterDTypes(matmul, "fp32", snc3);
  ASSERT_EQ(from_fp32.size(), 2u);
  EXPECT_EQ(from_fp32[0], "fp8");  // fastest first
  EXPECT_EQ(from_fp32[1], "bf16");

  const sim::SimResult tensor = Bound("tensor", sim::EngineKind::kTensor, 0.9);
  Bottleneck b = FindBottleneck(TestSpace(), kConfig, tensor, {"fp8"});
  EXPECT_EQ(b.try_next.back(), "dtype=fp8");
  b = FindBottleneck(TestSpace(), kConfig, tensor, {});
  for (const std::string& s : b.try_next) EXPECT_EQ(s.find("dtype"), std::string::npos) << s;
}

// Measured advice: every change it keeps simulates faster, fastest first, with its gain; a change
// that simulates slower is dropped; a suggestion that is not a config change stays.
TEST(AdviceTest, KeepFasterChangesKeepsOnlyChangesThatSimulateFaster) {
  const Kernel& matmul = *FindKernel("matmul");
  const sim::Target snc2 = *sim::LoadTarget("snc2");
  const Problem problem{Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, "bf16"};
  Config config = matmul.Default(problem, snc2);
  config.Set("block_m", "2");
  const absl::StatusOr<sim::SimResult> now = Evaluate(matmul, problem, config, snc2, {});
  ASSERT_TRUE(now.ok()) << now.status();

  Bottleneck b;
  b.try_next = {"block_m=1", "block_m=4", "dtype=fp8"};
  b.changes = {{"block_m", "1"}, {"block_m", "4"}, {"", ""}};
  KeepFasterChanges(b, matmul, problem, snc2, config, now->time_ns);
  ASSERT_EQ(b.try_next.size(), 2u) << b.Summary();
  EXPECT_EQ(b.changes[0], (std::pair<std::string, std::string>{"block_m", "4"}));
  EXPECT_THAT(b.try_next[0], ::testing::StartsWith("block_m=4 (-"));
  EXPECT_EQ(b.try_next[1], "dtype=fp8");

  // Whatever Advise keeps for the default config is faster than it, and in order.
  const Config plain = matmul.Default(problem, snc2);
  const absl::StatusOr<sim::SimResult> base = Evaluate(matmul, problem, plain, snc2, {});
  ASSERT_TRUE(base.ok());
  const Bottleneck advice =
      Advise(matmul, problem, snc2, *matmul.SpaceFor(problem, snc2), plain, *base);
  ASSERT_FALSE(advice.try_next.empty()) << advice.Summary();
  double last = 0;
  for (const auto& [param, value] : advice.changes) {
    if (param.empty()) continue;
    Config changed = plain;
    changed.Set(param, value);
    const absl::StatusOr<sim::SimResult> r = Evaluate(matmul, problem, changed, snc2, {});
    ASSERT_TRUE(r.ok());
    EXPECT_LT(r->time_ns, base->time_ns) << param << "=" << value;
    EXPECT_GE(r->time_ns, last);
    last = r->time_ns;
  }
}

}  // namespace
}  // namespace tessel::kernels

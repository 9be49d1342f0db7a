#include "kernels/matmul.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using test_support::Load;
using test_support::Parse;
using test_support::RunSharded;
using test_support::SampleValid;
using test_support::ShardedRuns;

using ::testing::HasSubstr;

Problem Gemm(int64_t m, int64_t n, int64_t k, std::string dtype = "bf16") {
  return Problem{Dims{{"M", m}, {"N", n}, {"K", k}}, std::move(dtype)};
}

const Kernel& Matmul() { return *FindKernel("matmul"); }

constexpr char kBlocked4096[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=16,block_n=2,block_k=8,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=vector,shards=1";

TEST(MatmulTest, DefaultIsValidForAlignedAndRaggedShapesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    sim::Target t = Load(target);
    for (Problem p : {Gemm(512, 512, 512), Gemm(1000, 300, 77), Gemm(1, 1, 1),
                      Gemm(4096, 4096, 4096, "fp32")}) {
      absl::StatusOr<Space> space = Matmul().SpaceFor(p, t);
      ASSERT_TRUE(space.ok()) << space.status();
      Config def = Matmul().Default(p, t);
      EXPECT_TRUE(space->Validate(def).ok()) << space->Validate(def);
      EXPECT_TRUE(space->Encode(def).has_value());
      absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, def, t);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_GE(r->time_ns, r->roofline_ns);
    }
  }
}

// NeuronCore-v2 runs fp8 at the bf16 rate: "Two NeuronCore-v2 delivering ... 190
// FP16/BF16/cFP8/TF32 TFLOPS" (Neuron docs, Trainium architecture). The same schedule keeps
// TensorE exactly as busy in fp8 as in bf16; only the bytes moved halve.
TEST(MatmulTest, Snc2RunsFp8AtTheBf16Rate) {
  sim::Target t = Load("snc2");
  EXPECT_EQ(t.PeakTflops(sim::DType::kFp8), t.PeakTflops(sim::DType::kBf16));
  const Problem bf16 = Gemm(1024, 1024, 1024);
  const Problem fp8 = Gemm(1024, 1024, 1024, "fp8");
  const Config config = Matmul().Default(bf16, t);
  absl::StatusOr<sim::SimResult> a = Evaluate(Matmul(), bf16, config, t);
  absl::StatusOr<sim::SimResult> b = Evaluate(Matmul(), fp8, config, t);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const int tensor = int(sim::EngineKind::kTensor);
  EXPECT_EQ(b->engines[tensor].busy_ticks, a->engines[tensor].busy_ticks);
  EXPECT_LT(b->hbm_bytes, a->hbm_bytes);
  EXPECT_TRUE(Matmul().Verify(fp8, config, t).ok()) << Matmul().Verify(fp8, config, t);
}

// NeuronCore-v3 doubles fp8 matmul throughput only in its double-row mode (NKI nc_matmul
// perf_mode=double_row: "2x matmul throughput by packing two FP8 pairs"; not on NeuronCore-v2):
// a K=256 fp8 tile, two contraction rows per partition, takes as long as a K=128 one. An fp8 tile
// of K=128 runs at the bf16 rate; snc2 offers no K=256 tile.
TEST(MatmulTest, Snc3DoublesFp8ThroughputOnlyWithDoubleRowTiles) {
  const Problem bf16 = Gemm(2048, 2048, 2048);
  const Problem fp8 = Gemm(2048, 2048, 2048, "fp8");
  const std::string base =
      "tile_m=128,tile_n=512,block_m=4,block_n=2,block_k=4,loop_order=nkm,bufs=2,hoist=1,"
      "stationary=a,evict=vector,shards=1,tile_k=";
  const sim::Target t3 = Load("snc3");
  const int tensor = int(sim::EngineKind::kTensor);
  auto tensor_ticks = [&](const Problem& p, const std::string& tile_k) -> int64_t {
    absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, Parse(base + tile_k), t3);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->engines[tensor].busy_ticks : 0;
  };
  const int64_t bf16_128 = tensor_ticks(bf16, "128");
  EXPECT_EQ(tensor_ticks(fp8, "128"), bf16_128) << "fp8 without double-row: the bf16 rate";
  const int64_t double_row = tensor_ticks(fp8, "256");
  EXPECT_NEAR(double(bf16_128) / double(double_row), 2.0, 0.1) << "double-row: 2x";
  EXPECT_TRUE(Matmul().Verify(fp8, Parse(base + "256"), t3).ok());
  // snc2 (NeuronCore-v2) has no double-row mode.
  const sim::Target t2 = Load("snc2");
  EXPECT_THAT(std::string(Matmul().SpaceFor(fp8, t2)->Validate(Parse(base + "256")).message()),
              HasSubstr("tile_k"));
}

TEST(MatmulTest, ProblemValidationNamesTheProblem) {
  sim::Target t2 = Load("snc2");
  sim::Target no_fp8 = t2;
  no_fp8.matmul_fp8_factor = 0;
  EXPECT_THAT(std::string(Matmul().ValidateProblem(Gemm(8, 8, 8, "fp8"), no_fp8).message()),
              HasSubstr("fp8 is not supported by TensorE on snc2"));
  EXPECT_TRUE(Matmul().ValidateProblem(Gemm(8, 8, 8, "fp8"), t2).ok());
  EXPECT_TRUE(Matmul().ValidateProblem(Gemm(8, 8, 8, "fp8"), Load("snc3")).ok());
  Problem missing{Dims{{"M", 8}, {"N", 8}}, "bf16"};
  EXPECT_THAT(std::string(Matmul().ValidateProblem(missing, t2).message()), HasSubstr("dim K"));
  EXPECT_FALSE(Matmul().ValidateProblem(Gemm(8, 8, 8, "int8"), t2).ok());
}

// The NKI matmul tutorial's fully optimised kernel (nki_matmul_fully_optimized_: blocks of 16 M
// tiles, 2 N tiles and 8 K tiles, N blocks outermost, then K, then M) keeps its result blocks in
// SBUF in the output dtype (result_tiles allocated with the input's dtype, summed into with +=).
// Counted in fp32, as before kernel version 3, it needed 182,272 B per partition at 4096^3 and
// was refused (usable: 180,224 on snc2); in bf16 it fits, and verifies.
TEST(MatmulTest, TheTutorialsFinalBlockingFitsWithItsAccumulatorInTheOutputDtype) {
  sim::Target t = Load("snc2");
  const Config tutorial = Parse(
      "tile_m=128,tile_n=512,tile_k=128,block_m=16,block_n=2,block_k=8,loop_order=nkm,bufs=1,"
      "hoist=1,stationary=a,evict=vector,shards=1");
  for (const Problem& p : {Gemm(4096, 4096, 4096), Gemm(4096, 8192, 8192)}) {
    absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, tutorial, t);
    ASSERT_TRUE(r.ok()) << p.dims.ToString() << ": " << r.status();
    // A blocks 8 x 16 x 128 x 2 B + B blocks 8 x 2 x 512 x 2 B + the accumulator of the 2 M
    // blocks live inside k (32 tiles x 512 x 2 B each) + 2 staging tiles of 512 x 2 B.
    EXPECT_EQ(r->sbuf_peak_bytes, 32768 + 16384 + 2 * 32 * 512 * 2 + 2 * 512 * 2);
    EXPECT_TRUE(Matmul().Verify(p, tutorial, t).ok()) << Matmul().Verify(p, tutorial, t);
  }
  // Verify runs K reduced to 3 tiles: with one K tile per block, the SBUF accumulator takes two
  // rounded partial sums before the last block, and the result is still within tolerance.
  Config one_k_tile = tutorial;
  one_k_tile.Set("block_k", "1");
  EXPECT_TRUE(Matmul().Verify(Gemm(4096, 4096, 4096), one_k_tile, t).ok());
  // In fp32 the accumulator is fp32 too, and this blocking does not fit.
  Problem fp32 = Gemm(4096, 4096, 4096);
  fp32.dtype = "fp32";
  EXPECT_THAT(std::string(Matmul().SpaceFor(fp32, t)->Validate(tutorial).message()),
              HasSubstr("fp32 accumulator"));
}

TEST(MatmulTest, InvalidConfigsSayWhy) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(4096, 4096, 4096);
  Space space = *Matmul().SpaceFor(p, t);
  Config base = Matmul().Default(p, t);
  auto reason = [&](std::initializer_list<std::pair<const char*, const char*>> changes) {
    Config c = base;
    for (auto [k, v] : changes) c.Set(k, v);
    return std::string(space.Validate(c).message());
  };
  EXPECT_THAT(reason({{"evict", "gpsimd"}}), HasSubstr("GpSimd cannot access PSUM"));
  EXPECT_THAT(
      reason({{"stationary", "b"}}),
      HasSubstr("tile_n=512 is the stationary free size and exceeds the TensorE limit 128"));
  EXPECT_THAT(reason({{"block_m", "16"}, {"block_n", "8"}, {"block_k", "16"}}),
              HasSubstr("SBUF capacity"));
  EXPECT_THAT(reason({{"loop_order", "kmn"}, {"block_m", "4"}, {"block_n", "4"}}),
              HasSubstr("bf16 accumulator"));
  Problem skinny = Gemm(128, 512, 4096);
  Config sharded = Matmul().Default(skinny, t);
  sharded.Set("shards", "2");
  EXPECT_THAT(std::string(Matmul().SpaceFor(skinny, t)->Validate(sharded).message()),
              HasSubstr("shards=2 exceeds both the 1 M blocks and the 1 N blocks"));
  EXPECT_THAT(Matmul().Lower(p, Parse("tile_m=128"), t).status().message(), HasSubstr("missing"));
  Space small = *Matmul().SpaceFor(Gemm(300, 512, 512), t);
  Config c = Matmul().Default(Gemm(300, 512, 512), t);
  c.Set("block_m", "8");  // 3 M tiles: block_m=4 already covers them
  EXPECT_THAT(std::string(small.Validate(c).message()), HasSubstr("block_m=8 is redundant"));
  c.Set("block_m", "4");
  EXPECT_TRUE(small.Validate(c).ok());
  Space fp8 = *Matmul().SpaceFor(Gemm(4096, 4096, 4096, "fp8"), Load("snc3"));
  Config k256 = Matmul().Default(p, t);
  k256.Set("tile_k", "256");
  EXPECT_TRUE(fp8.Validate(k256).ok()) << fp8.Validate(k256);
  EXPECT_EQ(space.Validate(k256).code(), absl::StatusCode::kInvalidArgument);  // not offered
}

TEST(MatmulTest, The4096SpaceHasManyValidConfigs) {
  sim::Target t = Load("snc2");
  Space space = *Matmul().SpaceFor(Gemm(4096, 4096, 4096), t);
  std::mt19937_64 rng(1);
  const int samples = 4000;
  const int valid = SampleValid(space, rng, samples);
  // Estimated valid configs: well above the 20,000 issue 4 asks for.
  EXPECT_GT(double(valid) / samples * double(space.Size()), 20000.0);
}

TEST(MatmulTest, SmallDefaultGemmsBusiestResourceIsDma) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(512, 512, 512);
  absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, Matmul().Default(p, t), t);
  ASSERT_TRUE(r.ok()) << r.status();
  // Not saturated (about half busy, so the bound is latency), but DMA is what is busiest.
  EXPECT_EQ(r->busiest[0].resource, sim::EngineKind::kDma);
  EXPECT_EQ(r->engines[int(sim::EngineKind::kTensor)].instructions, 16);
}

TEST(MatmulTest, BlockingTurnsTheDmaBound4096GemmTensorBound) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(4096, 4096, 4096);
  absl::StatusOr<sim::SimResult> def = Evaluate(Matmul(), p, Matmul().Default(p, t), t);
  absl::StatusOr<sim::SimResult> good = Evaluate(Matmul(), p, Parse(kBlocked4096), t);
  ASSERT_TRUE(def.ok() && good.ok());
  EXPECT_EQ(def->busiest[0].resource, sim::EngineKind::kDma);
  EXPECT_EQ(good->bound, "tensor");
  EXPECT_GE(good->engines[int(sim::EngineKind::kTensor)].busy_frac, 0.85);
  EXPECT_GT(def->time_ns / good->time_ns, 2.0);
  // Near the bound of the work it issues; the problem's roofline is the whole chip's, and this
  // config runs on one of its cores.
  EXPECT_GE(good->issued_roofline_ns / good->time_ns, 0.85);
  EXPECT_GE(good->time_ns, good->roofline_ns);
  // Same flops, so the same compute roofline; blocking moves fewer bytes.
  EXPECT_LT(good->hbm_bytes, def->hbm_bytes / 4);
}

TEST(MatmulTest, EvictionEngineAndDepthMatter) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(1024, 1024, 1024);
  // One K tile per accumulation group with SBUF accumulation: eviction-bound on Vector.
  Config shallow = Parse(
      "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=1,loop_order=mkn,bufs=2,"
      "hoist=1,stationary=a,evict=vector,shards=1");
  absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, shallow, t);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bound, "vector");
}

TEST(MatmulTest, ShardingSplitsTheWorkOverCores) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(4096, 4096, 4096);
  std::optional<ShardedRuns> runs = RunSharded(Matmul(), p, Parse(kBlocked4096), 2, t);
  ASSERT_TRUE(runs);
  EXPECT_LT(runs->sharded.time_ns, 0.6 * runs->one.time_ns);
}

TEST(MatmulTest, SystolicTargetsReportTheClosedForm) {
  for (auto [name, want] : {std::pair{"systolic-128x128-ws", 14303},
                            {"systolic-128x128-os", 12255},
                            {"systolic-128x128-is", 14303}}) {
    sim::Target t = Load(name);
    Problem p = Gemm(512, 512, 512);
    absl::StatusOr<sim::SimResult> r = Evaluate(Matmul(), p, Matmul().Default(p, t), t);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tensor_cycles, want) << name;
  }
}

// Random valid configs of `problem` verified on the CPU.
void VerifyRandomConfigs(const Problem& problem, const sim::Target& t, int count, uint64_t seed) {
  Space space = *Matmul().SpaceFor(problem, t);
  std::mt19937_64 rng(seed);
  int verified = 0;
  for (int attempt = 0; attempt < 200000 && verified < count; ++attempt) {
    Config c = space.Decode(rng() % space.Size());
    if (!space.Validate(c).ok()) continue;
    absl::Status s = Matmul().Verify(problem, c, t);
    EXPECT_TRUE(s.ok()) << c.ToString() << ": " << s;
    ++verified;
  }
  EXPECT_EQ(verified, count);
}

TEST(MatmulVerifyTest, RandomValidConfigsMatchTheReference) {
  sim::Target t2 = Load("snc2");
  VerifyRandomConfigs(Gemm(1000, 1300, 700), t2, 40, 1);
  VerifyRandomConfigs(Gemm(256, 1024, 512), t2, 20, 2);
  VerifyRandomConfigs(Gemm(100, 70, 300, "fp32"), t2, 20, 3);
  sim::Target t3 = Load("snc3");
  VerifyRandomConfigs(Gemm(900, 700, 1000, "fp8"), t3, 20, 4);
  VerifyRandomConfigs(Gemm(513, 511, 257), t3, 20, 5);
}

TEST(MatmulVerifyTest, DefaultVerifiesOnEveryTarget) {
  for (const char* name : {"snc2", "snc3", "systolic-64x32-os"}) {
    sim::Target t = Load(name);
    Problem p = Gemm(700, 900, 333);
    EXPECT_TRUE(Matmul().Verify(p, Matmul().Default(p, t), t).ok()) << name;
  }
}

class MatmulFaultTest : public ::testing::Test {
 protected:
  void TearDown() override { SetMatmulFaultForTesting(MatmulFault::kNone); }
};

TEST_F(MatmulFaultTest, AWrongKTailBoundIsAWrongAnswer) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(300, 600, 1000);  // K = 7 full tiles + 104
  Config c = Matmul().Default(p, t);
  ASSERT_TRUE(Matmul().Verify(p, c, t).ok());
  SetMatmulFaultForTesting(MatmulFault::kDropRaggedKTile);
  absl::Status s = Matmul().Verify(p, c, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("wrong answer"));
}

TEST_F(MatmulFaultTest, AShortNTailLeavesColumnsUnwritten) {
  sim::Target t = Load("snc2");
  Problem p = Gemm(256, 700, 256);
  Config c = Matmul().Default(p, t);
  ASSERT_TRUE(Matmul().Verify(p, c, t).ok());
  SetMatmulFaultForTesting(MatmulFault::kRaggedNOffByOne);
  EXPECT_EQ(Matmul().Verify(p, c, t).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tessel::kernels

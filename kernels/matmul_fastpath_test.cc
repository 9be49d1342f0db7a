// The steady-state fast path is exact: for a corpus of random valid matmul programs on both
// targets, the loop-structured (compact) lowering simulated with the fast path, the same program
// with --exact (every iteration simulated), and the flat lowering (every instruction emitted)
// give identical results, field by field.
#include <optional>
#include <random>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "kernels/matmul.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

void ExpectSame(const sim::SimResult& a, const sim::SimResult& b, const std::string& what) {
  EXPECT_EQ(a.ticks, b.ticks) << what;
  EXPECT_EQ(a.time_ns, b.time_ns) << what;
  EXPECT_EQ(a.tensor_cycles, b.tensor_cycles) << what;
  EXPECT_EQ(a.hbm_bytes, b.hbm_bytes) << what;
  EXPECT_EQ(a.roofline_ns, b.roofline_ns) << what;
  EXPECT_EQ(a.bound, b.bound) << what;
  for (int e = 0; e < sim::kNumEngines; ++e) {
    EXPECT_EQ(a.engines[e].busy_ticks, b.engines[e].busy_ticks) << what << " engine " << e;
    EXPECT_EQ(a.engines[e].instructions, b.engines[e].instructions) << what << " engine " << e;
    EXPECT_EQ(a.engines[e].busy_frac, b.engines[e].busy_frac) << what << " engine " << e;
  }
}

using Case = test_support::ValidCase;

// Random valid cases with dims up to `max_dim`, some ragged, some multiples of 512.
std::vector<Case> Corpus(const sim::Target& target, int count, uint64_t seed, int64_t max_dim) {
  const Kernel& kernel = *FindKernel("matmul");
  std::mt19937_64 rng(seed);
  return test_support::RandomValidCases(
      kernel, target, count, 300, rng, [max_dim](std::mt19937_64& draw) {
        auto dim = [&] {
          return draw() % 3 == 0 ? int64_t(512 * (1 + draw() % (max_dim / 512)))
                                 : int64_t(1 + draw() % max_dim);
        };
        return Problem{Dims{{"M", dim()}, {"N", dim()}, {"K", dim()}},
                       draw() % 4 ? "bf16" : "fp32"};
      });
}

class FastPathTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FastPathTest, FastPathExactAndFlatAgreeOnACorpus) {
  const sim::Target t = *sim::LoadTarget(GetParam());
  const Kernel& kernel = *FindKernel("matmul");
  // Cores whose program compressed, has anchored deps, strided ones, ones anchored further out.
  int compressed = 0, anchored = 0, strided = 0, outer = 0;
  for (const Case& c : Corpus(t, 300, 21, 2048)) {
    const std::string what = c.problem.dims.ToString() + " " + c.config.ToString();
    SetMatmulLoweringForTesting(MatmulLowering::kCompact);
    absl::StatusOr<sim::Program> compact = kernel.Lower(c.problem, c.config, t);
    SetMatmulLoweringForTesting(MatmulLowering::kFlat);
    absl::StatusOr<sim::Program> flat = kernel.Lower(c.problem, c.config, t);
    SetMatmulLoweringForTesting(MatmulLowering::kCompact);
    ASSERT_TRUE(compact.ok() && flat.ok()) << what;
    // The compact program unrolls to exactly the flat one.
    ASSERT_TRUE(test_support::UnrollsTo(*compact, *flat)) << what;
    for (size_t core = 0; core < flat->cores.size(); ++core) {
      const sim::CoreProgram& runs = compact->Source(core);
      compressed += runs.instructions.size() < flat->cores[core].instructions.size();
      anchored += std::ranges::any_of(runs.deps, [](int32_t d) { return d < 0; });
      const auto& forms = runs.anchor_forms;
      strided += std::ranges::any_of(forms, [](const sim::AnchorForm& f) { return f.stride > 0; });
      outer += std::ranges::any_of(forms, [](const sim::AnchorForm& f) { return f.up > 0; });
    }
    absl::StatusOr<sim::SimResult> fast = sim::Simulate(t, *compact, {});
    absl::StatusOr<sim::SimResult> exact = sim::Simulate(t, *compact, {.exact = true});
    absl::StatusOr<sim::SimResult> reference = sim::Simulate(t, *flat, {});
    ASSERT_TRUE(fast.ok() && exact.ok() && reference.ok()) << what;
    ExpectSame(*fast, *exact, "fast vs exact: " + what);
    ExpectSame(*exact, *reference, "exact vs flat: " + what);
  }
  EXPECT_GT(compressed, 100) << "the compact lowering should compress most programs";
  EXPECT_GT(anchored, 25) << "output-tile loops reading operands loaded before them are anchored";
  EXPECT_GT(strided, 10) << "last K blocks reading earlier partial sums are strided";
  EXPECT_GT(outer, 2) << "output-tile loops reading operands loaded before an outer loop";
}

// The compact and the flat lowering of `config_text` for `problem` on snc2.
struct Lowered {
  sim::Target target;
  sim::Program compact, flat;
};
Lowered LowerBoth(const Problem& problem, const char* config_text) {
  const sim::Target t = *sim::LoadTarget("snc2");
  const Kernel& kernel = *FindKernel("matmul");
  const Config config = *Config::Parse(config_text);
  EXPECT_TRUE(kernel.SpaceFor(problem, t)->Validate(config).ok());
  absl::StatusOr<sim::Program> compact = kernel.Lower(problem, config, t);
  SetMatmulLoweringForTesting(MatmulLowering::kFlat);
  absl::StatusOr<sim::Program> flat = kernel.Lower(problem, config, t);
  SetMatmulLoweringForTesting(MatmulLowering::kCompact);
  EXPECT_TRUE(compact.ok() && flat.ok());
  return {t, *std::move(compact), *std::move(flat)};
}

// An nkm config (128 M blocks of 4 output tiles, B hoisted above the M loop) for M=4096, N=256
// and `k`.
Lowered LowerNkmLoop(int64_t k) {
  return LowerBoth(Problem{Dims{{"M", 4096}, {"N", 256}, {"K", k}}, "bf16"},
                   "tile_m=32,tile_n=64,tile_k=128,block_m=1,block_n=4,block_k=2,loop_order=nkm,"
                   "bufs=2,hoist=1,stationary=a,evict=scalar,shards=1");
}

// Checks that the compact program unrolls to the flat one and simulates (fast path) exactly as
// it does.
void ExpectCompactIsFlat(const Lowered& l) {
  absl::StatusOr<sim::Program> unrolled = sim::Flatten(l.compact);
  ASSERT_TRUE(unrolled.ok()) << unrolled.status();
  EXPECT_EQ(unrolled->cores[0].deps, l.flat.cores[0].deps);
  absl::StatusOr<sim::SimResult> fast = sim::Simulate(l.target, l.compact, {});
  absl::StatusOr<sim::SimResult> reference = sim::Simulate(l.target, l.flat, {});
  ASSERT_TRUE(fast.ok() && reference.ok());
  ExpectSame(*fast, *reference, "fast vs flat");
}

// An M loop whose blocks all read the same hoisted B block (loaded before the loop) compresses to
// a repeat whose reads of it are anchored to the loop's entry, and still simulates exactly.
TEST(FastPathLoopTest, ALoopReadingOperandsLoadedBeforeItCompresses) {
  const Lowered l = LowerNkmLoop(256);
  // 128 M blocks of ~20 instructions each: compressed, a few of them are emitted.
  const sim::CoreProgram& c = l.compact.cores[0];
  EXPECT_LT(c.instructions.size() * 10, l.flat.cores[0].instructions.size());
  EXPECT_TRUE(std::ranges::any_of(c.deps, [](int32_t d) { return d < 0; }));
  ExpectCompactIsFlat(l);
}

// The last K block of an nkm schedule adds each tile's partial sum from the previous K block and
// also stores it, so its M blocks are longer than the previous block's: the partial sums it reads
// advance by a stride that is not its own period. The M loop still compresses, reading them
// through strided dependencies, and still simulates exactly.
TEST(FastPathLoopTest, TheLastKBlockReadsEarlierPartialSumsThroughStrides) {
  const Lowered l = LowerNkmLoop(512);
  // Two K blocks of 128 M blocks each: both M loops compress.
  const sim::CoreProgram& c = l.compact.cores[0];
  EXPECT_LT(c.instructions.size() * 10, l.flat.cores[0].instructions.size());
  EXPECT_TRUE(
      std::ranges::any_of(c.anchor_forms, [](const sim::AnchorForm& f) { return f.stride > 0; }));
  ExpectCompactIsFlat(l);
}

// A kmn schedule with two K blocks and, per core, 16 M blocks of 4 N blocks: the second K block
// reads the first's partial sums, which advance by the first block's M period. Had its N loops
// been compressed inside each M iteration, those reads would sit in nested repeats, where no
// stride can express them, and its M loop would stay uncompressed (every M iteration emitted);
// with the N loops flat, the M loop compresses, reading them through strides, and still
// simulates exactly.
TEST(FastPathLoopTest, AKOuterScheduleCompressesTheMiddleLoopOfItsLaterKBlocks) {
  const Lowered l =
      LowerBoth(Problem{Dims{{"M", 512}, {"N", 1024}, {"K", 2048}}, "bf16"},
                "tile_m=32,tile_n=128,tile_k=64,block_m=1,block_n=2,block_k=16,loop_order=kmn,"
                "bufs=1,hoist=0,stationary=b,evict=scalar,shards=1");
  const sim::CoreProgram& c = l.compact.cores[0];
  // Each K block: 16 M iterations of 4 N blocks of 2 output tiles. The last K block's M loop is
  // in a repeat covering at least 12 of its M iterations.
  int64_t last_repeat = 0;
  for (size_t i = 0; i < c.segments.size(); ++i) {
    if (c.segments[i].kind == sim::Segment::kBegin && c.segments[i].count >= 12) {
      last_repeat = std::max(last_repeat, int64_t(i));
    }
  }
  ASSERT_GT(last_repeat, 0) << "no repeat of 12 or more iterations";
  // That repeat's body is one whole M iteration, flat (the N blocks' tiles, no nested repeat).
  const sim::Segment& rep = c.segments[size_t(last_repeat)];
  for (size_t i = size_t(last_repeat) + 1; i < rep.match; ++i) {
    EXPECT_NE(c.segments[i].kind, sim::Segment::kBegin) << "a repeat nested in the M loop's";
  }
  EXPECT_TRUE(
      std::ranges::any_of(c.anchor_forms, [](const sim::AnchorForm& f) { return f.stride > 0; }));
  EXPECT_LT(c.instructions.size() * 5, l.flat.cores[0].instructions.size());
  ExpectCompactIsFlat(l);
}

// One block of 8 x 8 output tiles: its tile loop compresses (level 3 of the generator's Run)
// after a few tiles, the remaining ones are never generated, and the program still flattens to
// the flat one; with evict=split the tiles alternate engines, a period of two tiles.
TEST(FastPathLoopTest, AnOutputTileLoopCompressesOnceItsTilesRepeat) {
  for (const char* evict : {"vector", "split"}) {
    const std::string config =
        std::string(
            "tile_m=64,tile_n=64,tile_k=128,block_m=8,block_n=8,block_k=2,loop_order=mnk,"
            "bufs=1,hoist=0,stationary=a,shards=1,evict=") +
        evict;
    const Lowered l =
        LowerBoth(Problem{Dims{{"M", 512}, {"N", 512}, {"K", 256}}, "bf16"}, config.c_str());
    // 4 loads (A and B, two K tiles each), then 64 tiles of two matmuls, an eviction, a store.
    const sim::CoreProgram& f = l.flat.cores[0];
    ASSERT_EQ(f.instructions.size(), 4u + 64 * 4) << evict;
    const sim::CoreProgram& c = l.compact.cores[0];
    EXPECT_LT(c.instructions.size() * 4, f.instructions.size()) << evict;
    // A repeat covers at least 40 of the tiles (each of 4 instructions).
    int64_t longest = 0;
    for (size_t i = 0; i < c.segments.size(); ++i) {
      if (c.segments[i].kind == sim::Segment::kBegin) {
        longest = std::max(longest, c.RepeatFlatSize(i));
      }
    }
    EXPECT_GE(longest, 40 * 4) << evict << ": " << c.instructions.size() << " templates";
    ExpectCompactIsFlat(l);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FastPathTest, ::testing::Values("snc2", "snc3"));

}  // namespace
}  // namespace tessel::kernels

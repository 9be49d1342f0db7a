// conv2d's and bmm's compact lowerings are exact (issue 20): for a corpus of random valid programs
// of each on both neuron targets, shapes ragged and not, the default lowering (a core whose share
// has the same shape as the core before it is a copy of it; bmm's column loop and conv2d's runs
// of alike pixel tiles compressed)
// simulated with the fast path, the same program with --exact, and the flat lowering (every
// instruction of every core emitted) give identical results, field by field, and the compact
// program unrolls to the flat one.
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kernels/bmm.h"
#include "kernels/conv2d.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"

namespace tessel::kernels {
namespace {

// A random dim: 1..max, a third of the time a multiple of `round` (the rest mostly ragged).
int64_t Dim(std::mt19937_64& d, int64_t max, int64_t round) {
  return d() % 3 == 0 ? round * int64_t(1 + d() % uint64_t(max / round))
                      : int64_t(1 + d() % uint64_t(max));
}

// conv2d: 1-8 images (so that sharded cores often get alike shares), 1-2 x `scale` rows and
// columns (so that images often have runs of alike pixel tiles), 1-256 channels, 1x1, 3x3 or 5x5
// filters that fit, stride 1 or 2, padding below the filter.
Problem RandomConv2d(const Kernel& kernel, std::mt19937_64& d, int64_t scale) {
  const int64_t h = Dim(d, 2 * scale, 8), w = Dim(d, 2 * scale, 8);
  int64_t r = int64_t(1 + 2 * (d() % 3));
  const int64_t pad = int64_t(d() % uint64_t(r));
  while (r > std::min(h, w) + 2 * pad) r -= 2;  // the filter fits the padded input
  return test_support::ProblemOf(kernel,
                                 {int64_t(1 + d() % 8), Dim(d, 256, 64), h, w, Dim(d, 256, 64), r,
                                  r, int64_t(1 + d() % 2), std::min(pad, r - 1)},
                                 d() % 4 ? "bf16" : "fp32");
}

// bmm: 1-8 batches, M and K up to 16 x `scale`, N up to 64 x `scale` (so that row blocks
// often have enough column blocks to compress).
Problem RandomBmm(const Kernel& kernel, std::mt19937_64& d, int64_t scale) {
  return test_support::ProblemOf(kernel,
                                 {int64_t(1 + d() % 8), Dim(d, 16 * scale, 128),
                                  Dim(d, 64 * scale, 128), Dim(d, 16 * scale, 128)},
                                 d() % 4 ? "bf16" : "fp32");
}

struct Param {
  const char* kernel;
  const char* target;
  Problem (*random)(const Kernel&, std::mt19937_64&, int64_t);
  std::function<void(bool)> copy_cores;  // the kernel's lowering switch
  bool compresses;                       // its compact lowering also compresses loops
};

class CopiedCoresTest : public ::testing::TestWithParam<Param> {
 protected:
  void TearDown() override { GetParam().copy_cores(true); }
};

// TESSEL_FASTPATH_CASES=N and TESSEL_FASTPATH_SEED=S run a longer corpus (the fuzzing run of
// issue 20: N cases from seed S, twice the dims); by default 300 cases from seed 20.
TEST_P(CopiedCoresTest, CopiedCoresSimulateAsTheFlatLowering) {
  const Param& param = GetParam();
  const sim::Target t = test_support::Load(param.target);
  const Kernel& kernel = *FindKernel(param.kernel);
  const int64_t cases = test_support::EnvOr("TESSEL_FASTPATH_CASES", 300);
  const uint64_t seed = uint64_t(test_support::EnvOr("TESSEL_FASTPATH_SEED", 20));
  const int64_t scale = cases > 300 ? 64 : 32;
  std::mt19937_64 rng(seed);
  const std::vector<test_support::ValidCase> corpus = test_support::RandomValidCases(
      kernel, t, int(cases), 300, rng,
      [&](std::mt19937_64& d) { return param.random(kernel, d, scale); });
  EXPECT_EQ(int64_t(corpus.size()), cases) << "problems without a valid config were drawn";
  test_support::LoweringCounts counts;
  test_support::ExpectLoweringsAgree(
      kernel, t, corpus, [&] { param.copy_cores(false); }, [&] { param.copy_cores(true); },
      &counts);
  if (HasFatalFailure()) return;
  std::printf("%d programs: %d cores compressed, %d copied\n", int(corpus.size()),
              counts.compressed, counts.copied);
  EXPECT_GT(counts.copied, cases / 10) << "many sharded programs should copy cores";
  if (param.compresses) {
    EXPECT_GT(counts.compressed, cases / 10)
        << "the lowering should compress loops in many programs";
  }
}

void Conv2dCopies(bool copy) {
  SetConv2dLoweringForTesting(copy ? Conv2dLowering::kCompact : Conv2dLowering::kFlat);
}
void BmmCopies(bool copy) {
  SetBmmLoweringForTesting(copy ? BmmLowering::kCompact : BmmLowering::kFlat);
}

INSTANTIATE_TEST_SUITE_P(
    KernelsAndTargets, CopiedCoresTest,
    ::testing::Values(Param{"conv2d", "snc2", RandomConv2d, Conv2dCopies, true},
                      Param{"conv2d", "snc3", RandomConv2d, Conv2dCopies, true},
                      Param{"bmm", "snc2", RandomBmm, BmmCopies, true},
                      Param{"bmm", "snc3", RandomBmm, BmmCopies, true}),
    [](const auto& info) { return std::string(info.param.kernel) + "_" + info.param.target; });

}  // namespace
}  // namespace tessel::kernels

// conv2d's copied cores are exact (issue 20): for a corpus of random valid conv2d programs on both
// neuron targets, shapes ragged and not, the default lowering (a core whose share has the same
// shape as the core before it is a copy of it) simulated with the fast path, the same program
// with --exact, and the flat lowering (every core emitted) give identical results, field by
// field, and the programs are equal core by core.
#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kernels/conv2d.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"

namespace tessel::kernels {
namespace {

// Random valid cases: 1-8 images (so that sharded cores often get alike shares), 1-`max_hw`
// rows and columns, 1-256 input and output channels (a third multiples of 64), 1x1, 3x3 or 5x5
// filters that fit, stride 1 or 2, padding below the filter, bf16 or (a quarter) fp32.
std::vector<test_support::ValidCase> Corpus(const Kernel& kernel, const sim::Target& target,
                                            int count, uint64_t seed, int64_t max_hw) {
  std::mt19937_64 rng(seed);
  return test_support::RandomValidCases(kernel, target, count, 300, rng, [&](std::mt19937_64& d) {
    auto channels = [&] {
      return d() % 3 == 0 ? int64_t(64 * (1 + d() % 4)) : int64_t(1 + d() % 256);
    };
    const int64_t h = int64_t(1 + d() % max_hw), w = int64_t(1 + d() % max_hw);
    int64_t r = int64_t(1 + 2 * (d() % 3));
    const int64_t pad = int64_t(d() % uint64_t(r));
    while (r > std::min(h, w) + 2 * pad) r -= 2;  // the filter fits the padded input
    return test_support::ProblemOf(kernel,
                                   {int64_t(1 + d() % 8), channels(), h, w, channels(), r, r,
                                    int64_t(1 + d() % 2), std::min(pad, r - 1)},
                                   d() % 4 ? "bf16" : "fp32");
  });
}

class Conv2dFastPathTest : public ::testing::TestWithParam<const char*> {
 protected:
  void TearDown() override { SetConv2dLoweringForTesting(Conv2dLowering::kCopyCores); }
};

// TESSEL_FASTPATH_CASES=N and TESSEL_FASTPATH_SEED=S run a longer corpus (the fuzzing run of
// issue 20: N cases from seed S, up to 64 x 64 images); by default 300 cases from seed 20.
TEST_P(Conv2dFastPathTest, CopiedCoresSimulateAsTheFlatLowering) {
  const sim::Target t = test_support::Load(GetParam());
  const Kernel& kernel = *FindKernel("conv2d");
  const int64_t cases = test_support::EnvOr("TESSEL_FASTPATH_CASES", 300);
  const uint64_t seed = uint64_t(test_support::EnvOr("TESSEL_FASTPATH_SEED", 20));
  const std::vector<test_support::ValidCase> corpus =
      Corpus(kernel, t, int(cases), seed, cases > 300 ? 64 : 32);
  EXPECT_EQ(int64_t(corpus.size()), cases) << "problems without a valid config were drawn";
  test_support::LoweringCounts counts;
  test_support::ExpectLoweringsAgree(
      kernel, t, corpus, [] { SetConv2dLoweringForTesting(Conv2dLowering::kFlat); },
      [] { SetConv2dLoweringForTesting(Conv2dLowering::kCopyCores); }, &counts);
  if (HasFatalFailure()) return;
  std::printf("%d programs: %d cores copied\n", int(corpus.size()), counts.copied);
  EXPECT_GT(counts.copied, cases / 10) << "many sharded programs should copy cores";
}

INSTANTIATE_TEST_SUITE_P(Targets, Conv2dFastPathTest, ::testing::Values("snc2", "snc3"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessel::kernels

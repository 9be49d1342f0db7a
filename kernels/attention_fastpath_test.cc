// Attention's fast path is exact (issue 20): for a corpus of random valid attention programs on
// both neuron targets, shapes ragged and not, causal and not, the compact lowering (a core's heads
// loop compressed, cores with as many heads as the one before copied) simulated with the fast
// path, the same program with --exact, and the flat lowering (every instruction of every core
// emitted) give identical results, field by field, and the compact program unrolls to exactly
// the flat one.
#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention_sim.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using attention_internal::AttentionLowering;
using attention_internal::SetAttentionLoweringForTesting;
using test_support::EnvOr;

// Random valid cases: 1-2 batches of 1-16 heads (so that cores run several heads), sequences up
// to `max_seq` (a third multiples of 128, the rest mostly ragged; causal ones with seq_q <=
// seq_k), head_dim 16-128, bf16 or (a quarter) fp32.
std::vector<test_support::ValidCase> Corpus(const Kernel& kernel, const sim::Target& target,
                                            int count, uint64_t seed, int64_t max_seq) {
  std::mt19937_64 rng(seed);
  return test_support::RandomValidCases(kernel, target, count, 300, rng, [&](std::mt19937_64& d) {
    auto seq = [&] {
      return d() % 3 == 0 ? int64_t(128 * (1 + d() % (max_seq / 128))) : int64_t(1 + d() % max_seq);
    };
    int64_t sq = seq(), sk = seq();
    const int64_t causal = int64_t(1 + d() % 2);  // 1: causal, 2: not
    if (causal == 1 && sq > sk) std::swap(sq, sk);
    const int64_t head_dim = d() % 2 ? 128 : int64_t(16 + d() % 113);
    return test_support::ProblemOf(
        kernel, {int64_t(1 + d() % 2), int64_t(1 + d() % 16), sq, sk, head_dim, causal},
        d() % 4 ? "bf16" : "fp32");
  });
}

class AttentionFastPathTest : public ::testing::TestWithParam<const char*> {
 protected:
  void TearDown() override { SetAttentionLoweringForTesting(AttentionLowering::kCompact); }
};

// TESSEL_FASTPATH_CASES=N and TESSEL_FASTPATH_SEED=S run a longer corpus (the fuzzing run of
// issue 20: N cases from seed S, sequences up to 2048); by default 300 cases from seed 20.
TEST_P(AttentionFastPathTest, FastPathExactAndFlatAgreeOnACorpus) {
  const sim::Target t = test_support::Load(GetParam());
  const Kernel& kernel = *FindKernel("attention");
  const int64_t cases = EnvOr("TESSEL_FASTPATH_CASES", 300);
  const uint64_t seed = uint64_t(EnvOr("TESSEL_FASTPATH_SEED", 20));
  const std::vector<test_support::ValidCase> corpus =
      Corpus(kernel, t, int(cases), seed, cases > 300 ? 2048 : 768);
  EXPECT_EQ(int64_t(corpus.size()), cases) << "problems without a valid config were drawn";
  test_support::LoweringCounts counts;
  test_support::ExpectLoweringsAgree(
      kernel, t, corpus, [] { SetAttentionLoweringForTesting(AttentionLowering::kFlat); },
      [] { SetAttentionLoweringForTesting(AttentionLowering::kCompact); }, &counts);
  if (HasFatalFailure()) return;
  std::printf("%d programs: %d cores compressed, %d copied\n", int(corpus.size()),
              counts.compressed, counts.copied);
  // Both mechanisms must be exercised, or the corpus checks nothing of them.
  EXPECT_GT(counts.compressed, cases / 10)
      << "the heads loop should be compressed in many programs";
  EXPECT_GT(counts.copied, cases / 10) << "many sharded programs should copy cores";
}

INSTANTIATE_TEST_SUITE_P(Targets, AttentionFastPathTest, ::testing::Values("snc2", "snc3"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessel::kernels

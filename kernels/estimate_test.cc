// The analytic estimates of the kernels that count their lowered programs (attention, bmm,
// conv2d; kernels/estimate_util.h LoweredEstimator): on random valid configs of each kernel's
// large example shape they must rank configs as the simulator does.
#include <chrono>
#include <random>

#include "gtest/gtest.h"
#include "kernels/estimate_testing.h"
#include "kernels/estimate_util.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"

namespace tessel::kernels {
namespace {

using test_support::Load;
using test_support::SampleEstimates;
using test_support::Spearman;

// One kernel's ranking check: `samples` random valid configs of `dims` (bf16) on `target`, whose
// estimates must rank as the simulator does with Spearman's rho >= min_spearman (measured, see
// the test's comment, with a margin).
struct Case {
  const Kernel* kernel;
  const char* target;
  Dims dims;
  int samples;
  double min_spearman;
};

void ExpectRanks(const Case& c) {
  const sim::Target t = Load(c.target);
  const Problem p{c.dims, "bf16"};
  absl::StatusOr<Space> space = c.kernel->SpaceFor(p, t);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_TRUE(space->has_estimate());
  const auto t0 = std::chrono::steady_clock::now();
  const test_support::EstimateSample s = SampleEstimates(*c.kernel, p, t, *space, c.samples, 13);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(int(s.configs.size()), c.samples);
  {
    const auto e0 = std::chrono::steady_clock::now();
    for (const Config& config : s.configs) (void)space->EstimateNs(config);
    const double us = 1e6 *
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count() /
                      double(s.configs.size());
    std::printf("  estimate: %.1f us per call\n", us);
  }
  const double rho = Spearman(s.estimate_ns, s.sim_ns);
  std::printf("%s %s %s: spearman %.3f, top-10%% overlap %.2f (%.1f s)\n", c.kernel->name().data(),
              c.target, c.dims.ToString().c_str(), rho,
              test_support::TopKOverlap(s, size_t(c.samples / 10)), secs);
  SCOPED_TRACE(std::string(c.kernel->name()) + " " + c.target);
  test_support::ExpectRanksAbove(s, c.min_spearman);
}

TEST(EstimateTest, AttentionRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectRanks({FindKernel("attention"), "snc3",
               *Dims::Parse("batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1"), 100,
               0.9});
}

TEST(EstimateTest, BmmRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectRanks({FindKernel("bmm"), "snc2", *Dims::Parse("B=4,M=2048,N=2048,K=2048"), 300, 0.9});
}

TEST(EstimateTest, Conv2dRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectRanks({FindKernel("conv2d"), "snc2",
               *Dims::Parse("N=16,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1"), 100, 0.0});
}

}  // namespace
}  // namespace tessel::kernels

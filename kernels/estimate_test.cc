// The analytic estimates of the kernels that count their lowered programs (attention, bmm,
// conv2d; kernels/estimate_util.h LoweredEstimator): on random valid configs of each kernel's
// large example shape they must rank configs as the simulator does.
#include "gtest/gtest.h"
#include "kernels/estimate_testing.h"
#include "kernels/estimate_util.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"

namespace tessel::kernels {
namespace {

using test_support::ExpectEstimateRanks;

TEST(EstimateTest, AttentionRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectEstimateRanks({FindKernel("attention"), "snc3",
                       *Dims::Parse("batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1"),
                       100, 0.9});
}

TEST(EstimateTest, BmmRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectEstimateRanks(
      {FindKernel("bmm"), "snc2", *Dims::Parse("B=4,M=2048,N=2048,K=2048"), 300, 0.9});
}

TEST(EstimateTest, Conv2dRanksRandomConfigsAsTheSimulatorDoes) {
  ExpectEstimateRanks({FindKernel("conv2d"), "snc2",
                       *Dims::Parse("N=16,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1"), 100,
                       0.85});  // measured 0.956
}

}  // namespace
}  // namespace tessel::kernels

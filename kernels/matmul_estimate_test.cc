#include "kernels/matmul_estimate.h"

#include <random>

#include "gtest/gtest.h"
#include "kernels/estimate_testing.h"
#include "kernels/kernel_testing.h"
#include "kernels/matmul.h"

namespace tessel::kernels {
namespace {

using test_support::Load;
using test_support::SampleEstimates;
using test_support::Spearman;

struct Case {
  const char* target;
  Dims dims;
  double min_spearman;  // measured (see the test's comment), with a margin
};

// 300 random valid configs of a large matmul per target: the estimate must rank them as the
// simulator does (Spearman's rho above the threshold), and a constant or random estimate of the
// same sample must not pass the same threshold.
TEST(MatmulEstimateTest, RanksRandomConfigsAsTheSimulatorDoes) {
  const MatmulKernel kernel;
  for (const Case& c : {Case{"snc2", Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, 0.95},
                        Case{"snc3", Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, 0.95}}) {
    const sim::Target t = Load(c.target);
    const Problem p{c.dims, "bf16"};
    absl::StatusOr<Space> space = kernel.SpaceFor(p, t);
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_TRUE(space->has_estimate());
    const test_support::EstimateSample s = SampleEstimates(kernel, p, t, *space, 300, 13);
    ASSERT_EQ(s.configs.size(), 300u);
    const double rho = Spearman(s.estimate_ns, s.sim_ns);
    std::printf("%s %s: spearman %.3f, top-30 overlap %.2f\n", c.target, c.dims.ToString().c_str(),
                rho, test_support::TopKOverlap(s, 30));
    EXPECT_GT(rho, c.min_spearman) << c.target;
    std::vector<double> constant(s.sim_ns.size(), 1.0), random(s.sim_ns.size());
    std::mt19937_64 rng(7);
    for (double& x : random) x = double(rng() % 1000000);
    EXPECT_LE(Spearman(constant, s.sim_ns), c.min_spearman);
    EXPECT_LE(Spearman(random, s.sim_ns), c.min_spearman);
  }
}

}  // namespace
}  // namespace tessel::kernels

#include "kernels/matmul_estimate.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "kernels/estimate_testing.h"
#include "kernels/estimate_util.h"
#include "kernels/kernel_testing.h"
#include "kernels/matmul.h"
#include "sim/program.h"

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
    SCOPED_TRACE(c.target);
    test_support::ExpectRanksAbove(s, c.min_spearman);
  }
}

// The estimate's TensorE and eviction times are counts, not fits: on one core they equal the
// simulator's busy times of TensorE and of Vector + Scalar (snc2, where the two share the PSUM
// port, so the estimate adds them), for random valid configs of a ragged shape.
TEST(MatmulEstimateTest, CountsTheSimulatorsTensorAndEvictionBusyTimeOnOneCore) {
  const MatmulKernel kernel;
  const sim::Target t = Load("snc2");
  const Problem p{Dims{{"M", 1000}, {"N", 3000}, {"K", 700}}, "bf16"};
  absl::StatusOr<Space> space = kernel.SpaceFor(p, t);
  ASSERT_TRUE(space.ok()) << space.status();
  std::mt19937_64 rng(5);
  int checked = 0;
  for (int attempt = 0; attempt < 100000 && checked < 100; ++attempt) {
    const Config c = space->Decode(rng() % space->Size());
    absl::StatusOr<matmul_internal::Plan> plan = matmul_internal::MakePlan(p, c, t, true);
    if (!plan.ok() || plan->shards != 1) continue;
    const MatmulEstimate e = EstimateMatmul(*plan, t);
    absl::StatusOr<sim::SimResult> r = Evaluate(kernel, p, c, t);
    ASSERT_TRUE(r.ok()) << c.ToString() << ": " << r.status();
    auto busy_ns = [&](sim::EngineKind k) {
      return double(r->engines[size_t(k)].busy_ticks) / t.tick_ghz;
    };
    EXPECT_NEAR(e.tensor_ns, busy_ns(sim::EngineKind::kTensor), 1e-6 * e.tensor_ns + 1)
        << c.ToString();
    // evict=split alternates the copies between the engines in program order; the estimate
    // gives each of the (at most 4) tile size classes half to each, so it may put up to one copy
    // per class (and, in blocks of an odd number of tiles, a few more) on the other engine.
    double slack = 1e-6 * e.evict_ns + 1;
    if (plan->evict == "split") {
      sim::Instruction copy = sim::MakeEngineOp(sim::Op::kTensorCopy, sim::EngineKind::kVector,
                                                int(plan->tile_n), 128, sim::Mem::kPsum);
      const double vector = EngineNs(t, copy);
      copy.engine = sim::EngineKind::kScalar;
      slack += 4 * std::abs(vector - EngineNs(t, copy)) + 2e-3 * e.evict_ns;
    }
    EXPECT_NEAR(e.evict_ns, busy_ns(sim::EngineKind::kVector) + busy_ns(sim::EngineKind::kScalar),
                slack)
        << c.ToString();
    ++checked;
  }
  EXPECT_EQ(checked, 100);
}

}  // namespace
}  // namespace tessel::kernels

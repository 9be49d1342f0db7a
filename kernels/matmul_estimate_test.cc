#include "kernels/matmul_estimate.h"

#include <algorithm>
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

// 300 random valid configs of a large matmul per target: the estimate must rank them as the
// simulator does (Spearman's rho above the threshold), and a constant or random estimate of the
// same sample must not pass the same threshold.
TEST(MatmulEstimateTest, RanksRandomConfigsAsTheSimulatorDoes) {
  const MatmulKernel kernel;
  for (const char* target : {"snc2", "snc3"}) {
    test_support::ExpectEstimateRanks(
        {&kernel, target, Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, 300, 0.95});
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

// A matmul with a skinny M (a decode step's projections) has few output tiles per core, so its
// store queue's share of the DMA traffic is tiny and each store's turn long: how many stores
// wait for each other, not their bytes, sets how long the last K blocks take. Of 300 random
// valid configs, the one the estimate ranks first must simulate within 5% of the fastest of
// them, on both targets.
TEST(MatmulEstimateTest, ItsFirstChoiceOfASkinnyMatmulIsNearTheFastest) {
  const MatmulKernel kernel;
  for (const char* target : {"snc2", "snc3"}) {
    const sim::Target t = Load(target);
    for (const Dims& dims :
         {Dims{{"M", 8}, {"N", 4096}, {"K", 14336}}, Dims{{"M", 1}, {"N", 4096}, {"K", 4096}}}) {
      const Problem p{dims, "bf16"};
      absl::StatusOr<Space> space = kernel.SpaceFor(p, t);
      ASSERT_TRUE(space.ok()) << space.status();
      const test_support::EstimateSample s =
          test_support::SampleEstimates(kernel, p, t, *space, 300, 13);
      ASSERT_EQ(s.configs.size(), 300u);
      const size_t first = size_t(std::min_element(s.estimate_ns.begin(), s.estimate_ns.end()) -
                                  s.estimate_ns.begin());
      const double fastest = *std::min_element(s.sim_ns.begin(), s.sim_ns.end());
      EXPECT_LE(s.sim_ns[first], 1.05 * fastest)
          << target << " " << dims.ToString() << ": " << s.configs[first].ToString();
    }
  }
}

}  // namespace
}  // namespace tessel::kernels

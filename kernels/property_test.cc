// Properties of the simulator over random (shape, config) pairs of the matmul kernel on both
// targets: time is never below the roofline, more HBM bandwidth never makes a program slower (the
// engine is a max-plus recurrence in program order with static DMA shares, so every time is a
// non-decreasing function of every duration), and the same seed gives the same result.
#include <optional>
#include <random>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"

namespace tessel::kernels {
namespace {

using Case = test_support::ValidCase;

// `count` random valid cases on `target`, dims up to 1536 (ragged ones included).
std::vector<Case> RandomCases(const sim::Target& target, int count, uint64_t seed) {
  const Kernel& kernel = *FindKernel("matmul");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dim(1, 1536);
  return test_support::RandomValidCases(
      kernel, target, count, 200, rng, [&](std::mt19937_64& draw) {
        return Problem{Dims{{"M", dim(draw)}, {"N", dim(draw)}, {"K", dim(draw)}},
                       draw() % 4 ? "bf16" : "fp32"};
      });
}

class PropertyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PropertyTest, TimeIsNeverBelowTheRoofline) {
  sim::Target t = *sim::LoadTarget(GetParam());
  for (const Case& c : RandomCases(t, 500, 11)) {
    absl::StatusOr<sim::SimResult> r = Evaluate(*FindKernel("matmul"), c.problem, c.config, t);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(r->time_ns, r->issued_roofline_ns)
        << c.problem.dims.ToString() << " " << c.config.ToString();
    // The problem's minimum: what any schedule must do, so no more than this one issues.
    EXPECT_EQ(r->roofline_ns, RooflineNs(*FindKernel("matmul"), c.problem, t));
    EXPECT_LE(r->roofline_ns, r->issued_roofline_ns * (1 + 1e-9))
        << c.problem.dims.ToString() << " " << c.config.ToString();
    EXPECT_GT(r->time_ns, 0);
  }
}

TEST_P(PropertyTest, MoreHbmBandwidthIsNeverSlower) {
  sim::Target t = *sim::LoadTarget(GetParam());
  sim::Target fast = t;
  fast.hbm_gbps_per_core *= 2;
  fast.hbm_gbps_per_chip *= 2;
  for (const Case& c : RandomCases(t, 500, 12)) {
    absl::StatusOr<sim::SimResult> base = Evaluate(*FindKernel("matmul"), c.problem, c.config, t);
    absl::StatusOr<sim::SimResult> more =
        Evaluate(*FindKernel("matmul"), c.problem, c.config, fast);
    ASSERT_TRUE(base.ok() && more.ok());
    EXPECT_LE(more->ticks, base->ticks) << c.problem.dims.ToString() << " " << c.config.ToString();
  }
}

TEST_P(PropertyTest, SameSeedSameResult) {
  sim::Target t = *sim::LoadTarget(GetParam());
  sim::SimOptions noisy{.noise_sigma = 0.03, .seed = 5};
  for (const Case& c : RandomCases(t, 500, 13)) {
    absl::StatusOr<sim::SimResult> a =
        Evaluate(*FindKernel("matmul"), c.problem, c.config, t, noisy);
    absl::StatusOr<sim::SimResult> b =
        Evaluate(*FindKernel("matmul"), c.problem, c.config, t, noisy);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->time_ns, b->time_ns);
    EXPECT_EQ(a->ticks, b->ticks);
    EXPECT_EQ(a->hbm_bytes, b->hbm_bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, PropertyTest, ::testing::Values("snc2", "snc3"));

}  // namespace
}  // namespace tessel::kernels

// Every kernel's programs are simulated without allocating, as sim/alloc_test.cc checks for a
// synthetic program: the simulation of a lowered config (the hot loop of a tune) allocates
// nothing once its thread has simulated a program as large. Counts global operator new calls,
// so it is a binary of its own.
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/kernel_testing.h"
#include "sim/simulate.h"
#include "tests/testing/count_allocations.h"

namespace tessel::kernels {
namespace {

// The default, then up to `random` seeded random valid configs of `kernel`'s example problem.
std::vector<Config> Configs(const Kernel& kernel, const Problem& problem, const sim::Target& target,
                            int random) {
  std::vector<Config> configs = {kernel.Default(problem, target)};
  absl::StatusOr<Space> space = kernel.SpaceFor(problem, target);
  if (!space.ok()) return configs;
  std::mt19937_64 rng(7);
  while (static_cast<int>(configs.size()) < 1 + random) {
    std::optional<Config> config = test_support::RandomValid(*space, rng, 100'000);
    if (!config) break;
    configs.push_back(*std::move(config));
  }
  return configs;
}

TEST(KernelAllocationTest, SimulatingAnyKernelsProgramAgainAllocatesNothing) {
  constexpr int kConfigs = 3;  // per kernel and target: the default and two random ones
  for (const char* target_name : {"snc2", "snc3"}) {
    const absl::StatusOr<sim::Target> target = sim::LoadTarget(target_name);
    ASSERT_TRUE(target.ok()) << target.status();
    for (const Kernel* kernel : AllKernels()) {
      Problem problem = kernel->Example();
      if (!kernel->ValidateProblem(problem, *target).ok()) continue;  // e.g. a dtype it lacks
      int checked = 0;
      for (const Config& config : Configs(*kernel, problem, *target, 40)) {
        if (checked == kConfigs) break;
        const std::string what =
            std::string(kernel->name()) + " " + config.ToString() + " on " + target_name;
        absl::StatusOr<sim::Program> program = kernel->Lower(problem, config, *target);
        ASSERT_TRUE(program.ok()) << what << ": " << program.status();
        // A valid config may still lower to more instructions than a trial simulates (a
        // failed trial in a tune, not a simulation): another config is drawn.
        if (!sim::ValidateProgram(*target, *program).ok()) continue;
        for (bool exact : {false, true}) {
          const sim::SimOptions options{.exact = exact};
          absl::StatusOr<sim::SimResult> first = sim::Simulate(*target, *program, options);
          ASSERT_TRUE(first.ok()) << what << ": " << first.status();
          const long before = testing::g_allocations.load();
          absl::StatusOr<sim::SimResult> second = sim::Simulate(*target, *program, options);
          const long allocations = testing::g_allocations.load() - before;
          ASSERT_TRUE(second.ok()) << what;
          EXPECT_EQ(second->ticks, first->ticks) << what;
          EXPECT_EQ(allocations, 0) << what << (exact ? " (exact)" : " (fast path)");
        }
        ++checked;
      }
      EXPECT_EQ(checked, kConfigs) << kernel->name() << " on " << target_name;
    }
  }
}

}  // namespace
}  // namespace tessel::kernels

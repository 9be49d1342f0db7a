// Tests for kernel info built from each kernel's example problem (issue 14, finding 4: every
// kernel has params and a default config, including attention and conv2d, which reject a problem
// with every dim 1024).
#include "kernels/info.h"

#include <gtest/gtest.h>

#include "sim/api.h"

namespace tessel::kernels {
namespace {

TEST(KernelInfoTest, EveryKernelHasParamsAndAValidDefaultOnTheBuiltInTargets) {
  for (const char* name : {"snc2", "snc3"}) {
    const sim::Target target = *sim::LoadTarget(name);
    for (const Kernel* kernel : AllKernels()) {
      const KernelInfo info = DescribeKernel(*kernel, target);
      EXPECT_EQ(info.name, kernel->name());
      EXPECT_EQ(info.version, kernel->version());
      EXPECT_EQ(info.dims, kernel->dims());
      EXPECT_EQ(info.dtypes, kernel->dtypes());
      EXPECT_EQ(info.example.dims, kernel->Example().dims);
      EXPECT_FALSE(info.params.empty()) << kernel->name() << " on " << name;
      ASSERT_FALSE(info.default_config.empty()) << kernel->name() << " on " << name;
      const Space space = *kernel->SpaceFor(info.example, target);
      EXPECT_TRUE(space.Validate(info.default_config).ok())
          << kernel->name() << " on " << name << ": " << space.Validate(info.default_config);
      EXPECT_EQ(space.params().size(), info.params.size());
    }
  }
}

TEST(KernelInfoTest, AttentionAndConv2dRejectAllDims1024ButTheirExampleWorks) {
  const sim::Target target = *sim::LoadTarget("snc2");
  for (const char* name : {"attention", "conv2d"}) {
    const Kernel& kernel = *FindKernel(name);
    Problem all_1024;
    for (const std::string& dim : kernel.dims()) all_1024.dims.Set(dim, 1024);
    EXPECT_FALSE(kernel.ValidateProblem(all_1024, target).ok()) << name;
    EXPECT_TRUE(ExampleDefault(kernel, "bf16", target).ok()) << name;
  }
}

TEST(KernelInfoTest, ExampleDefaultIsTheDefaultOfTheExampleInThatDtypeOrARejection) {
  for (const char* name : {"snc2", "snc3"}) {
    const sim::Target target = *sim::LoadTarget(name);
    for (const Kernel* kernel : AllKernels()) {
      for (const std::string& dtype : kernel->dtypes()) {
        const Problem problem = ExampleProblem(*kernel, dtype);
        EXPECT_EQ(problem.dtype, dtype);
        absl::StatusOr<Config> config = ExampleDefault(*kernel, dtype, target);
        if (!kernel->ValidateProblem(problem, target).ok()) {
          EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
          continue;
        }
        ASSERT_TRUE(config.ok()) << kernel->name() << " " << dtype << ": " << config.status();
        EXPECT_EQ(*config, kernel->Default(problem, target));
        EXPECT_TRUE(kernel->SpaceFor(problem, target)->Validate(*config).ok())
            << kernel->name() << " " << dtype << " on " << name;
      }
    }
  }
}

TEST(KernelInfoTest, ExampleProblemKeepsTheExamplesDtypeWhenNoneIsGiven) {
  const Kernel& matmul = *FindKernel("matmul");
  EXPECT_EQ(ExampleProblem(matmul).dtype, matmul.Example().dtype);
  EXPECT_EQ(ExampleProblem(matmul, "fp8").dtype, "fp8");
}

}  // namespace
}  // namespace tessel::kernels

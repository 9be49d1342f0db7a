// Tests for the one workload resolution.
#include "kernels/workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "sim/api.h"

namespace tessel::kernels {
namespace {

using ::testing::HasSubstr;

WorkloadRequest Matmul(std::string_view shape) {
  return {.kernel = "matmul", .dims = *Dims::Parse(shape), .dtype = "", .target = ""};
}

TEST(ResolveTest, FillsTheDefaultsAndPutsDimsInTheKernelsOrder) {
  absl::StatusOr<ResolvedWorkload> resolved = Resolve(Matmul("K=256,N=128,M=512"));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->kernel, FindKernel("matmul"));
  EXPECT_EQ(resolved->target.name, "snc2");
  EXPECT_EQ(resolved->problem.dtype, "bf16");
  EXPECT_EQ(resolved->Shape(), "M=512,N=128,K=256");
  EXPECT_EQ(resolved->problem.dims.items().front().first, "M");
}

TEST(ResolveTest, TheWireFormResolvesToTheSameWorkload) {
  WorkloadRequest request = Matmul("N=64,M=32,K=16");
  request.dtype = "fp32";
  request.target = "snc3";
  const ResolvedWorkload resolved = *Resolve(request);
  const v1::Workload wire = resolved.ToProto();
  EXPECT_EQ(wire.kernel(), "matmul");
  ASSERT_EQ(wire.dims_size(), 3);
  EXPECT_EQ(wire.dims(0).name(), "M");
  EXPECT_EQ(wire.dims(2).value(), 16);
  EXPECT_EQ(wire.dtype(), "fp32");
  EXPECT_EQ(wire.target(), "snc3");
  const ResolvedWorkload again = *Resolve(wire);
  EXPECT_EQ(again.kernel, resolved.kernel);
  EXPECT_EQ(again.Shape(), resolved.Shape());
  EXPECT_EQ(again.problem.dtype, "fp32");
  EXPECT_EQ(again.target.name, "snc3");
}

TEST(ResolveTest, RejectsEachBadFieldWithAMessageNamingIt) {
  struct Case {
    std::function<void(WorkloadRequest&)> mutate;
    const char* message;
  };
  const Case cases[] = {
      {[](auto& r) { r.kernel = ""; }, "no kernel given; known kernels: attention, bmm"},
      {[](auto& r) { r.kernel = "nope"; }, "unknown kernel 'nope'; known kernels: attention"},
      {[](auto& r) { r.target = "tpu9"; }, "unknown target 'tpu9'"},
      {[](auto& r) { r.dims.Set("Q", 4); }, "kernel matmul has no dim 'Q'; its dims are M, N, K"},
      {[](auto& r) { r.dims = *Dims::Parse("M=8,N=8"); },
       "missing dim K for kernel matmul (needs M, N, K)"},
      {[](auto& r) { r.dims.Set("N", 0); }, "must be positive"},
      {[](auto& r) { r.dtype = "int3"; }, "int3"},
  };
  for (const Case& c : cases) {
    WorkloadRequest request = Matmul("M=8,N=8,K=8");
    c.mutate(request);
    absl::StatusOr<ResolvedWorkload> resolved = Resolve(request);
    ASSERT_FALSE(resolved.ok()) << c.message;
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(resolved.status().message()), HasSubstr(c.message));
  }
}

TEST(ResolveTest, RejectsWireDimsThatDimsCannotHold) {
  struct Case {
    std::function<void(v1::Workload&)> mutate;
    const char* message;
  };
  const Case cases[] = {
      {[](auto& w) { w.mutable_dims(1)->set_name(""); }, "a dim has an empty name"},
      {[](auto& w) { w.mutable_dims(1)->set_name("M"); }, "dim M is given more than once"},
      {[](auto& w) { w.mutable_dims(2)->set_value(-3); }, "dim K=-3 must be positive"},
  };
  for (const Case& c : cases) {
    v1::Workload wire = Resolve(Matmul("M=8,N=8,K=8"))->ToProto();
    c.mutate(wire);
    absl::StatusOr<ResolvedWorkload> resolved = Resolve(wire);
    ASSERT_FALSE(resolved.ok()) << c.message;
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(resolved.status().message()), HasSubstr(c.message));
  }
  // The kernel is judged before the dims, as the server always did.
  v1::Workload wire;
  wire.set_kernel("nope");
  wire.add_dims()->set_value(-1);
  EXPECT_THAT(std::string(Resolve(wire).status().message()), HasSubstr("unknown kernel 'nope'"));
}

TEST(ResolveTest, EveryKernelsExampleResolvesOnBothTargets) {
  for (const char* target : {"snc2", "snc3"}) {
    for (const Kernel* kernel : AllKernels()) {
      const Problem example = kernel->Example();
      WorkloadRequest request{.kernel = std::string(kernel->name()),
                              .dims = example.dims,
                              .dtype = example.dtype,
                              .target = target};
      absl::StatusOr<ResolvedWorkload> resolved = Resolve(request);
      ASSERT_TRUE(resolved.ok()) << kernel->name() << " on " << target << ": " << resolved.status();
      EXPECT_EQ(resolved->problem.dims, example.dims);
    }
  }
}

TEST(CachedTargetTest, ReturnsWhatLoadTargetDoesAndFailsTheSameWay) {
  absl::StatusOr<sim::Target> cached = CachedTarget("snc3");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->name, "snc3");
  EXPECT_EQ(cached->version, sim::LoadTarget("snc3")->version);
  EXPECT_EQ(CachedTarget("snc3")->name, "snc3");  // from the cache
  EXPECT_FALSE(CachedTarget("nosuch").ok());
}

}  // namespace
}  // namespace tessel::kernels

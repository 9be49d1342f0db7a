// Tests for the one workload resolution.
#include "kernels/workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "schema/strings.h"
#include "sim/api.h"

namespace tessel::kernels {
namespace {

using ::testing::HasSubstr;

WorkloadRequest Request(const std::string& kernel, std::string_view shape = "",
                        const std::string& dtype = "", const std::string& target = "") {
  return {.kernel = kernel,
          .dims = shape.empty() ? Dims() : *Dims::Parse(shape),
          .dtype = dtype,
          .target = target};
}

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
      {[](auto& w) { w.mutable_dims(2)->set_value(-3); }, "dim K=-3 must not be negative"},
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

// Issue 17: no request can make a worker lower a program for hours, and no message echoes a
// client's bytes whole. Each limit names its field; each check answers at once.
TEST(ResolveLimitsTest, HugeDimsAreRefusedBeforeAnythingIsComputedFromThem) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ResolvedWorkload> huge = Resolve(Matmul("M=1099511627776,N=128,K=128"));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("dim M=1099511627776 exceeds the largest dim"));
  v1::Workload wire = Resolve(Matmul("M=128,N=128,K=128"))->ToProto();
  wire.mutable_dims(0)->set_value(int64_t{1} << 62);
  EXPECT_THAT(Resolve(wire).status().message(), HasSubstr("exceeds the largest dim, 16777216"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(ResolveLimitsTest, AWorkloadMustFitTheTargetsHbmAndATrialsInstructionBudget) {
  WorkloadRequest rows = Request("softmax", "rows=16777216,cols=4096");
  absl::StatusOr<ResolvedWorkload> big = Resolve(rows);  // 2 x 128 GiB of bf16 on snc2
  EXPECT_THAT(big.status().message(), HasSubstr("take 256.0 GiB; snc2's HBM holds 32 GiB"));
  rows.target = "snc3";
  rows.dims = *Dims::Parse("rows=1048576,cols=4096");  // 16 GiB
  EXPECT_TRUE(Resolve(rows).ok());

  WorkloadRequest gemm = Matmul("M=65536,N=65536,K=65536");  // 24 GiB, 2^49 flops
  gemm.target = "snc3";
  absl::StatusOr<ResolvedWorkload> slow = Resolve(gemm);
  EXPECT_THAT(slow.status().message(), HasSubstr("at least 1.68e+07 TensorE instructions"));
  EXPECT_TRUE(Resolve(Matmul("M=16384,N=16384,K=16384")).ok());
  // The systolic target has no memory model, but the instruction budget still holds.
  gemm.target = "systolic-128x128-ws";
  EXPECT_THAT(Resolve(gemm).status().message(), HasSubstr("TensorE instructions"));
}

TEST(ResolveLimitsTest, LongOrHostileNamesAreNamedByTheirFieldAndNeverEchoedWhole) {
  const std::string long_name(10'000, 'k');
  for (const WorkloadRequest& request :
       {Request(long_name), Request("matmul", "M=1,N=1,K=1", "", long_name),
        Request("matmul", "M=1,N=1,K=1", long_name)}) {
    absl::Status status = Resolve(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("10000 bytes; names are at most 64"));
    EXPECT_LT(status.message().size(), 200u) << status.message();
  }
  const std::string forged = "mat\nmul\x1b[31m ERROR forged";
  const std::string message(Resolve(Request(forged)).status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_THAT(message, HasSubstr("unknown kernel 'mat\\x0amul\\x1b[31m ERROR forged'"));

  v1::Workload wire = Resolve(Matmul("M=128,N=128,K=128"))->ToProto();
  for (int i = 0; i < 20; ++i) wire.add_dims()->set_name(StrCat("d", i));
  EXPECT_THAT(Resolve(wire).status().message(), HasSubstr("dims has 23 entries; at most 16"));
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

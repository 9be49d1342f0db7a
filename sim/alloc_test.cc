// A simulation allocates nothing once its thread has run one of the same size (sim/simulate.h):
// counts global operator new calls, so it is a binary of its own.

#include "gtest/gtest.h"
#include "sim/simulate.h"
#include "tests/testing/count_allocations.h"

namespace tessel::sim {
namespace {

// Two cores: a loop-structured one (nested repeats, anchored dependencies, DMA on three queues,
// every compute engine) and a flat copy of it.
Program TestProgram() {
  Program p;
  p.cores.resize(1);
  CoreProgram& c = p.cores[0];
  for (int i = 0; i < 4; ++i) c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
  c.BeginRepeat(20);
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 2048, 1), {});
  c.BeginRepeat(30);
  const int32_t mm[] = {-2, -1, 1};
  c.AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), mm);
  const int32_t one[] = {1};
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kScalar, 512, 128, Mem::kPsum), one);
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kGpSimd, 256, 128), one);
  c.EndRepeat();
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128), one);
  c.AddCompact(MakeDma(Op::kDmaStore, 128, 1024, 2), one);
  c.EndRepeat();
  absl::StatusOr<Program> flat = Flatten(p);
  EXPECT_TRUE(flat.ok()) << flat.status();
  p.cores.push_back(flat->cores[0]);
  return p;
}

TEST(AllocationTest, ARepeatedSimulationAllocatesNothing) {
  const absl::StatusOr<Target> target = LoadTarget("snc3");
  ASSERT_TRUE(target.ok());
  const Program program = TestProgram();
  ASSERT_TRUE(ValidateProgram(*target, program).ok()) << ValidateProgram(*target, program);
  for (bool exact : {false, true}) {
    const SimOptions options{.exact = exact};
    absl::StatusOr<SimResult> first = Simulate(*target, program, options);  // warms the scratch
    ASSERT_TRUE(first.ok()) << first.status();
    const long before = testing::g_allocations.load();
    absl::StatusOr<SimResult> second = Simulate(*target, program, options);
    const long allocations = testing::g_allocations.load() - before;
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->ticks, first->ticks);
    EXPECT_EQ(allocations, 0) << (exact ? "exact" : "fast path");
  }
}

}  // namespace
}  // namespace tessel::sim

#include "sim/simulate.h"

#include <fstream>
#include <random>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessel::sim {
namespace {

using ::testing::HasSubstr;

Target Load(const std::string& name) {
  absl::StatusOr<Target> t = LoadTarget(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

Program OneCore() {
  Program p;
  p.cores.resize(1);
  return p;
}

TEST(InstructionCyclesTest, MatmulFollowsTheCostFormula) {
  Target t = Load("snc2");
  EXPECT_EQ(InstructionCycles(t, MakeMatmul(DType::kBf16, 128, 128, 512)), 512);
  EXPECT_EQ(InstructionCycles(t, MakeMatmul(DType::kBf16, 128, 128, 32)), 64);
  EXPECT_EQ(InstructionCycles(t, MakeMatmul(DType::kBf16, 128, 16, 8)), 16);
  EXPECT_EQ(InstructionCycles(t, MakeMatmul(DType::kBf16, 64, 32, 100)), 100);
  EXPECT_EQ(InstructionCycles(t, MakeMatmul(DType::kFp32, 128, 128, 512)), 4 * 512);
  // snc3 doubles fp8 only in double-row tiles (K=256 in the time of K=128; NKI perf_mode).
  Target t3 = Load("snc3");
  EXPECT_EQ(InstructionCycles(t3, MakeMatmul(DType::kFp8, 256, 128, 512)), 512);
  EXPECT_EQ(InstructionCycles(t3, MakeMatmul(DType::kFp8, 128, 128, 512)), 512);
}

// NeuronCore-v3's VectorE performance mode (Trainium2 architecture guide for NKI, "Vector Engine
// Performance Mode"): 4x for bf16 tensor_copy / tensor_scalar SBUF to SBUF with contiguous
// elements, 2x when strided or with one side in PSUM and for bf16 tensor_tensor from SBUF; none
// with an fp32 side, on other engines, or on NeuronCore-v2.
TEST(InstructionCyclesTest, Snc3VectorPerformanceModeFollowsTheGuide) {
  const Target t2 = Load("snc2"), t3 = Load("snc3");
  const int64_t fixed = t3.fixed_access_cycles;
  auto op = [](Op o, DType in, DType out, Mem in0 = Mem::kSbuf, Mem dst = Mem::kSbuf) {
    Instruction i = MakeEngineOp(o, EngineKind::kVector, 4096);
    i.dtype = in;
    i.out_dtype = out;
    i.in0 = in0;
    i.out = dst;
    return i;
  };
  const Instruction copy = op(Op::kTensorCopy, DType::kBf16, DType::kBf16);
  EXPECT_EQ(InstructionCycles(t3, copy), fixed + 4096 / 4);
  EXPECT_EQ(InstructionCycles(t2, copy), t2.fixed_access_cycles + 4096) << "not on snc2";
  EXPECT_EQ(InstructionCycles(t3, op(Op::kTensorScalar, DType::kFp16, DType::kBf16)),
            fixed + 4096 / 4);
  Instruction strided = copy;
  strided.strided = true;
  EXPECT_EQ(InstructionCycles(t3, strided), fixed + 2 * 4096 / 2) << "2x, then the stride cost";
  EXPECT_EQ(InstructionCycles(t3, op(Op::kTensorCopy, DType::kBf16, DType::kBf16, Mem::kPsum)),
            fixed + 4096 / 2);
  EXPECT_EQ(InstructionCycles(t3, op(Op::kTensorCopy, DType::kBf16, DType::kFp32)), fixed + 4096)
      << "an fp32 output";
  EXPECT_EQ(InstructionCycles(t3, op(Op::kTensorCopy, DType::kFp32, DType::kBf16)), fixed + 4096);
  EXPECT_EQ(InstructionCycles(t3, op(Op::kTensorTensor, DType::kBf16, DType::kBf16)),
            fixed + 4096 / 2);
  EXPECT_EQ(InstructionCycles(t3, op(Op::kActivation, DType::kBf16, DType::kBf16)), fixed + 4096)
      << "not a listed instruction";
  Instruction on_gpsimd = copy;
  on_gpsimd.engine = EngineKind::kGpSimd;
  EXPECT_EQ(InstructionCycles(t3, on_gpsimd), fixed + 4096) << "VectorE only";
}

TEST(InstructionCyclesTest, EngineOpsFollowTheTablePlusFixedOverhead) {
  Target t = Load("snc2");
  const int64_t fixed = t.fixed_access_cycles;
  auto cycles = [&](Op op, EngineKind e, int n) {
    return InstructionCycles(t, MakeEngineOp(op, e, n));
  };
  EXPECT_EQ(cycles(Op::kActivation, EngineKind::kScalar, 10), fixed + 64);
  EXPECT_EQ(cycles(Op::kActivation, EngineKind::kScalar, 1000), fixed + 1000);
  EXPECT_EQ(cycles(Op::kTensorScalar, EngineKind::kVector, 300), fixed + 300);
  EXPECT_EQ(cycles(Op::kTensorCopy, EngineKind::kGpSimd, 512), fixed + 512);
  EXPECT_EQ(cycles(Op::kReciprocal, EngineKind::kVector, 100), fixed + 800);
  EXPECT_EQ(cycles(Op::kReciprocal, EngineKind::kVector, 4), fixed + 64);
  EXPECT_EQ(cycles(Op::kBnStats, EngineKind::kVector, 512), fixed + 512);
  EXPECT_EQ(cycles(Op::kBnAggr, EngineKind::kVector, 300), fixed + 1300);
  EXPECT_EQ(cycles(Op::kMemset, EngineKind::kVector, 2), fixed + 64);
  EXPECT_EQ(cycles(Op::kIota, EngineKind::kGpSimd, 10), fixed + 150 + 10);

  Instruction reduce = MakeEngineOp(Op::kTensorReduce, EngineKind::kVector, 1000);
  reduce.dtype = DType::kFp32;
  EXPECT_EQ(InstructionCycles(t, reduce), fixed + 1000);
  reduce.dtype = DType::kBf16;
  reduce.add_op = true;
  EXPECT_EQ(InstructionCycles(t, reduce), fixed + 500);

  Instruction tt = MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, 400);
  tt.dtype = DType::kFp32;
  EXPECT_EQ(InstructionCycles(t, tt), fixed + 800);
  tt.in1 = Mem::kPsum;
  EXPECT_EQ(InstructionCycles(t, tt), fixed + 400);
  tt.in1 = Mem::kSbuf;
  tt.dtype = DType::kBf16;
  EXPECT_EQ(InstructionCycles(t, tt), fixed + 400);
  tt.free = 20;
  EXPECT_EQ(InstructionCycles(t, tt), fixed + 64);

  Instruction strided = MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512);
  strided.strided = true;
  EXPECT_EQ(InstructionCycles(t, strided), fixed + 2 * 512);

  Instruction transpose = MakeEngineOp(Op::kTranspose, EngineKind::kTensor, 32, 128);
  EXPECT_EQ(InstructionCycles(t, transpose), 128);
  transpose.partitions = 16;
  EXPECT_EQ(InstructionCycles(t, transpose), 32);
}

TEST(DmaTest, OneEngine32KiBTransferMatchesTheCalibration) {
  Target t = Load("snc2");
  Program p = OneCore();
  p.cores[0].Add(MakeDma(Op::kDmaLoad, 8, 4096, 0), {});
  absl::StatusOr<SimResult> r = Simulate(t, p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->time_ns, 1416, 1416 * 0.05);
  EXPECT_EQ(r->hbm_bytes, 32 * 1024);
  EXPECT_EQ(r->engines[int(EngineKind::kDma)].instructions, 1);
}

TEST(DmaTest, SmallDescriptorsAreInefficient) {
  Target t = Load("snc2");
  Instruction big = MakeDma(Op::kDmaLoad, 8, 4096, 0);
  Instruction tiny = big;
  tiny.chunk_bytes = 128;  // 32 descriptors of 128 B per partition
  EXPECT_GT(DmaPieceNs(t, tiny, 8), 3 * DmaPieceNs(t, big, 8));
}

TEST(DmaTest, FullPartitionTransfersUseAllEnginesAndHbmCapsBandwidth) {
  Target t = Load("snc2");
  Program p = OneCore();
  // 64 transfers of 128 partitions x 8 KiB = 64 MiB total.
  for (int i = 0; i < 64; ++i) p.cores[0].Add(MakeDma(Op::kDmaLoad, 128, 8192, i % 4), {});
  absl::StatusOr<SimResult> r = Simulate(t, p);
  ASSERT_TRUE(r.ok()) << r.status();
  const double bytes = 64.0 * 128 * 8192;
  // Never faster than the core's HBM share, and within 10% of it when streaming.
  EXPECT_GE(r->time_ns, bytes / 410.0);
  EXPECT_LE(r->time_ns, 1.1 * bytes / 410.0);
  EXPECT_EQ(r->bound, "dma");
  EXPECT_NEAR(r->issued_roofline_ns, bytes / 410.0, 1e-6);
  EXPECT_EQ(r->roofline_ns, r->issued_roofline_ns) << "a bare program is its own problem";
  EXPECT_EQ(r->busiest[0].resource, EngineKind::kDma);
  EXPECT_GE(r->busiest[0].busy_frac, kBoundBusyFraction);
}

TEST(BoundTest, NoResourceBusyEnoughToExplainTheTimeIsLatencyWithTheBusiestListed) {
  Target t = Load("snc2");
  // A chain: each copy waits for the one before on another engine, so no engine is busy more
  // than about half of the run.
  Program p = OneCore();
  CoreProgram& c = p.cores[0];
  for (int i = 0; i < 40; ++i) {
    const EngineKind engine = i % 2 ? EngineKind::kVector : EngineKind::kScalar;
    if (i == 0) {
      c.Add(MakeEngineOp(Op::kTensorCopy, engine, 512, 128), {});
    } else {
      c.Add(MakeEngineOp(Op::kTensorCopy, engine, 512, 128), {i - 1});
    }
  }
  absl::StatusOr<SimResult> r = Simulate(t, p);
  ASSERT_TRUE(r.ok()) << r.status();
  const double vector = r->engines[int(EngineKind::kVector)].busy_frac;
  const double scalar = r->engines[int(EngineKind::kScalar)].busy_frac;
  ASSERT_LT(std::max(vector, scalar), kBoundBusyFraction);
  EXPECT_EQ(r->bound, "latency");
  EXPECT_GT(r->busiest[0].busy_frac, 0.2);
  EXPECT_EQ(r->busiest[0].busy_frac, std::max(vector, scalar));
  EXPECT_GE(r->busiest[0].busy_frac, r->busiest[1].busy_frac);
  EXPECT_EQ(r->busiest[1].busy_frac, std::min(vector, scalar));
  EXPECT_EQ(r->busiest[2].busy_frac, 0) << "nothing else ran";
}

TEST(DmaTest, ShardedCoresShareTheChipHbm) {
  Target t = Load("snc2");
  t.hbm_gbps_per_chip = t.hbm_gbps_per_core;  // make the chip the bottleneck
  Program one = OneCore();
  for (int i = 0; i < 32; ++i) one.cores[0].Add(MakeDma(Op::kDmaLoad, 128, 8192, 0), {});
  Program two = one;
  two.cores.push_back(one.cores[0]);
  absl::StatusOr<SimResult> r1 = Simulate(t, one);
  absl::StatusOr<SimResult> r2 = Simulate(t, two);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_NEAR(r2->time_ns / r1->time_ns, 2.0, 0.1);
}

// Cores with the same program get one simulated schedule (they have equal shares of the DMA
// engines and of the chip's HBM) and the previous core's counted load; the result equals
// simulating and counting each core on its own.
// One core of 16 chains load -> matmul -> PSUM eviction -> store, the loads on two queues.
Program SixteenTileChains() {
  Program p = OneCore();
  CoreProgram& c = p.cores[0];
  for (int i = 0; i < 16; ++i) {
    const int32_t load = c.Add(MakeDma(Op::kDmaLoad, 128, 8192, i % 2), {});
    const int32_t mm = c.Add(MakeMatmul(DType::kBf16, 128, 128, 512), {load});
    const int32_t copy =
        c.Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128, Mem::kPsum), {mm});
    c.Add(MakeDma(Op::kDmaStore, 128, 1024, 2), {copy});
  }
  return p;
}

TEST(DmaTest, IdenticalCoresMatchSeparatelySimulatedOnes) {
  Target t = Load("snc3");
  Program same = SixteenTileChains();
  const CoreProgram core = same.cores[0];
  same.cores.push_back(core);
  same.cores.push_back(core);
  // The same schedule written differently (an extra empty allocation on the middle core), so
  // neither it nor the core after it is a copy of the core before.
  Program distinct = same;
  distinct.cores[1].allocations.push_back({"unused", Mem::kSbuf, 0, 128, 0, 1});
  absl::StatusOr<SimResult> a = Simulate(t, same);
  absl::StatusOr<SimResult> b = Simulate(t, distinct);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ticks, b->ticks);
  EXPECT_EQ(a->time_ns, b->time_ns);
  EXPECT_EQ(a->hbm_bytes, b->hbm_bytes);
  EXPECT_EQ(a->hbm_bytes, 3 * 16 * 128 * (8192 + 1024));
  EXPECT_EQ(a->issued_roofline_ns, b->issued_roofline_ns);
  EXPECT_EQ(a->bound, b->bound);
  for (int e = 0; e < kNumEngines; ++e) {
    EXPECT_EQ(a->engines[e].busy_ticks, b->engines[e].busy_ticks) << "engine " << e;
    EXPECT_EQ(a->engines[e].busy_frac, b->engines[e].busy_frac) << "engine " << e;
    EXPECT_EQ(a->engines[e].instructions, b->engines[e].instructions) << "engine " << e;
  }
  EXPECT_EQ(a->engines[int(EngineKind::kTensor)].instructions, 3 * 16);
  EXPECT_EQ(a->engines[int(EngineKind::kDma)].instructions, 3 * 32);
}

// A core that repeats the previous one (Program::RepeatPrevious, no lists of its own) simulates,
// traces and flattens as a copy of it does.
TEST(DmaTest, RepeatedCoresMatchCopiedOnes) {
  Target t = Load("snc3");
  Program copies = SixteenTileChains();
  Program repeats = copies;
  const CoreProgram core = copies.cores[0];
  copies.cores.push_back(core);
  copies.cores.push_back(core);
  repeats.RepeatPrevious();
  repeats.RepeatPrevious();
  ASSERT_TRUE(repeats.cores[2].repeats_previous && repeats.cores[2].instructions.empty());
  EXPECT_EQ(&repeats.Source(2), &repeats.cores[0]);
  std::vector<TraceEvent> copy_events, repeat_events;
  absl::StatusOr<SimResult> a = Simulate(t, copies, {}, &copy_events);
  absl::StatusOr<SimResult> b = Simulate(t, repeats, {}, &repeat_events);
  absl::StatusOr<SimResult> untraced = Simulate(t, repeats);
  ASSERT_TRUE(a.ok() && b.ok() && untraced.ok());
  for (const SimResult* r : {&*b, &*untraced}) {
    EXPECT_EQ(a->ticks, r->ticks);
    EXPECT_EQ(a->hbm_bytes, r->hbm_bytes);
    EXPECT_EQ(a->sbuf_peak_bytes, r->sbuf_peak_bytes);
    for (int e = 0; e < kNumEngines; ++e) {
      EXPECT_EQ(a->engines[e].busy_ticks, r->engines[e].busy_ticks) << "engine " << e;
      EXPECT_EQ(a->engines[e].instructions, r->engines[e].instructions) << "engine " << e;
    }
  }
  EXPECT_EQ(b->engines[int(EngineKind::kTensor)].instructions, 3 * 16);
  ASSERT_EQ(copy_events.size(), repeat_events.size());
  for (size_t i = 0; i < copy_events.size(); ++i) {
    EXPECT_EQ(copy_events[i].core, repeat_events[i].core);
    EXPECT_EQ(copy_events[i].index, repeat_events[i].index);
    EXPECT_EQ(copy_events[i].end_tick, repeat_events[i].end_tick);
  }
  absl::StatusOr<Program> flat_copies = Flatten(copies);
  absl::StatusOr<Program> flat_repeats = Flatten(repeats);
  ASSERT_TRUE(flat_copies.ok() && flat_repeats.ok());
  ASSERT_EQ(flat_repeats->cores.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(flat_repeats->cores[k] == flat_copies->cores[k]);
}

TEST(SimulateTest, SixteenBackToBackMatmulsAreTensorBound) {
  Target t = Load("snc2");
  Program p = OneCore();
  for (int i = 0; i < 16; ++i) p.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {});
  absl::StatusOr<SimResult> r = Simulate(t, p);
  ASSERT_TRUE(r.ok()) << r.status();
  const double expected = 16 * 512 + FirstResultLatencyCycles(t);
  EXPECT_EQ(FirstResultLatencyCycles(t), 382);
  EXPECT_NEAR(double(r->tensor_cycles), expected, 0.02 * expected);
  EXPECT_EQ(r->bound, "tensor");
  EXPECT_EQ(r->engines[int(EngineKind::kTensor)].instructions, 16);
  EXPECT_NEAR(r->time_ns, expected / 2.8, 0.02 * expected / 2.8);
}

// Operands loaded once before a loop that reads them in every iteration: the loop's reads are
// anchored (a fixed instruction before the repeat's entry, not a fixed distance back).
TEST(SimulateTest, AnchoredDependenciesNameTheSameInstructionInEveryIteration) {
  Target t = Load("snc2");
  Program compact = OneCore();
  CoreProgram& c = compact.cores[0];
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});  // flat 0
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 1), {});  // flat 1
  c.BeginRepeat(40);
  const int32_t mm_deps[] = {-2, -1, 1};  // both loads, and the instruction just before
  c.AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), mm_deps);
  const int32_t ev_deps[] = {1};
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128, Mem::kPsum), ev_deps);
  c.EndRepeat();
  ASSERT_TRUE(ValidateProgram(t, compact).ok());

  absl::StatusOr<Program> flat = Flatten(compact);
  ASSERT_TRUE(flat.ok()) << flat.status();
  const CoreProgram& f = flat->cores[0];
  ASSERT_EQ(f.instructions.size(), 82u);
  for (int32_t i = 2; i < 82; i += 2) {
    std::vector<int32_t> deps(f.DepsOf(i).begin(), f.DepsOf(i).end());
    EXPECT_EQ(deps, (std::vector<int32_t>{0, 1, i - 1})) << "matmul at " << i;
  }
  absl::StatusOr<SimResult> fast = Simulate(t, compact);
  absl::StatusOr<SimResult> exact = Simulate(t, compact, {.exact = true});
  absl::StatusOr<SimResult> reference = Simulate(t, *flat);
  ASSERT_TRUE(fast.ok() && exact.ok() && reference.ok());
  EXPECT_EQ(fast->ticks, reference->ticks);
  EXPECT_EQ(exact->ticks, reference->ticks);
  EXPECT_EQ(fast->engines[int(EngineKind::kTensor)].busy_ticks,
            reference->engines[int(EngineKind::kTensor)].busy_ticks);

  // Outside any repeat an anchor has no entry to count from.
  Program bad = OneCore();
  bad.cores[0].AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
  const int32_t anchor[] = {-1};
  bad.cores[0].AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), anchor);
  absl::Status status = ValidateProgram(t, bad);
  EXPECT_THAT(std::string(status.message()), HasSubstr("anchored dependency outside any repeat"));
}

// Checks that the fast path, the full simulation and the flattened program agree exactly.
void ExpectFastExactAndFlatAgree(const Target& t, const Program& compact) {
  ASSERT_TRUE(ValidateProgram(t, compact).ok()) << ValidateProgram(t, compact);
  absl::StatusOr<Program> flat = Flatten(compact);
  ASSERT_TRUE(flat.ok()) << flat.status();
  absl::StatusOr<SimResult> fast = Simulate(t, compact);
  absl::StatusOr<SimResult> exact = Simulate(t, compact, {.exact = true});
  absl::StatusOr<SimResult> reference = Simulate(t, *flat);
  ASSERT_TRUE(fast.ok() && exact.ok() && reference.ok());
  EXPECT_EQ(fast->ticks, reference->ticks);
  EXPECT_EQ(exact->ticks, reference->ticks);
  for (int e = 0; e < kNumEngines; ++e) {
    EXPECT_EQ(fast->engines[e].busy_ticks, reference->engines[e].busy_ticks) << "engine " << e;
  }
}

// Partial sums written by one loop and read by a later loop with a different period: iteration j
// of the second loop reads the first loop's j-th result through a strided dependency (the same
// instruction of the first loop, one period of it further in each iteration).
TEST(SimulateTest, StridedDependenciesReadOneEarlierResultPerIteration) {
  Target t = Load("snc2");
  for (const int first_free : {512, 8192}) {  // partial sums early, or late enough to bind
    Program compact = OneCore();
    CoreProgram& c = compact.cores[0];
    c.BeginRepeat(40);  // flat 0..79: a load and a partial sum (at 2j + 1) per iteration
    c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
    const int32_t one[] = {1};
    c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, first_free, 128), one);
    c.EndRepeat();
    c.BeginRepeat(40);  // entered at flat 80, three instructions per iteration
    c.AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), {});
    const int32_t add_deps[] = {1, -79};  // the matmul, and flat 80 - 79 + 2j = 2j + 1
    const AnchorForm add_forms[] = {{}, {.stride = 2}};
    Instruction add = MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, 512, 128, Mem::kPsum);
    c.AddCompact(add, add_deps, add_forms);
    c.AddCompact(MakeDma(Op::kDmaStore, 128, 1024, 2), one);
    c.EndRepeat();
    ASSERT_EQ(c.StrideOf(2), 2);  // deps: the copy's, then the add's two

    absl::StatusOr<Program> flat = Flatten(compact);
    ASSERT_TRUE(flat.ok()) << flat.status();
    for (int32_t j = 0; j < 40; ++j) {
      const int32_t at = 80 + 3 * j + 1;
      std::vector<int32_t> deps(flat->cores[0].DepsOf(at).begin(), flat->cores[0].DepsOf(at).end());
      EXPECT_EQ(deps, (std::vector<int32_t>{at - 1, 2 * j + 1})) << "add of iteration " << j;
    }
    ExpectFastExactAndFlatAgree(t, compact);
  }

  // A stride that would reach the repeat's entry in its last iteration is rejected.
  Program bad = OneCore();
  CoreProgram& b = bad.cores[0];
  b.BeginRepeat(40);
  b.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
  b.EndRepeat();
  b.BeginRepeat(40);
  const int32_t deps[] = {-39};
  const AnchorForm forms[] = {{.stride = 1}};  // iteration 39 would read 40 - 39 + 39: the entry
  b.AddCompact(MakeDma(Op::kDmaStore, 128, 1024, 2), deps, forms);
  b.EndRepeat();
  absl::Status status = ValidateProgram(t, bad);
  EXPECT_THAT(std::string(status.message()), HasSubstr("strided dependency"));
}

// Operands loaded before an outer loop and read in a loop nested in it: the nested reads are
// anchored to the outer repeat's entry (AnchorForm::up = 1), the same instruction in every
// iteration of both.
TEST(SimulateTest, AnchorsCanCountFromAnEnclosingRepeat) {
  Target t = Load("snc2");
  Program compact = OneCore();
  CoreProgram& c = compact.cores[0];
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});  // flat 0: read by every matmul
  c.BeginRepeat(12);  // entered at flat 1, 1 + 2 * 8 per iteration
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 2048, 1), {});
  c.BeginRepeat(8);
  const int32_t mm_deps[] = {-1, 1};  // flat 0 (from the outer entry), and the instruction before
  const AnchorForm mm_forms[] = {{.up = 1}, {}};
  c.AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), mm_deps, mm_forms);
  const int32_t one[] = {1};
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128, Mem::kPsum), one);
  c.EndRepeat();
  c.EndRepeat();

  absl::StatusOr<Program> flat = Flatten(compact);
  ASSERT_TRUE(flat.ok()) << flat.status();
  const CoreProgram& f = flat->cores[0];
  ASSERT_EQ(f.instructions.size(), 1u + 12 * 17);
  for (int32_t i = 1; i < int32_t(f.instructions.size()); ++i) {
    if (f.instructions[i].op != Op::kMatmul) continue;
    EXPECT_EQ(f.DepsOf(i)[0], 0) << "matmul at " << i;
  }
  ExpectFastExactAndFlatAgree(t, compact);

  // The engine's previous instruction is the pinned result only in the outer repeat's first
  // iteration (a same-engine penalty then, none later): the outer repeat must not extrapolate
  // from its entry. Likewise through an intermediate repeat, anchored two levels out.
  for (const int inner : {1, 2, 3}) {
    Program p = OneCore();
    CoreProgram& q = p.cores[0];
    q.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128), {});  // flat 0
    q.BeginRepeat(50);
    q.BeginRepeat(inner);
    const int32_t read_first[] = {-1};
    const AnchorForm one_out[] = {{.up = 1}};
    q.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 64, 128), read_first, one_out);
    q.EndRepeat();
    q.EndRepeat();
    ExpectFastExactAndFlatAgree(t, p);
  }
  {
    Program p = OneCore();
    CoreProgram& q = p.cores[0];
    q.AddCompact(MakeDma(Op::kDmaLoad, 128, 65536, 0), {});  // flat 0: a slow load
    q.BeginRepeat(3);
    q.BeginRepeat(40);
    q.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kScalar, 256, 128), {});
    q.BeginRepeat(2);
    const int32_t read_first[] = {-1};
    const AnchorForm two_out[] = {{.up = 2}};
    q.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 64, 128), read_first, two_out);
    q.EndRepeat();
    q.EndRepeat();
    q.EndRepeat();
    ExpectFastExactAndFlatAgree(t, p);
  }

  // Anchored to a repeat that does not enclose it: rejected.
  Program bad = OneCore();
  bad.cores[0].AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
  bad.cores[0].BeginRepeat(4);
  bad.cores[0].AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), mm_deps, mm_forms);
  bad.cores[0].EndRepeat();
  EXPECT_THAT(std::string(ValidateProgram(t, bad).message()),
              HasSubstr("levels out, but it is inside 1 repeat"));
}

// Appends a repeat of `count` long Scalar copies (an otherwise idle engine, so they end last and
// the program's time shows what they waited for), each reading the instruction `distance` back.
void AddLongScalarReaders(CoreProgram& c, int64_t count, int32_t distance) {
  c.BeginRepeat(count);
  const int32_t back[] = {distance};
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kScalar, 65536, 128), back);
  c.EndRepeat();
}

// The fast path keeps only results that something reads again (each template's longest read
// distance, resolved through the loop structure). A result in an extrapolated range that is read
// later, from a repeat's first iterations reaching back before it, must still be there: the
// readers here are long Scalar ops (an otherwise idle engine) that end last, so the time shows
// the result they waited for.
TEST(SimulateTest, ResultsReadAfterAnExtrapolatedRepeatAreKept) {
  Target t = Load("snc2");
  Program compact = OneCore();
  CoreProgram& c = compact.cores[0];
  for (int i = 0; i < 6; ++i) c.AddCompact(MakeDma(Op::kDmaLoad, 128, 4096, 0), {});
  c.BeginRepeat(6);  // 152 instructions per iteration
  c.BeginRepeat(50);
  const int32_t two_back[] = {5};  // two buffers: the matmul that read this one last
  c.AddCompact(MakeDma(Op::kDmaLoad, 128, 2048, 1), two_back);
  const int32_t one[] = {1};
  c.AddCompact(MakeMatmul(DType::kBf16, 128, 128, 512), one);
  const int32_t evict_deps[] = {1, 3};  // the matmul and the previous evict (or what precedes)
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128, Mem::kPsum),
               evict_deps);
  c.EndRepeat();
  c.AddCompact(MakeDma(Op::kDmaStore, 128, 1024, 2), one);
  const int32_t first_evict[] = {149};  // this outer iteration's first evict
  c.AddCompact(MakeDma(Op::kDmaStore, 128, 1024, 2), first_evict);
  c.EndRepeat();
  // The first two iterations reach back before the repeat, to the stores of the last outer
  // iteration (extrapolated), which nothing else reads that far back.
  AddLongScalarReaders(c, 10, 2);
  ExpectFastExactAndFlatAgree(t, compact);
}

// A read thousands of one-instruction iterations back has too many places to resolve: the fast
// path then treats every result as read up to the longest distance, and still agrees.
TEST(SimulateTest, UnresolvableLivenessFallsBackToTheWholeWindow) {
  Target t = Load("snc2");
  Program compact = OneCore();
  CoreProgram& c = compact.cores[0];
  c.BeginRepeat(5000);
  c.AddCompact(MakeDma(Op::kDmaLoad, 16, 256, 0), {});
  c.EndRepeat();
  c.BeginRepeat(8000);
  const int32_t back[] = {5000};  // resolving iterations 0-4999 exhausts the budget
  c.AddCompact(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 64, 16), back);
  c.EndRepeat();
  // Reads further back than anything above: left unresolved when the budget ran out.
  AddLongScalarReaders(c, 20, 6000);
  ExpectFastExactAndFlatAgree(t, compact);
}

TEST(SimulateTest, LatencyIsExposedOnlyToDependants) {
  Target t = Load("snc2");
  Program independent = OneCore();
  independent.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {});
  independent.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kScalar, 512, 128, Mem::kSbuf),
                           {});
  Program dependent = OneCore();
  int32_t mm = dependent.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {});
  dependent.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kScalar, 512, 128, Mem::kPsum),
                         {mm});
  absl::StatusOr<SimResult> a = Simulate(t, independent);
  absl::StatusOr<SimResult> b = Simulate(t, dependent);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t copy_ticks = (60 + 512) * 4;
  // The first stationary load cannot hide behind an earlier matmul.
  const int64_t load = StationaryLoadCycles(t, MakeMatmul(DType::kBf16, 128, 128, 512));
  EXPECT_EQ(load, 32);
  // Independent: the copy runs alongside; the program ends with the matmul's result.
  EXPECT_EQ(a->ticks, std::max<int64_t>((load + 512 + 382) * 2, copy_ticks));
  // Dependent: the copy starts after matmul + latency.
  EXPECT_EQ(b->ticks, (load + 512 + 382) * 2 + copy_ticks);
}

TEST(SimulateTest, DependingOnThePreviousInstructionOfTheSameEngineCostsExtra) {
  Target t = Load("snc2");
  Program chained = OneCore();
  int32_t a = chained.cores[0].Add(MakeEngineOp(Op::kMemset, EngineKind::kVector, 512), {});
  chained.cores[0].Add(MakeEngineOp(Op::kTensorScalar, EngineKind::kVector, 512), {a});
  Program free = OneCore();
  free.cores[0].Add(MakeEngineOp(Op::kMemset, EngineKind::kVector, 512), {});
  free.cores[0].Add(MakeEngineOp(Op::kTensorScalar, EngineKind::kVector, 512), {});
  absl::StatusOr<SimResult> rc = Simulate(t, chained);
  absl::StatusOr<SimResult> rf = Simulate(t, free);
  ASSERT_TRUE(rc.ok() && rf.ok());
  EXPECT_EQ(rf->ticks, 2 * (60 + 512) * 5);
  EXPECT_EQ(rc->ticks - rf->ticks, 100 * 5);
}

TEST(SimulateTest, Snc2PortConflictsSerializeVectorAndGpSimd) {
  auto run = [](const std::string& name) {
    Target t = Load(name);
    Program p = OneCore();
    p.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 1024), {});
    p.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kGpSimd, 1024), {});
    absl::StatusOr<SimResult> r = Simulate(t, p);
    EXPECT_TRUE(r.ok()) << r.status();
    return r->time_ns;
  };
  const double vector_ns = (60 + 1024) / 1.12, gpsimd_ns = (60 + 1024) / 1.4;
  EXPECT_NEAR(run("snc2"), vector_ns + gpsimd_ns, 1.0);
  EXPECT_NEAR(run("snc3"), (60 + 1024) / 0.96, 1.0);  // parallel on snc3: the slower one
}

TEST(SimulateTest, NoiseIsSeededAndOffByDefault) {
  Target t = Load("snc2");
  Program p = OneCore();
  p.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {});
  SimOptions noisy{.noise_sigma = 0.05, .seed = 7};
  double base = Simulate(t, p)->time_ns;
  EXPECT_EQ(Simulate(t, p)->time_ns, base);
  double a = Simulate(t, p, noisy)->time_ns;
  double b = Simulate(t, p, noisy)->time_ns;
  noisy.seed = 8;
  double c = Simulate(t, p, noisy)->time_ns;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, base);
}

TEST(SystolicTest, ClosedFormMatchesTheScaleSimTable) {
  struct Row {
    int m, n, k;
    int64_t ws, os, is;
  };
  const Row rows[] = {{512, 128, 128, 893, 1527, 2039},
                      {512, 512, 512, 14303, 12255, 14303},
                      {1024, 1024, 1024, 89983, 81791, 89983}};
  for (const Row& row : rows) {
    for (auto [df, want] : {std::pair{"ws", row.ws}, {"os", row.os}, {"is", row.is}}) {
      Target t = Load(std::string("systolic-128x128-") + df);
      Program p = OneCore();
      p.cores[0].Add(MakeMatmul(DType::kBf16, row.k, row.m, row.n), {});
      absl::StatusOr<SimResult> r = Simulate(t, p);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->tensor_cycles, want) << row.m << "x" << row.n << "x" << row.k << " " << df;
    }
  }
}

TEST(SystolicTest, RandomSizesFollowTheClosedForm) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> dim(1, 3000), arr(4, 256);
  for (int i = 0; i < 60; ++i) {
    int r = arr(rng), c = arr(rng), m = dim(rng), n = dim(rng), k = dim(rng);
    for (const char* df : {"ws", "os", "is"}) {
      Target t = Load("systolic-" + std::to_string(r) + "x" + std::to_string(c) + "-" + df);
      Program p = OneCore();
      p.cores[0].Add(MakeMatmul(DType::kBf16, k, m, n), {});
      absl::StatusOr<SimResult> res = Simulate(t, p);
      ASSERT_TRUE(res.ok()) << res.status();
      int64_t rows_dim = df[0] == 'o' ? m : k;
      int64_t cols_dim = df[0] == 'w' ? n : df[0] == 'o' ? n : m;
      int64_t tt = df[0] == 'w' ? m : df[0] == 'o' ? k : n;
      int64_t folds = ((rows_dim + r - 1) / r) * ((cols_dim + c - 1) / c);
      int64_t fill = df[0] == 'o' ? r : 2 * r;
      EXPECT_EQ(res->tensor_cycles, folds * (fill + c + tt - 2) - 1);
    }
  }
}

TEST(ValidateTest, InvalidProgramsNameTheViolatedLimit) {
  Target t = Load("snc2");
  auto expect_error = [&](const Program& p, const std::string& fragment) {
    absl::StatusOr<SimResult> r = Simulate(t, p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << fragment;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(fragment));
  };
  {
    Program p = OneCore();
    p.cores[0].Add(MakeMatmul(DType::kBf16, 256, 128, 512), {});
    expect_error(p, "K=256 exceeds the TensorE limit K <= 128");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeMatmul(DType::kBf16, 128, 256, 512), {});
    expect_error(p, "M=256 exceeds the stationary free size limit M <= 128");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 1024), {});
    expect_error(p, "N=1024 exceeds the moving free size limit N <= 512");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeMatmul(DType::kFp8, 256, 128, 512), {});
    expect_error(p, "K=256 exceeds the TensorE limit K <= 128");  // no double row on snc2
  }
  {
    Target no_fp8 = t;
    no_fp8.matmul_fp8_factor = 0;
    Program p = OneCore();
    p.cores[0].Add(MakeMatmul(DType::kFp8, 128, 128, 512), {});
    absl::StatusOr<SimResult> r = Simulate(no_fp8, p);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("does not support fp8"));
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeDma(Op::kDmaLoad, 64, 1024, 0, /*start_partition=*/32), {});
    expect_error(p, "illegal start partition 32");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeDma(Op::kDmaLoad, 200, 1024, 0), {});
    expect_error(p, "partition limit");
  }
  {
    Program p = OneCore();
    p.cores[0].allocations.push_back({"big", Mem::kSbuf, 0, 128, 100 * 1024, 2});
    expect_error(p, "SBUF capacity: 204800 live bytes per partition exceed the usable 180224");
  }
  {
    Program p = OneCore();
    p.cores[0].allocations.push_back({"acc", Mem::kPsum, 0, 128, 4096, 1});
    expect_error(p, "PSUM bank");
  }
  {
    Program p = OneCore();
    p.cores[0].allocations.push_back({"acc", Mem::kPsum, 0, 128, 2048, 9});
    expect_error(p, "9 live accumulation groups exceed the limit of 8");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kGpSimd, 512, 128, Mem::kPsum), {});
    expect_error(p, "GpSimd cannot access PSUM");
  }
  {
    Program p = OneCore();
    Instruction tt = MakeEngineOp(Op::kTensorTensor, EngineKind::kVector, 512, 128, Mem::kPsum);
    tt.in1 = Mem::kPsum;
    p.cores[0].Add(tt, {});
    expect_error(p, "both tensor_tensor inputs in PSUM");
  }
  {
    Program p = OneCore();
    Instruction mm = MakeMatmul(DType::kBf16, 128, 128, 512);
    mm.out = Mem::kSbuf;
    p.cores[0].Add(mm, {});
    expect_error(p, "TensorE writes PSUM only");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 8192, 128, Mem::kPsum), {});
    expect_error(p, "8192 elements exceeds 4096 per instruction from PSUM");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeEngineOp(Op::kBnStats, EngineKind::kVector, 1024), {});
    expect_error(p, "bn_stats of 1024 elements exceeds 512");
  }
  {
    Program p = OneCore();
    p.cores[0].Add(MakeEngineOp(Op::kActivation, EngineKind::kVector, 64), {});
    expect_error(p, "activation cannot run on vector");
  }
  {
    Program p = OneCore();
    Instruction inst = MakeEngineOp(Op::kMemset, EngineKind::kVector, 64);
    p.cores[0].Add(inst, {});
    p.cores[0].Add(inst, {5});
    expect_error(p, "dependency 5 does not name an earlier instruction");
  }
  {
    Program p;
    p.cores.resize(3);
    expect_error(p, "program uses 3 cores; snc2 has 2 per chip");
  }
}

}  // namespace
}  // namespace tessel::sim

namespace tessel::sim {
namespace {

TEST(TraceTest, WritesOneCompleteEventPerInstructionWithNamedTracks) {
  Target t = Load("snc2");
  Program p = OneCore();
  int32_t a = p.cores[0].Add(MakeDma(Op::kDmaLoad, 128, 1024, 3), {});
  int32_t mm = p.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {a});
  p.cores[0].Add(MakeEngineOp(Op::kTensorCopy, EngineKind::kVector, 512, 128, Mem::kPsum), {mm});
  const std::string path = ::testing::TempDir() + "/trace_test.json";
  ASSERT_TRUE(WriteTrace(t, p, {}, path).ok());
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in);
  int complete = 0;
  std::set<std::string> tracks;
  double end_us = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
  }
  EXPECT_EQ(complete, 3);
  EXPECT_EQ(tracks, (std::set<std::string>{"tensor", "vector", "dma queue 3 lane 0"}));
  EXPECT_NEAR(end_us * 1000, Simulate(t, p)->time_ns, 1.0);
  EXPECT_EQ(doc["otherData"]["target"], "snc2");
}

TEST(TraceTest, InvalidProgramsWriteNothing) {
  Target t = Load("snc2");
  Program p = OneCore();
  p.cores[0].Add(MakeMatmul(DType::kBf16, 256, 128, 512), {});
  const std::string path = ::testing::TempDir() + "/trace_invalid.json";
  EXPECT_EQ(WriteTrace(t, p, {}, path).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::ifstream(path).good());
}

}  // namespace
}  // namespace tessel::sim

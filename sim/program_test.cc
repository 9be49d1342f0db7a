#include "sim/program.h"

#include <thread>

#include "gtest/gtest.h"

namespace tessel::sim {
namespace {

TEST(ProgramTest, AddRecordsDependenciesAndSkipsNegativeOnes) {
  CoreProgram core;
  int32_t a = core.Add(MakeDma(Op::kDmaLoad, 128, 1024, 0), {});
  int32_t b = core.Add(MakeDma(Op::kDmaLoad, 128, 1024, 1), {-1});
  int32_t c = core.Add(MakeMatmul(DType::kBf16, 128, 128, 512), {a, -1, b});
  EXPECT_EQ(c, 2);
  ASSERT_EQ(core.DepsOf(c).size(), 2u);
  EXPECT_EQ(core.DepsOf(c)[0], a);
  EXPECT_EQ(core.DepsOf(c)[1], b);
  EXPECT_TRUE(core.DepsOf(b).empty());
}

// Issue 17: a core's program stops growing at 2^21 instructions and such a program is refused,
// so an oversized lowering cannot hold unbounded memory or be simulated.
TEST(ProgramTest, ACoreHoldsAtMostTwoToThe21InstructionsAndSuchAProgramIsRefused) {
  Program program;
  CoreProgram& core = program.cores.emplace_back();
  const int32_t max = int32_t{1} << 21;
  int32_t last = -1;
  for (int32_t i = 0; i < max + 1000; ++i)
    last = core.Add(MakeDma(Op::kDmaLoad, 128, 64, 0), {last});
  EXPECT_EQ(core.instructions.size(), size_t(max));
  EXPECT_EQ(last, max - 1);
  absl::StatusOr<Target> target = LoadTarget("snc2");
  ASSERT_TRUE(target.ok());
  absl::Status valid = ValidateProgram(*target, program);
  EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(valid.message().find("reaches 2097152 instructions"), std::string_view::npos)
      << valid.message();
}

// A repeat (CoreProgram::repeats_previous) must follow a core and hold nothing of its own.
TEST(ProgramTest, ARepeatOfNoCoreOrWithInstructionsOfItsOwnIsRefused) {
  absl::StatusOr<Target> target = LoadTarget("snc2");
  ASSERT_TRUE(target.ok());
  Program first;
  first.cores.emplace_back(CoreProgram::RepeatTag{});
  absl::Status valid = ValidateProgram(*target, first);
  EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(valid.message().find("is the first core"), std::string_view::npos) << valid.message();
  EXPECT_FALSE(Flatten(first).ok());

  Program own;
  own.cores.emplace_back().Add(MakeDma(Op::kDmaLoad, 128, 1024, 0), {});
  own.RepeatPrevious();
  EXPECT_TRUE(ValidateProgram(*target, own).ok());
  own.cores[1].Add(MakeDma(Op::kDmaLoad, 128, 1024, 0), {});
  valid = ValidateProgram(*target, own);
  EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(valid.message().find("has instructions of its own"), std::string_view::npos)
      << valid.message();
}

// Cores and instructions compare as bytes (program.h): a change to any one field, a dependency or
// an anchor form makes two cores differ, and SameOperation ignores only the dependency range.
TEST(ProgramTest, CoresThatDifferInAnyFieldDependencyOrAnchorFormAreNotEqual) {
  const std::vector<void (*)(Instruction&)> changes = {
      [](Instruction& i) { i.op = Op::kTensorTensor; },
      [](Instruction& i) { i.engine = EngineKind::kScalar; },
      [](Instruction& i) { i.dtype = DType::kFp8; },
      [](Instruction& i) { i.out_dtype = DType::kBf16; },
      [](Instruction& i) { i.in0 = Mem::kPsum; },
      [](Instruction& i) { i.in1 = Mem::kPsum; },
      [](Instruction& i) { i.out = Mem::kPsum; },
      [](Instruction& i) { i.reload_stationary = false; },
      [](Instruction& i) { i.transpose = true; },
      [](Instruction& i) { i.strided = true; },
      [](Instruction& i) { i.add_op = true; },
      [](Instruction& i) { i.partitions = 64; },
      [](Instruction& i) { i.start_partition = 32; },
      [](Instruction& i) { i.queue = 3; },
      [](Instruction& i) { i.k = 7; },
      [](Instruction& i) { i.m = 7; },
      [](Instruction& i) { i.n = 7; },
      [](Instruction& i) { i.free = 7; },
      [](Instruction& i) { i.bytes_per_partition = 7; },
      [](Instruction& i) { i.chunk_bytes = 7; },
  };
  auto core_with = [](void (*change)(Instruction&), int32_t distance, AnchorForm form) {
    CoreProgram core;
    Instruction inst = MakeDma(Op::kDmaLoad, 128, 1024, 0);
    if (change != nullptr) change(inst);
    core.BeginRepeat(4);
    core.AddCompact(MakeDma(Op::kDmaLoad, 128, 512, 1), {});
    const int32_t deps[] = {1, -distance};
    const AnchorForm forms[] = {AnchorForm{}, form};
    core.AddCompact(inst, deps, forms);
    core.EndRepeat();
    return core;
  };
  const CoreProgram base = core_with(nullptr, 2, {});
  EXPECT_TRUE(base == core_with(nullptr, 2, {}));
  EXPECT_FALSE(base == core_with(nullptr, 3, {}));
  EXPECT_FALSE(base == core_with(nullptr, 2, AnchorForm{.stride = 0, .up = 1}));
  for (size_t c = 0; c < changes.size(); ++c) {
    const CoreProgram changed = core_with(changes[c], 2, {});
    EXPECT_FALSE(base == changed) << "change " << c;
    EXPECT_FALSE(SameOperation(base.instructions[1], changed.instructions[1])) << "change " << c;
  }
  Instruction moved = base.instructions[1];
  moved.dep_begin += 5;
  moved.dep_count += 1;
  EXPECT_TRUE(SameOperation(base.instructions[1], moved));
  EXPECT_FALSE(base.instructions[1] == moved);
}

TEST(ProgramTest, PeakBytesCountBuffers) {
  CoreProgram core;
  core.allocations.push_back({"a", Mem::kSbuf, 0, 128, 1000, 3});
  core.allocations.push_back({"b", Mem::kSbuf, 0, 64, 24, 1});
  core.allocations.push_back({"p", Mem::kPsum, 0, 128, 2048, 2});
  EXPECT_EQ(SbufBytesPerPartition(core), 3024);
  EXPECT_EQ(PsumBytesPerPartition(core), 4096);
}

TEST(ProgramTest, LegalStartPartitionsFollowTheTileHeight) {
  absl::StatusOr<Target> t = LoadTarget("snc2");
  ASSERT_TRUE(t.ok());
  struct Case {
    int partitions, start;
    bool ok;
  };
  const Case cases[] = {{128, 0, true},  {100, 0, true}, {65, 64, false}, {64, 64, true},
                        {64, 32, false}, {33, 64, true}, {32, 96, true},  {32, 48, false},
                        {16, 32, true},  {1, 96, true},  {1, 100, false}, {40, 96, false}};
  for (const Case& c : cases) {
    Program p;
    p.cores.resize(1);
    p.cores[0].Add(MakeDma(Op::kDmaLoad, c.partitions, 512, 0, c.start), {});
    EXPECT_EQ(ValidateProgram(*t, p).ok(), c.ok) << c.partitions << "@" << c.start;
  }
}

// A worker lowers and simulates one program after another: a core buffer of 32 MiB or more
// (which glibc maps and unmaps on every allocation) is kept, emptied, for the thread's next core
// program; smaller ones are left to the allocator; other threads do not see it.
TEST(ProgramTest, ARecycledProgramsLargeBuffersGoToTheThreadsNextCoreProgram) {
  constexpr size_t kLarge = (size_t{32} << 20) / sizeof(Instruction) + 1;
  Program big;
  big.cores.resize(2);
  big.cores[0].instructions.reserve(kLarge);
  big.cores[0].Add(MakeMatmul(DType::kBf16, 128, 128, 512), {});
  big.cores[1].instructions.reserve(1000);  // small: not kept
  const Instruction* kept = big.cores[0].instructions.data();
  RecycleProgram(std::move(big));
  EXPECT_TRUE(big.cores.empty());

  size_t elsewhere = 1;
  std::thread([&] { elsewhere = CoreProgram().instructions.capacity(); }).join();
  EXPECT_EQ(elsewhere, 0u);

  CoreProgram next;
  EXPECT_TRUE(next.instructions.empty());
  EXPECT_GE(next.instructions.capacity(), kLarge);
  EXPECT_EQ(next.instructions.data(), kept);
  CoreProgram after;  // the small buffer was not kept
  EXPECT_EQ(after.instructions.capacity(), 0u);
}

}  // namespace
}  // namespace tessel::sim

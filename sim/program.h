// Simulator programs: per-core instruction lists with explicit dependencies and memory allocations.
//
// An instruction names its engine, its sizes and the memories it reads and writes; dependencies are
// indices of earlier instructions of the same core. Each engine executes its instructions in
// program order (an in-order queue); DMA transfers are FIFO per DMA queue. A sharded kernel gives
// one CoreProgram per core; the cores share the chip's HBM bandwidth.
//
// ValidateProgram checks the hardware limits (partitions, matmul sizes, PSUM banks, SBUF capacity,
// engine/location rules) before anything is simulated, naming the violated limit.
#ifndef TESSEL_SIM_PROGRAM_H_
#define TESSEL_SIM_PROGRAM_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/api.h"
#include "sim/target.h"

namespace tessel::sim {

enum class Op : uint8_t {
  kDmaLoad = 0,   // HBM -> SBUF
  kDmaStore,      // SBUF -> HBM
  kDmaCopy,       // SBUF -> SBUF (no HBM traffic)
  kMatmul,        // TensorE: psum[M, N] (+)= stationary[K, M]^T x moving[K, N]
  kTranspose,     // TensorE transpose of a [partitions, free] tile into PSUM
  kActivation,    // Scalar: func(x * scale + bias)
  kTensorScalar,  // Vector or Scalar
  kTensorTensor,  // Vector, two inputs
  kTensorReduce,  // Vector
  kTensorCopy,    // Vector, Scalar or GpSimd (e.g. PSUM eviction)
  kReciprocal,    // Vector
  kBnStats,       // Vector
  kBnAggr,        // Vector
  kMemset,        // Vector
  kIota,          // GpSimd (also affine_select)
};
inline constexpr int kNumOps = 15;
// "dma_load", "matmul", "tensor_copy", ...
std::string_view OpName(Op op);

// Where an operand lives.
enum class Mem : uint8_t { kSbuf = 0, kPsum = 1, kHbm = 2 };

// One instruction. Compact (no heap members) so programs of tens of thousands of instructions stay
// cheap to build and simulate. Fields that do not apply to an op are ignored.
struct Instruction {
  Op op = Op::kTensorCopy;
  uint8_t unused3[3] = {};  // explicit padding (unused* fields): see SameOperation
  EngineKind engine = EngineKind::kVector;
  DType dtype = DType::kBf16;  // matmul operands; element type of engine-op inputs
  // Engine ops: element type of the output (decides VectorE's performance mode with `dtype`).
  // fp32 unless the kernel says otherwise: no kernel gains the mode without declaring it.
  DType out_dtype = DType::kFp32;
  uint8_t unused = 0;
  Mem in0 = Mem::kSbuf;  // first input
  Mem in1 = Mem::kSbuf;  // second input (tensor_tensor only)
  Mem out = Mem::kSbuf;
  bool reload_stationary = true;  // matmul: a new stationary tile is loaded (in the background)
  bool transpose = false;         // DMA: transposing transfer (slower, see target)
  bool strided = false;           // engine op: minor stride above 16 bytes (2x cost)
  bool add_op = false;            // tensor_reduce: add/max (N/2 cost for bf16)
  int16_t partitions = 128;       // partitions touched (the P of the tile)
  int16_t start_partition = 0;
  int16_t queue = 0;                // DMA queue
  int32_t k = 0, m = 0, n = 0;      // matmul: contraction, stationary free, moving free;
                                    // systolic targets: the whole GEMM
  int32_t free = 0;                 // engine ops and transpose: free size in elements
  int64_t bytes_per_partition = 0;  // DMA
  int32_t chunk_bytes = 0;          // DMA: contiguous bytes per descriptor; 0 = bytes_per_partition
  uint32_t dep_begin = 0;           // into CoreProgram::deps (set by CoreProgram::Add)
  uint32_t dep_count = 0;
  uint32_t unused_tail = 0;

  // Every field equal (see SameOperation).
  bool operator==(const Instruction& other) const;
};

// Whether `a` and `b` are the same operation: every field equal except the dependency range
// (dep_begin, dep_count). Per-template work (validation, costs) is done once per distinct one.
//
// Programs compare instructions often (cores, repeated periods), so instructions compare as bytes:
// the padding a compiler would insert is declared as the unused* fields, which stay zero, and the
// static_asserts below check that no byte is left out and that the dependency range comes last.
inline bool SameOperation(const Instruction& a, const Instruction& b) {
  return std::memcmp(&a, &b, offsetof(Instruction, dep_begin)) == 0;
}
inline bool Instruction::operator==(const Instruction& other) const {
  return std::memcmp(this, &other, sizeof(Instruction)) == 0;
}
static_assert(std::has_unique_object_representations_v<Instruction>,
              "Instruction has padding: declare it as an unused field (SameOperation)");
static_assert(offsetof(Instruction, dep_count) == offsetof(Instruction, dep_begin) + 4 &&
                  offsetof(Instruction, unused_tail) == offsetof(Instruction, dep_count) + 4 &&
                  sizeof(Instruction) == offsetof(Instruction, unused_tail) + 4,
              "Instruction changed: SameOperation compares every byte before dep_begin");

// A named region of SBUF or PSUM, live for the whole program, `bufs` times (multi-buffering).
struct Allocation {
  std::string name;
  Mem memory = Mem::kSbuf;
  int start_partition = 0;
  int partitions = 128;
  int64_t bytes_per_partition = 0;  // one buffer
  int bufs = 1;

  bool operator==(const Allocation&) const = default;
};

// One entry of a loop-structured (compact) core program; see CoreProgram::segments.
struct Segment {
  enum Kind : uint8_t { kInstructions = 0, kBegin = 1, kEnd = 2 };
  Kind kind = kInstructions;
  uint32_t begin = 0, end = 0;  // kInstructions: the instruction templates [begin, end), in order
  int64_t count = 0;            // kBegin: how many times the body (up to the matching kEnd) runs
  uint32_t match = 0;           // kBegin: index of the matching kEnd; kEnd: of its kBegin

  bool operator==(const Segment&) const = default;
};

// The instructions of one core.
//
// Two forms share this struct:
// - flat (segments empty): `instructions` run once each, in order; deps are indices of earlier
//   instructions (CoreProgram::Add).
// - compact, loop-structured (segments non-empty): the program is the walk of `segments`;
//   `instructions` are templates, each executed once per visit of its segment. A template's deps
//   are DISTANCES back in the flat (unrolled) order: 1 = the instruction just before
//   (CoreProgram::AddCompact, BeginRepeat, EndRepeat). A body repeated N times therefore describes
//   N iterations whose dependency pattern is the same relative to each iteration. A NEGATIVE dep
//   -a is anchored instead: the instruction `a` places before the flat position where the
//   innermost enclosing repeat was entered (its first iteration's start), the same instruction in
//   every iteration (e.g. operands loaded once before a loop that reads them). Its AnchorForm
//   (anchor_forms) can change that: with up = u > 0 it counts from the entry of the repeat u
//   levels further out instead (operands loaded before an outer loop, read in a repeat nested in
//   it); with a stride s > 0 it is strided: in iteration j (0-based, from the entry) it names the
//   instruction a - j * s places before the entry, always before it (a > (count - 1) * s), e.g.
//   the partial sums an earlier loop with a different period wrote, one per iteration.
//   Flatten() expands them; Simulate runs them without expanding and, unless SimOptions::exact,
//   extrapolates iterations once the schedule is periodic (results identical to the flat
//   simulation).
struct AnchorForm {
  int32_t stride = 0;  // > 0: strided (only with up = 0)
  int32_t up = 0;  // the repeat counted from: 0 = the innermost enclosing one, 1 = the next, ...
  bool operator==(const AnchorForm&) const = default;
};
static_assert(std::has_unique_object_representations_v<AnchorForm>);

struct CoreProgram {
  // Empty. Takes over the largest instruction and dependency buffers (their capacity) that this
  // thread's RecycleProgram kept, if any.
  CoreProgram();
  // A core that repeats the previous one (below); takes no buffers.
  struct RepeatTag {};
  explicit CoreProgram(RepeatTag) : repeats_previous(true) {}

  // Set on a core that runs the program of the core before it (Program::RepeatPrevious); its own
  // lists are then empty. Sharded kernels often run one program on every core: saying so costs
  // nothing, where a copy cost a tenth of a matmul evaluation (copying, then comparing).
  bool repeats_previous = false;

  std::vector<Instruction> instructions;
  std::vector<int32_t> deps;  // flattened; instruction i's are deps[dep_begin, dep_begin+dep_count)
  // Compact form: the AnchorForm of each dep (the default for relative deps); empty when every
  // anchor has the default form.
  std::vector<AnchorForm> anchor_forms;
  std::vector<Allocation> allocations;
  std::vector<Segment> segments;  // empty = flat program

  // Appends `inst` depending on `deps` (negative entries are ignored, so "no producer yet" can be
  // passed as -1). Returns the new instruction's index. A core holds at most 2^21 instructions:
  // past that, nothing is added (the last index is returned) and ValidateProgram refuses the
  // program, so an oversized lowering costs its loops, not memory. Deps must name earlier
  // instructions; ValidateProgram reports it otherwise.
  int32_t Add(Instruction inst, std::span<const int32_t> deps);
  int32_t Add(Instruction inst, std::initializer_list<int32_t> deps) {
    return Add(inst, std::span<const int32_t>(deps.begin(), deps.size()));
  }
  // Compact form: appends a template whose deps are distances back in flat order (> 0) or
  // anchors (< 0, see above; only inside a repeat); zeros are ignored. `forms`, when not empty,
  // gives each entry's AnchorForm (only anchors have other than the default). Returns the
  // template's index.
  int32_t AddCompact(const Instruction& inst, std::span<const int32_t> distances,
                     std::span<const AnchorForm> forms = {});
  // Sets the form of deps[j] (an anchor; see above).
  void SetAnchorForm(size_t j, AnchorForm form);
  AnchorForm FormOf(size_t j) const {
    return anchor_forms.empty() ? AnchorForm{} : anchor_forms[j];
  }
  int32_t StrideOf(size_t j) const { return anchor_forms.empty() ? 0 : anchor_forms[j].stride; }
  // Compact form: opens / closes a body that runs `count` (>= 1) times. Must nest.
  void BeginRepeat(int64_t count);
  void EndRepeat();
  bool compact() const { return !segments.empty(); }
  // Instructions executed (the unrolled length; instructions.size() for a flat program).
  int64_t FlatSize() const;
  // Instructions executed by the repeat whose kBegin is segments[begin] (all its iterations).
  int64_t RepeatFlatSize(size_t begin) const;

  // Same instructions, dependencies, allocations and loop structure (so the same schedule), and
  // both repeats or neither. Compares the instruction, dependency and anchor buffers as bytes
  // (ValidateProgram compares every core that is not a repeat with the one before it).
  bool operator==(const CoreProgram& other) const;

  std::span<const int32_t> DepsOf(int32_t index) const {
    const Instruction& inst = instructions[index];
    return std::span<const int32_t>(deps.data() + inst.dep_begin, inst.dep_count);
  }
};

struct Program {
  std::string name;                // for traces and messages
  std::vector<CoreProgram> cores;  // one per core used; at least one

  // cores[index], appended if it is not there yet, with room for as many instructions and
  // dependencies as the core before it has (a program's cores are alike), so a large program's
  // later cores do not grow their buffers step by step.
  CoreProgram& Core(size_t index);
  // Appends a core that runs the program of the last one (REQUIRES: a core before it).
  void RepeatPrevious();
  // The core whose lists core `index` runs: itself, or the one it repeats (through any chain).
  const CoreProgram& Source(size_t index) const {
    while (index > 0 && cores[index].repeats_previous) --index;
    return cores[index];
  }
};

// Keeps `program`'s large core buffers (its instructions and deps, 32 MiB or more), emptied, for
// the next core programs this thread constructs, so a thread that lowers and simulates one program
// after another (a worker) reuses their memory instead of having it mapped and faulted in again:
// a large flat program (attention at seq 8192) is tens of MB, and on a paravirtualised VM a page
// fault costs microseconds (BENCHMARKS.md "Every kernel's evaluation cost"). A thread keeps at
// most 8 buffers of each kind and 256 MiB.
void RecycleProgram(Program&& program);

// The flat form of `program` (compact cores unrolled, deps made absolute); flat cores are copied,
// and so is the core a repeat (CoreProgram::repeats_previous) repeats.
// With `max_per_core`, a compact core's first that many instructions only (a prefix is
// self-contained: deps point back). InvalidArgument when a dependency points before the start of
// its core or the result would not fit 2^31 instructions.
absl::StatusOr<Program> Flatten(const Program& program,
                                int64_t max_per_core = std::numeric_limits<int64_t>::max());

// Convenience constructors for instructions.
inline Instruction MakeDma(Op op, int partitions, int64_t bytes_per_partition, int queue,
                           int start_partition = 0) {
  Instruction inst;
  inst.op = op;
  inst.engine = EngineKind::kDma;
  inst.partitions = int16_t(partitions);
  inst.start_partition = int16_t(start_partition);
  inst.bytes_per_partition = bytes_per_partition;
  inst.queue = int16_t(queue);
  inst.in0 = op == Op::kDmaLoad ? Mem::kHbm : Mem::kSbuf;
  inst.out = op == Op::kDmaStore ? Mem::kHbm : Mem::kSbuf;
  return inst;
}

inline Instruction MakeMatmul(DType dtype, int k, int m, int n, bool reload_stationary = true) {
  Instruction inst;
  inst.op = Op::kMatmul;
  inst.engine = EngineKind::kTensor;
  inst.dtype = dtype;
  inst.k = k;
  inst.m = m;
  inst.n = n;
  inst.partitions = int16_t(k > 0 && k <= 128 ? k : 128);
  inst.reload_stationary = reload_stationary;
  inst.out = Mem::kPsum;
  return inst;
}

inline Instruction MakeEngineOp(Op op, EngineKind engine, int free, int partitions = 128,
                                Mem in0 = Mem::kSbuf, Mem out = Mem::kSbuf) {
  Instruction inst;
  inst.op = op;
  inst.engine = engine;
  inst.free = free;
  inst.partitions = int16_t(partitions);
  inst.in0 = in0;
  inst.out = out;
  return inst;
}

// Checks `program` against `target`'s limits. OK when it can run; InvalidArgument naming the core,
// the instruction or allocation, and the violated limit (e.g. "matmul K=256 exceeds the TensorE
// limit K <= 128") otherwise.
absl::Status ValidateProgram(const Target& target, const Program& program);
// As ValidateProgram, and sets (*copies)[c] when core c has the same program as core c - 1 (such a
// core is valid when the one before it is, so it is checked only once). With `same_operation`,
// also sets (*same_operation)[c][t], for every instruction t of every core c that is not a copy,
// to an index <= t of an instruction of that core that is the SameOperation (t when none earlier
// was found), so per-operation work can be shared; a copy's vector is left as it was.
absl::Status ValidateProgram(const Target& target, const Program& program,
                             std::vector<bool>* copies,
                             std::vector<std::vector<int32_t>>* same_operation = nullptr);

// Peak live SBUF / PSUM bytes per partition of one core (allocations x bufs).
int64_t SbufBytesPerPartition(const CoreProgram& core);
int64_t PsumBytesPerPartition(const CoreProgram& core);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_PROGRAM_H_

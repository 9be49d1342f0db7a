#include "sim/program.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdio>

#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::sim {
namespace {

// The most instructions a core's program holds (issue 17): Add and AddCompact stop storing at
// this size, and ValidateProgram refuses a core that reached it, so no request can make a worker
// hold or simulate an unbounded program (~190 bytes and ~0.3 us per instruction, lowering and
// simulation together).
constexpr size_t kMaxCoreInstructions = size_t{1} << 21;

bool EngineAllowed(Op op, EngineKind engine) {
  switch (op) {
    case Op::kDmaLoad:
    case Op::kDmaStore:
    case Op::kDmaCopy:
      return engine == EngineKind::kDma;
    case Op::kMatmul:
    case Op::kTranspose:
      return engine == EngineKind::kTensor;
    case Op::kActivation:
      return engine == EngineKind::kScalar;
    case Op::kTensorScalar:
      return engine == EngineKind::kVector || engine == EngineKind::kScalar;
    case Op::kTensorCopy:
      return engine == EngineKind::kVector || engine == EngineKind::kScalar ||
             engine == EngineKind::kGpSimd;
    case Op::kIota:
      return engine == EngineKind::kGpSimd;
    case Op::kTensorTensor:
    case Op::kTensorReduce:
    case Op::kReciprocal:
    case Op::kBnStats:
    case Op::kBnAggr:
    case Op::kMemset:
      return engine == EngineKind::kVector;
  }
  return false;
}

bool IsDma(Op op) { return op == Op::kDmaLoad || op == Op::kDmaStore || op == Op::kDmaCopy; }

// Checks the partition count and start partition of a tile (ACCELERATOR.md section 4).
// `what` names the checked object; it is only called to build an error message.
template <typename What>
absl::Status CheckPartitions(const Target& target, int partitions, int start, const What& what) {
  const int total = target.sbuf_partitions;
  if (partitions < 1 || partitions > total) {
    return absl::InvalidArgumentError(
        StrCat(what(), ": partition limit: ", partitions, " partitions, must be 1..", total));
  }
  const int half = total / 2, quarter = total / 4;
  int align = partitions > half ? total : partitions > quarter ? half : quarter;
  if (start < 0 || start % align != 0 || start + partitions > total) {
    return absl::InvalidArgumentError(
        StrCat(what(), ": illegal start partition ", start, " for a tile of ", partitions,
               " partitions (must be a multiple of ", align, " and end by partition ", total, ")"));
  }
  return absl::OkStatus();
}

// The dependency checks of instruction `index`.
absl::Status CheckDeps(const CoreProgram& core, int index, std::string_view where) {
  for (int32_t dep : core.DepsOf(index)) {
    if (core.compact() ? dep == 0 : (dep < 0 || dep >= index)) {
      return absl::InvalidArgumentError(
          StrCat(where, " instruction ", index, " (", OpName(core.instructions[index].op),
                 "): dependency ", dep, " does not name an earlier instruction"));
    }
  }
  return absl::OkStatus();
}

// The checks of instruction `index` that depend on its fields only (not on its deps), so they
// give the same answer for every instruction that is the SameOperation.
absl::Status CheckOperation(const Target& target, const CoreProgram& core, int index,
                            std::string_view where) {
  const Instruction& inst = core.instructions[index];
  // Built only when a check fails: validation runs for every instruction of every simulation.
  auto what = [&] { return StrCat(where, " instruction ", index, " (", OpName(inst.op), ")"); };
  if (!EngineAllowed(inst.op, inst.engine)) {
    return absl::InvalidArgumentError(StrCat(what(),
                                             ": engine/location mismatch: ", OpName(inst.op),
                                             " cannot run on ", EngineName(inst.engine)));
  }
  if (target.systolic) {
    if (inst.op != Op::kMatmul) {
      return absl::InvalidArgumentError(
          StrCat(what(), ": systolic targets run GEMM (matmul) instructions only"));
    }
    if (inst.k < 1 || inst.m < 1 || inst.n < 1) {
      return absl::InvalidArgumentError(StrCat(what(), ": matmul sizes must be positive"));
    }
    return absl::OkStatus();
  }
  absl::Status partitions = CheckPartitions(target, inst.partitions, inst.start_partition, what);
  if (!partitions.ok()) return partitions;
  const bool reads_psum = inst.in0 == Mem::kPsum || inst.in1 == Mem::kPsum;
  const bool touches_psum = reads_psum || inst.out == Mem::kPsum;
  if (IsDma(inst.op)) {
    if (inst.bytes_per_partition <= 0) {
      return absl::InvalidArgumentError(StrCat(what(), ": DMA moves no bytes"));
    }
    if (inst.queue < 0 || inst.queue >= target.dma_queues) {
      return absl::InvalidArgumentError(
          StrCat(what(), ": DMA queue ", inst.queue, " outside 0..", target.dma_queues - 1));
    }
    if (touches_psum) {
      return absl::InvalidArgumentError(StrCat(what(), ": engine/location mismatch: DMA to PSUM"));
    }
    return absl::OkStatus();
  }
  if (inst.op == Op::kMatmul) {
    if (!target.SupportsDType(inst.dtype)) {
      return absl::InvalidArgumentError(StrCat(what(), ": TensorE on ", target.name,
                                               " does not support ", DTypeName(inst.dtype)));
    }
    if (inst.k < 1 || inst.m < 1 || inst.n < 1) {
      return absl::InvalidArgumentError(StrCat(what(), ": matmul sizes must be positive"));
    }
    int max_k = target.MaxMatmulK(inst.dtype);
    if (max_k > 0 && inst.k > max_k) {
      return absl::InvalidArgumentError(StrCat(what(), ": tile limit: matmul K=", inst.k,
                                               " exceeds the TensorE limit K <= ", max_k));
    }
    if (target.matmul_max_m > 0 && inst.m > target.matmul_max_m) {
      return absl::InvalidArgumentError(
          StrCat(what(), ": tile limit: matmul M=", inst.m,
                 " exceeds the stationary free size limit M <= ", target.matmul_max_m));
    }
    if (target.matmul_max_n > 0 && inst.n > target.matmul_max_n) {
      return absl::InvalidArgumentError(
          StrCat(what(), ": tile limit: matmul N=", inst.n,
                 " exceeds the moving free size limit N <= ", target.matmul_max_n));
    }
    if (int64_t(inst.n) * 4 > target.psum_bank_bytes_per_partition) {
      return absl::InvalidArgumentError(StrCat(
          what(), ": PSUM bank: an fp32 result of N=", inst.n, " needs ", inst.n * 4,
          " bytes per partition, over one bank (", target.psum_bank_bytes_per_partition, ")"));
    }
  }
  if (inst.engine == EngineKind::kTensor && inst.out != Mem::kPsum) {
    return absl::InvalidArgumentError(
        StrCat(what(), ": engine/location mismatch: TensorE writes PSUM only"));
  }
  if (inst.op == Op::kTranspose && inst.free > target.sbuf_partitions) {
    return absl::InvalidArgumentError(StrCat(what(), ": partition limit: transpose of free size ",
                                             inst.free, " gives more than ", target.sbuf_partitions,
                                             " partitions"));
  }
  if (inst.engine == EngineKind::kGpSimd && touches_psum) {
    return absl::InvalidArgumentError(
        StrCat(what(), ": engine/location mismatch: GpSimd cannot access PSUM"));
  }
  if (inst.op == Op::kTensorTensor && inst.in0 == Mem::kPsum && inst.in1 == Mem::kPsum) {
    return absl::InvalidArgumentError(
        StrCat(what(), ": engine/location mismatch: both tensor_tensor inputs in PSUM"));
  }
  if (inst.engine != EngineKind::kTensor) {
    if (inst.free < 1) {
      return absl::InvalidArgumentError(StrCat(what(), ": free size must be positive"));
    }
    int cap = reads_psum ? target.max_free_psum : target.max_free_sbuf;
    if (cap > 0 && inst.free > cap) {
      return absl::InvalidArgumentError(StrCat(what(), ": free size cap: ", inst.free,
                                               " elements exceeds ", cap, " per instruction from ",
                                               reads_psum ? "PSUM" : "SBUF"));
    }
    if (inst.op == Op::kBnStats && target.max_bn_stats_free > 0 &&
        inst.free > target.max_bn_stats_free) {
      return absl::InvalidArgumentError(StrCat(what(), ": free size cap: bn_stats of ", inst.free,
                                               " elements exceeds ", target.max_bn_stats_free));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAllocations(const Target& target, const CoreProgram& core,
                              std::string_view where) {
  int psum_groups = 0;
  for (const Allocation& a : core.allocations) {
    auto what = [&] { return StrCat(where, " allocation '", a.name, "'"); };
    absl::Status partitions = CheckPartitions(target, a.partitions, a.start_partition, what);
    if (!partitions.ok()) return partitions;
    if (a.bufs < 1 || a.bytes_per_partition < 0) {
      return absl::InvalidArgumentError(StrCat(what(), ": needs bufs >= 1 and bytes >= 0"));
    }
    if (a.memory == Mem::kPsum) {
      if (a.bytes_per_partition > target.psum_bank_bytes_per_partition) {
        return absl::InvalidArgumentError(StrCat(what(), ": PSUM bank: ", a.bytes_per_partition,
                                                 " bytes per partition exceeds one bank (",
                                                 target.psum_bank_bytes_per_partition, ")"));
      }
      psum_groups += a.bufs;
    } else if (a.memory == Mem::kHbm) {
      return absl::InvalidArgumentError(StrCat(what(), ": HBM is not allocated by programs"));
    }
  }
  if (psum_groups > target.max_accumulation_groups) {
    return absl::InvalidArgumentError(StrCat(where, ": PSUM: ", psum_groups,
                                             " live accumulation groups exceed the limit of ",
                                             target.max_accumulation_groups));
  }
  int64_t psum = PsumBytesPerPartition(core);
  if (psum > target.PsumBytesPerPartition()) {
    return absl::InvalidArgumentError(StrCat(where, ": PSUM capacity: ", psum,
                                             " live bytes per partition exceed ",
                                             target.PsumBytesPerPartition()));
  }
  int64_t sbuf = SbufBytesPerPartition(core);
  if (sbuf > target.UsableSbufPerPartition()) {
    return absl::InvalidArgumentError(
        StrCat(where, ": SBUF capacity: ", sbuf, " live bytes per partition exceed the usable ",
               target.UsableSbufPerPartition(), " (", target.sbuf_bytes_per_partition,
               " minus the runtime reserve of ", target.sbuf_reserved_bytes_per_partition, ")"));
  }
  return absl::OkStatus();
}

int64_t BytesIn(const CoreProgram& core, Mem memory) {
  int64_t total = 0;
  for (const Allocation& a : core.allocations) {
    if (a.memory == memory) total += a.bytes_per_partition * a.bufs;
  }
  return total;
}

// The kBegin of the innermost repeat around segment `i` (which is inside one).
size_t EnclosingRepeat(const CoreProgram& core, size_t i) {
  int depth = 0;
  while (i-- > 0) {
    const Segment& s = core.segments[i];
    if (s.kind == Segment::kEnd) ++depth;
    if (s.kind == Segment::kBegin && depth-- == 0) return i;
  }
  return 0;
}

// A slot in [0, kOperationSlots) from a few fields, the same for instructions that are the
// SameOperation: ValidateProgram's small direct-mapped cache of checked operations.
constexpr int kOperationSlots = 32;
int OperationSlot(const Instruction& inst) {
  const uint32_t h = uint32_t(inst.op) * 7u + uint32_t(inst.engine) * 3u +
                     uint32_t(inst.queue) * 5u + uint32_t(inst.reload_stationary) * 11u +
                     uint32_t(inst.partitions) * 13u + uint32_t(inst.n) + uint32_t(inst.free);
  return int(h % kOperationSlots);
}

}  // namespace

std::string_view OpName(Op op) {
  static constexpr std::string_view kNames[kNumOps] = {
      "dma_load",   "dma_store",     "dma_copy",      "matmul",        "transpose",
      "activation", "tensor_scalar", "tensor_tensor", "tensor_reduce", "tensor_copy",
      "reciprocal", "bn_stats",      "bn_aggr",       "memset",        "iota"};
  int i = int(op);
  return i >= 0 && i < kNumOps ? kNames[i] : "unknown";
}

namespace {

// Only buffers this large are kept: glibc maps and unmaps every allocation beyond 32 MiB, while
// smaller ones its free lists reuse (KeepFreedHeapMemory), and keeping those apart from the free
// lists cost more page faults than it saved (conv2d's random configs, BENCHMARKS.md).
constexpr size_t kMinRecycledBytes = size_t{32} << 20;
constexpr size_t kMaxRecycledBytes = size_t{256} << 20;
constexpr size_t kMaxRecycledPerKind = 8;

// This thread's recycled buffers, empty, each kind in ascending capacity.
struct Recycled {
  std::vector<std::vector<Instruction>> instructions;
  std::vector<std::vector<int32_t>> deps;
  size_t bytes = 0;
};
Recycled& ThreadRecycled() {
  thread_local Recycled recycled;
  return recycled;
}

template <typename T>
size_t CapacityBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Moves the largest kept buffer of a kind into `to` (empty).
template <typename T>
void TakeLargest(std::vector<std::vector<T>>& kept, size_t& bytes, std::vector<T>& to) {
  if (kept.empty()) return;
  bytes -= CapacityBytes(kept.back());
  to.swap(kept.back());
  kept.pop_back();
}

// Keeps `from` (emptied) if it is large enough and fits the thread's bounds.
template <typename T>
void Keep(std::vector<T>& from, std::vector<std::vector<T>>& kept, size_t& bytes) {
  const size_t size = CapacityBytes(from);
  if (size < kMinRecycledBytes || kept.size() >= kMaxRecycledPerKind ||
      bytes + size > kMaxRecycledBytes) {
    return;
  }
  from.clear();
  auto at = std::lower_bound(kept.begin(), kept.end(), size, [](const std::vector<T>& v, size_t s) {
    return CapacityBytes(v) < s;
  });
  kept.insert(at, std::move(from));
  bytes += size;
}

// Whether `a` and `b` hold the same bytes (for types without padding).
template <typename T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  static_assert(std::has_unique_object_representations_v<T>);
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

bool CoreProgram::operator==(const CoreProgram& other) const {
  return repeats_previous == other.repeats_previous &&
         SameBytes(instructions, other.instructions) && SameBytes(deps, other.deps) &&
         SameBytes(anchor_forms, other.anchor_forms) && allocations == other.allocations &&
         segments == other.segments;
}

CoreProgram& Program::Core(size_t index) {
  if (cores.size() <= index) cores.resize(index + 1);
  CoreProgram& core = cores[index];
  if (index > 0) {
    const CoreProgram& previous = Source(index - 1);
    core.instructions.reserve(previous.instructions.size());
    core.deps.reserve(previous.deps.size());
  }
  return core;
}

void Program::RepeatPrevious() {
  assert(!cores.empty());
  // Not through resize: a default-constructed core takes the thread's recycled buffers.
  cores.emplace_back(CoreProgram::RepeatTag{});
}

CoreProgram::CoreProgram() {
  Recycled& r = ThreadRecycled();
  TakeLargest(r.instructions, r.bytes, instructions);
  TakeLargest(r.deps, r.bytes, deps);
}

void RecycleProgram(Program&& program) {
  Recycled& r = ThreadRecycled();
  for (CoreProgram& core : program.cores) {
    Keep(core.instructions, r.instructions, r.bytes);
    Keep(core.deps, r.deps, r.bytes);
  }
  program.cores.clear();
}

int32_t CoreProgram::Add(Instruction inst, std::span<const int32_t> inst_deps) {
  if (instructions.size() >= kMaxCoreInstructions) return int32_t(instructions.size()) - 1;
  inst.dep_begin = uint32_t(deps.size());
  uint32_t count = 0;
  for (int32_t d : inst_deps) {
    if (d < 0) continue;
    deps.push_back(d);
    ++count;
  }
  inst.dep_count = count;
  instructions.push_back(inst);
  return int32_t(instructions.size() - 1);
}

int32_t CoreProgram::AddCompact(const Instruction& inst, std::span<const int32_t> distances,
                                std::span<const AnchorForm> forms) {
  if (instructions.size() >= kMaxCoreInstructions) return int32_t(instructions.size()) - 1;
  const int32_t index = int32_t(instructions.size());
  const uint32_t dep_begin = uint32_t(deps.size());
  for (size_t j = 0; j < distances.size(); ++j) {
    if (distances[j] == 0) continue;
    deps.push_back(distances[j]);
    const AnchorForm form = j < forms.size() ? forms[j] : AnchorForm{};
    if (form != AnchorForm{} || !anchor_forms.empty()) {
      // Defaults for the deps before the first with another form (already there after it).
      if (anchor_forms.size() + 1 != deps.size()) anchor_forms.resize(deps.size() - 1);
      anchor_forms.push_back(form);
    }
  }
  Instruction& added = instructions.emplace_back(inst);
  added.dep_begin = dep_begin;
  added.dep_count = uint32_t(deps.size()) - dep_begin;
  if (segments.empty() || segments.back().kind != Segment::kInstructions) {
    segments.push_back({Segment::kInstructions, uint32_t(index), uint32_t(index), 0, 0});
  }
  segments.back().end = uint32_t(index) + 1;
  return index;
}

void CoreProgram::SetAnchorForm(size_t j, AnchorForm form) {
  if (anchor_forms.empty() && form == AnchorForm{}) return;
  anchor_forms.resize(deps.size());
  anchor_forms[j] = form;
}

void CoreProgram::BeginRepeat(int64_t count) {
  segments.push_back({Segment::kBegin, 0, 0, count, 0});
}

void CoreProgram::EndRepeat() {
  int depth = 0;
  for (size_t i = segments.size(); i-- > 0;) {
    if (segments[i].kind == Segment::kEnd) ++depth;
    if (segments[i].kind == Segment::kBegin && depth-- == 0) {
      segments[i].match = uint32_t(segments.size());
      segments.push_back({Segment::kEnd, 0, 0, 0, uint32_t(i)});
      return;
    }
  }
}

int64_t CoreProgram::RepeatFlatSize(size_t begin) const {
  int64_t body = 0;
  for (size_t i = begin + 1; i < segments[begin].match; ++i) {
    if (segments[i].kind == Segment::kBegin) {
      body += RepeatFlatSize(i);
      i = segments[i].match;
    } else {
      body += int64_t(segments[i].end) - segments[i].begin;
    }
  }
  return body * segments[begin].count;
}

int64_t CoreProgram::FlatSize() const {
  if (segments.empty()) return int64_t(instructions.size());
  // Flat length of each open body; a small array, as Simulate validates on every call.
  constexpr size_t kInline = 32;
  std::array<int64_t, kInline> inline_stack;
  std::vector<int64_t> deep;  // only for nesting deeper than kInline
  size_t depth = 1;
  inline_stack[0] = 0;
  auto at = [&](size_t i) -> int64_t& { return i < kInline ? inline_stack[i] : deep[i - kInline]; };
  for (const Segment& s : segments) {
    if (s.kind == Segment::kInstructions) {
      at(depth - 1) += int64_t(s.end) - s.begin;
    } else if (s.kind == Segment::kBegin) {
      if (depth >= kInline) deep.resize(depth + 1 - kInline);
      at(depth++) = 0;
    } else {
      const int64_t body = at(--depth);
      if (depth == 0) return -1;
      at(depth - 1) += body * segments[s.match].count;
    }
  }
  return depth == 1 ? inline_stack[0] : -1;
}

namespace {
// `entries`: the flat positions where the enclosing repeats were entered, innermost last;
// `iteration`: the innermost one's iteration (0-based).
// Appends the walk of in.segments[first, last) to `out`, up to `limit` instructions in all.
void FlattenRange(const CoreProgram& in, size_t first, size_t last, std::vector<int64_t>* entries,
                  int64_t iteration, size_t limit, CoreProgram* out,
                  std::vector<int32_t>* scratch) {
  for (size_t i = first; i < last && out->instructions.size() < limit; ++i) {
    const Segment& s = in.segments[i];
    if (s.kind == Segment::kInstructions) {
      for (uint32_t t = s.begin; t < s.end && out->instructions.size() < limit; ++t) {
        const int32_t pos = int32_t(out->instructions.size());
        scratch->clear();
        const Instruction& tmpl = in.instructions[t];
        for (uint32_t j = tmpl.dep_begin; j < tmpl.dep_begin + tmpl.dep_count; ++j) {
          const int32_t d = in.deps[j];
          const AnchorForm form = in.FormOf(j);
          // < 0: invalid (before the start, or an anchor outside its repeats)
          if (d > 0) {
            scratch->push_back(pos - d);
          } else if (size_t(form.up) >= entries->size()) {
            scratch->push_back(-1);
          } else {
            const int64_t entry = (*entries)[entries->size() - 1 - size_t(form.up)];
            scratch->push_back(int32_t(entry + d + iteration * form.stride));
          }
        }
        out->instructions.push_back(in.instructions[t]);
        Instruction& inst = out->instructions.back();
        inst.dep_begin = uint32_t(out->deps.size());
        inst.dep_count = uint32_t(scratch->size());
        out->deps.insert(out->deps.end(), scratch->begin(), scratch->end());
      }
    } else if (s.kind == Segment::kBegin) {
      entries->push_back(int64_t(out->instructions.size()));
      for (int64_t r = 0; r < s.count && out->instructions.size() < limit; ++r) {
        FlattenRange(in, i + 1, s.match, entries, r, limit, out, scratch);
      }
      entries->pop_back();
      i = s.match;
    }
  }
}
}  // namespace

absl::StatusOr<Program> Flatten(const Program& program, int64_t max_per_core) {
  Program out;
  out.name = program.name;
  for (size_t c = 0; c < program.cores.size(); ++c) {
    const CoreProgram& core = program.cores[c];
    if (core.repeats_previous) {  // the flat form holds its own copy
      if (c == 0) return absl::InvalidArgumentError("the first core repeats no core");
      out.cores.push_back(out.cores.back());
      continue;
    }
    if (!core.compact()) {
      out.cores.push_back(core);
      continue;
    }
    const int64_t size = std::min(core.FlatSize(), max_per_core);
    if (size < 0 || size >= (int64_t(1) << 31)) {
      return absl::InvalidArgumentError(
          StrCat("cannot flatten a core of ", size, " instructions (unbalanced or too large)"));
    }
    CoreProgram flat;
    flat.allocations = core.allocations;
    flat.instructions.reserve(size_t(size));
    std::vector<int32_t> scratch;
    std::vector<int64_t> entries;
    FlattenRange(core, 0, core.segments.size(), &entries, 0, size_t(size), &flat, &scratch);
    for (int32_t d : flat.deps) {
      if (d < 0) {
        return absl::InvalidArgumentError("compact program: a dependency points before the start");
      }
    }
    out.cores.push_back(std::move(flat));
  }
  return out;
}

absl::Status ValidateProgram(const Target& target, const Program& program) {
  std::vector<bool> copies;
  return ValidateProgram(target, program, &copies);
}

absl::Status ValidateProgram(const Target& target, const Program& program,
                             std::vector<bool>* copies,
                             std::vector<std::vector<int32_t>>* same_operation) {
  copies->assign(program.cores.size(), false);
  if (same_operation != nullptr && same_operation->size() < program.cores.size()) {
    same_operation->resize(program.cores.size());
  }
  if (program.cores.empty()) return absl::InvalidArgumentError("program has no cores");
  for (const CoreProgram& core : program.cores) {
    if (core.instructions.size() >= kMaxCoreInstructions) {
      return absl::InvalidArgumentError(
          StrCat("the lowered program reaches ", kMaxCoreInstructions,
                 " instructions on a core, more than one trial simulates (larger tiles or a "
                 "smaller problem)"));
    }
  }
  if (int(program.cores.size()) > target.cores_per_chip) {
    return absl::InvalidArgumentError(StrCat("program uses ", program.cores.size(), " cores; ",
                                             target.name, " has ", target.cores_per_chip,
                                             " per chip"));
  }
  for (size_t c = 0; c < program.cores.size(); ++c) {
    const CoreProgram& core = program.cores[c];
    // A repeat or a copy of a valid core is valid (sharded kernels often run the same program on
    // every core).
    if (core.repeats_previous) {
      if (c == 0 || !core.instructions.empty() || !core.deps.empty() ||
          !core.anchor_forms.empty() || !core.allocations.empty() || !core.segments.empty()) {
        return absl::InvalidArgumentError(
            StrCat("core ", c, " repeats the previous core's program but ",
                   c == 0 ? "is the first core" : "has instructions of its own"));
      }
      (*copies)[c] = true;
      continue;
    }
    if (c > 0 && core == program.Source(c - 1)) {
      (*copies)[c] = true;
      continue;
    }
    // "core N", for messages only: built without allocating (this runs on every simulation).
    char where_text[32];
    const std::string_view where(
        where_text, size_t(std::snprintf(where_text, sizeof where_text, "core %zu", c)));
    if (!target.systolic) {
      TESSEL_RETURN_IF_ERROR(CheckAllocations(target, core, where));
    }
    // Whether each instruction's deps follow the one before's (as Add and AddCompact write
    // them): then a run of templates reads one contiguous range of deps.
    bool contiguous = true;
    uint64_t next_dep = 0;
    for (size_t t = 0; t < core.instructions.size(); ++t) {
      const Instruction& inst = core.instructions[t];
      if (uint64_t(inst.dep_begin) + inst.dep_count > core.deps.size()) {
        return absl::InvalidArgumentError(
            StrCat(where, ": instruction ", t, " has deps outside the dependency list"));
      }
      contiguous &= inst.dep_begin == next_dep;
      next_dep = uint64_t(inst.dep_begin) + inst.dep_count;
    }
    if (core.compact()) {
      if (!core.anchor_forms.empty() && core.anchor_forms.size() != core.deps.size()) {
        return absl::InvalidArgumentError(StrCat(where, ": anchor forms do not match the deps"));
      }
      int depth = 0;
      for (size_t i = 0; i < core.segments.size(); ++i) {
        const Segment& seg = core.segments[i];
        if (seg.kind == Segment::kBegin && seg.count < 1) {
          return absl::InvalidArgumentError(StrCat(where, ": a repeat runs ", seg.count, " times"));
        }
        depth += seg.kind == Segment::kBegin ? 1 : seg.kind == Segment::kEnd ? -1 : 0;
        if (seg.kind != Segment::kInstructions) continue;
        if (seg.begin > seg.end || seg.end > core.instructions.size()) {
          return absl::InvalidArgumentError(StrCat(where, ": segment outside the templates"));
        }
        // Deps need checking outside repeats (no anchors) and where anchor forms are.
        if (depth > 0 && core.anchor_forms.empty()) continue;
        // Without anchor forms, a run outside repeats only needs no anchor (< 0): one scan of its
        // deps, and the loop below only to report the first.
        if (core.anchor_forms.empty() && contiguous && seg.begin < seg.end) {
          const Instruction& last = core.instructions[seg.end - 1];
          const int32_t* d = core.deps.data();
          int32_t lowest = 0;
          for (uint32_t j = core.instructions[seg.begin].dep_begin;
               j < last.dep_begin + last.dep_count; ++j) {
            lowest = std::min(lowest, d[j]);
          }
          if (lowest == 0) continue;
        }
        for (uint32_t t = seg.begin; t < seg.end; ++t) {
          const Instruction& inst = core.instructions[t];
          for (uint32_t j = inst.dep_begin; j < inst.dep_begin + inst.dep_count; ++j) {
            const int32_t d = core.deps[j];
            const AnchorForm form = core.FormOf(j);
            if (d < 0 && depth == 0) {
              return absl::InvalidArgumentError(
                  StrCat(where, ": instruction template ", t,
                         " has an anchored dependency outside any repeat"));
            }
            if (form == AnchorForm{}) continue;
            if (d > 0) {
              return absl::InvalidArgumentError(
                  StrCat(where, ": instruction template ", t, " has a relative dependency (", d,
                         ") with an anchor form; only anchors (< 0) can be strided or count "
                         "from an enclosing repeat"));
            }
            if (form.up < 0 || form.up >= depth) {
              return absl::InvalidArgumentError(StrCat(where, ": instruction template ", t,
                                                       " has a dependency anchored to the repeat ",
                                                       form.up, " levels out, but it is inside ",
                                                       depth, depth == 1 ? " repeat" : " repeats"));
            }
            if (form.up > 0 && form.stride != 0) {
              return absl::InvalidArgumentError(
                  StrCat(where, ": instruction template ", t,
                         " has a strided dependency anchored to an enclosing repeat (a stride "
                         "counts the iterations of the innermost one)"));
            }
            const int32_t stride = form.stride;
            if (stride == 0) continue;
            const int64_t count = core.segments[EnclosingRepeat(core, i)].count;
            if (stride < 0 || -int64_t(d) <= (count - 1) * stride) {
              return absl::InvalidArgumentError(StrCat(
                  where, ": instruction template ", t, " has a strided dependency (", d,
                  ", stride ", stride, ") that does not stay before its repeat's entry over its ",
                  count, count == 1 ? " iteration" : " iterations"));
            }
          }
        }
      }
      if (core.FlatSize() < 0) {
        return absl::InvalidArgumentError(StrCat(where, ": unbalanced BeginRepeat/EndRepeat"));
      }
    }
    // Programs repeat a few distinct operations: one equal to an already checked one passes as
    // that one did, so only its deps are checked. `checked` remembers one checked instruction per
    // hash slot of a few distinguishing fields.
    std::array<int32_t, kOperationSlots> checked;
    checked.fill(-1);
    int32_t* same = nullptr;
    if (same_operation != nullptr) {
      (*same_operation)[c].resize(core.instructions.size());
      same = (*same_operation)[c].data();
    }
    // A compact core's deps are valid when none is 0: one pass over them all, so the loop below
    // checks each instruction's only when one is (to report the first as before).
    const bool deps_ok =
        core.compact() && std::find(core.deps.begin(), core.deps.end(), 0) == core.deps.end();
    for (size_t i = 0; i < core.instructions.size(); ++i) {
      if (!deps_ok) {
        TESSEL_RETURN_IF_ERROR(CheckDeps(core, int(i), where));
      }
      const Instruction& inst = core.instructions[i];
      int32_t& slot = checked[OperationSlot(inst)];
      if (slot >= 0 && SameOperation(inst, core.instructions[slot])) {
        if (same != nullptr) same[i] = slot;
        continue;
      }
      TESSEL_RETURN_IF_ERROR(CheckOperation(target, core, int(i), where));
      slot = int32_t(i);
      if (same != nullptr) same[i] = slot;
    }
  }
  return absl::OkStatus();
}

int64_t SbufBytesPerPartition(const CoreProgram& core) { return BytesIn(core, Mem::kSbuf); }
int64_t PsumBytesPerPartition(const CoreProgram& core) { return BytesIn(core, Mem::kPsum); }

}  // namespace tessel::sim

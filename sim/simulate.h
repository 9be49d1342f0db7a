// The simulator: runs a Program on a Target in integer ticks (model v2, docs/simulator.md).
//
// - Each compute engine (Tensor, Vector, Scalar, GpSimd) and each DMA queue of a core executes its
//   instructions in program order; an instruction starts when its resources are free and its
//   dependencies' results are available. Times are computed in program order as a max-plus
//   recurrence, so every time is non-decreasing in every duration (more bandwidth is never slower).
//   Depending on the instruction just before it on the same engine costs extra cycles.
// - TensorE loads the next stationary tile in the background while the previous matmul runs; a
//   matmul's result becomes visible to dependants only after the first-result latency 2R + C - 2.
// - A DMA transfer over P partitions is split into ceil(P / 8) pieces; each costs a fixed
//   per-transfer time plus its descriptors' bytes (descriptors under the minimum cost the minimum).
//   Each queue owns a fixed share of every DMA engine and of the core's HBM bandwidth (its fraction
//   of the core's DMA bytes); each core owns its fraction of the chip's HBM bandwidth.
// - On targets with port conflicts, Vector/GpSimd SBUF accesses and Vector/Scalar PSUM accesses
//   serialise (in program order).
// - Loop-structured programs (CoreProgram::segments) run without unrolling; once a repeated body's
//   schedule is periodic the remaining iterations are extrapolated exactly (SimOptions::exact
//   turns this off).
// - Systolic targets charge each GEMM the SCALE-Sim closed form (ACCELERATOR.md section 6).
#ifndef TESSEL_SIM_SIMULATE_H_
#define TESSEL_SIM_SIMULATE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/api.h"
#include "sim/program.h"
#include "sim/target.h"
#include "sim/trace.h"

namespace tessel::sim {

// Simulates `program` on `target`. Validates first (see ValidateProgram) and returns its
// InvalidArgument for an invalid program. Deterministic unless options.noise_sigma > 0, in which
// case time_ns (only) is scaled by a seeded factor 1 + sigma * N(0, 1) (clamped to >= 0.5).
// Thread-safe: each thread reuses its own buffers, so a call allocates nothing once the thread
// has simulated a program at least as large (sim/alloc_test.cc).
absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options = {});

// As Simulate, and appends one TraceEvent per instruction at a flat position below
// `trace_limit` on its core, in issue order, to `*trace` when it is not null (every iteration is
// then simulated; the result is the same).
absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options, std::vector<TraceEvent>* trace,
                                   int64_t trace_limit = std::numeric_limits<int64_t>::max());

// Simulates `program` and writes a Chrome trace-event JSON file of its first `limit` instructions
// per core to `path` (WriteTraceFile in sim/trace.h). Returns Simulate's error for an invalid
// program, Unavailable/DataLoss when the file cannot be written.
absl::Status WriteTrace(const Target& target, const Program& program, const SimOptions& options,
                        const std::string& path, int64_t limit = kDefaultTraceLimit);

// Cost of `inst` in cycles of its engine when issued back to back: for engine ops the
// ACCELERATOR.md table plus the fixed access overhead (x strided factor); for matmul
// max(min(64, M), N) x the dtype factor; for transpose max(P, min(64, F)); for systolic targets the
// closed form. Excludes dependency penalties, port waits, background loads and latency.
// Not meaningful for DMA instructions (see DmaPieceNs).
int64_t InstructionCycles(const Target& target, const Instruction& inst);

// TensorE cycles to load the stationary tile of `inst` in the background.
int64_t StationaryLoadCycles(const Target& target, const Instruction& inst);

// TensorE first-result latency 2R + C - 2 in Tensor cycles (0 for systolic targets, whose closed
// form already includes fill and drain).
int64_t FirstResultLatencyCycles(const Target& target);

// SCALE-Sim v2 cycle count of out[M, N] = A[M, K] x B[K, N] on an R x C array with `dataflow`,
// unlimited bandwidth: folds x (2R + C + T - 2) - 1 (ws, is) or folds x (R + C + T - 2) - 1 (os).
int64_t SystolicGemmCycles(int rows, int cols, Dataflow dataflow, int64_t m, int64_t n, int64_t k);

// Nanoseconds one DMA engine takes to move `partitions` partitions of `inst` at the engine rate,
// slowed by the transpose factor: its bytes (`padded` false: the engines' capacity it uses), or
// its descriptors each counted as at least dma_min_descriptor_bytes (`padded` true: how soon the
// piece completes, the per-descriptor cost overlapping other pieces' data).
double DmaDataNs(const Target& target, const Instruction& inst, int partitions, bool padded);

// The latency of one piece alone: the transfer's fixed cost (descriptor generation, paid by the
// queue, overlapping earlier transfers' data) plus its padded DmaDataNs. Ignores HBM contention.
double DmaPieceNs(const Target& target, const Instruction& inst, int partitions);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_SIMULATE_H_

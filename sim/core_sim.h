// One core's simulation in program order: the engine behind Simulate (sim/simulate.h), which
// computes the per-template costs and the whole-program results around it. Internal to sim/.
#ifndef TESSEL_SIM_CORE_SIM_H_
#define TESSEL_SIM_CORE_SIM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "sim/program.h"
#include "sim/target.h"
#include "sim/trace.h"

namespace tessel::sim {

// Per-template costs, computed once per simulation.
struct Cost {
  int64_t dur = 0;    // compute: busy ticks
  int64_t load = 0;   // matmul with reload: background stationary load ticks
  int64_t extra = 0;  // matmul: first-result latency ticks added to the result
  int8_t engine = 0;  // EngineKind
  int16_t queue = 0;  // DMA queue
  bool matmul = false, reload = false, vg = false, vs = false, hbm = false;
  // DMA: `pieces` pieces, the first n_lo of share lo partitions, the rest lo + 1.
  int16_t pieces = 0, n_lo = 0;
  // Ticks per piece charged to the queue (its data at the queue's share of the engines and of the
  // HBM bandwidth), and the ticks the piece takes itself (its data at the full rates).
  int64_t eng_lo = 0, eng_hi = 0, eng_full_lo = 0, eng_full_hi = 0;
  int64_t hbm_lo = 0, hbm_hi = 0, hbm_full_lo = 0, hbm_full_hi = 0;
};

// How CoreSimulator::Run runs one core.
struct CoreRun {
  bool exact = false;                         // simulate every iteration (no extrapolation)
  std::vector<TraceEvent>* trace = nullptr;   // when set, one event per instruction is appended
  int64_t trace_limit = 0;                    // for the instructions at flat positions below this
  int core_index = 0;                         // for the trace events
  int64_t fixed_ticks = 0;                    // a DMA transfer's descriptor cost, in ticks
  const std::atomic<bool>* cancel = nullptr;  // SimOptions::cancel
};

// Simulates one core's program. Every engine and DMA queue executes its instructions in program
// order, so each start time is a max over earlier results plus constants (a max-plus recurrence).
// One instance per thread is reused, so its buffers keep their capacity and a simulation
// allocates nothing once its thread has run one of the same size. Not thread-safe.
class CoreSimulator {
 public:
  CoreSimulator();
  ~CoreSimulator();
  CoreSimulator(const CoreSimulator&) = delete;
  CoreSimulator& operator=(const CoreSimulator&) = delete;

  // Simulates `core` on `target` with `costs` (one per template of `core`; both must outlive the
  // call). InvalidArgument when a dependency points before the start of the core.
  absl::Status Run(const Target& target, const CoreProgram& core, const std::vector<Cost>& costs,
                   const CoreRun& run);
  // After Run: the core's makespan in ticks, and each DMA queue's busy ticks.
  int64_t makespan() const;
  const std::vector<int64_t>& dma_busy() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::sim

#endif  // TESSEL_SIM_CORE_SIM_H_

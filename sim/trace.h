// Traces of a simulation: one event per executed instruction (Simulate with a trace, in
// sim/simulate.h), and a Chrome trace-event file of them (WriteTraceFile). Depends on no
// simulation code, so the engine (core_sim) can record events without a cycle.
#ifndef TESSEL_SIM_TRACE_H_
#define TESSEL_SIM_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/api.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::sim {

// One executed instruction, for traces. Track: 0-3 = Tensor, Vector, Scalar, GpSimd; 4 + q = DMA
// queue q (a transfer spans its first piece's start to its last piece's end).
struct TraceEvent {
  int core = 0;
  int track = 0;
  int32_t index = 0;  // instruction index within the core
  int64_t start_tick = 0;
  int64_t end_tick = 0;
};

// Writes a Chrome trace-event JSON file (opens in Perfetto or chrome://tracing) of `events`, which
// a simulation of `program` on `target` with result `result` recorded, to `path`: one process per
// core, one track per engine and per DMA queue, one complete event per instruction with its sizes
// and dependencies in args. Written to a temporary name and renamed. Unavailable/DataLoss when the
// file cannot be written. (sim::WriteTrace in simulate.h simulates and writes in one call.)
absl::Status WriteTraceFile(const Target& target, const Program& program, const SimResult& result,
                            const std::vector<TraceEvent>& events, const std::string& path);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_TRACE_H_

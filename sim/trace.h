// Traces of a simulation: one event per executed instruction (Simulate with a trace, in
// sim/simulate.h), and a Chrome trace-event file of them (WriteTrace).
#ifndef TESSEL_SIM_TRACE_H_
#define TESSEL_SIM_TRACE_H_

#include <cstdint>
#include <string>

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

// Simulates `program` and writes a Chrome trace-event JSON file (opens in Perfetto or
// chrome://tracing) to `path`: one process per core, one track per engine and per DMA queue, one
// complete event per instruction with its sizes and dependencies in args. Written to a temporary
// name and renamed. Returns Simulate's error for an invalid program, Unavailable/DataLoss when the
// file cannot be written.
absl::Status WriteTrace(const Target& target, const Program& program, const SimOptions& options,
                        const std::string& path);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_TRACE_H_

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

// Trace tracks 0-3 are the compute engines (EngineKind order); DMA queue q is track
// kNumComputeTracks + q.
inline constexpr int kNumComputeTracks = 4;

// One executed instruction, for traces. Track: 0-3 = Tensor, Vector, Scalar, GpSimd; 4 + q = DMA
// queue q (a transfer spans its first piece's start to its last piece's end).
struct TraceEvent {
  int core = 0;
  int track = 0;
  int32_t index = 0;  // the instruction's position in the core's flat (unrolled) order
  int64_t start_tick = 0;
  int64_t end_tick = 0;
  // The engine time it takes: end - start on a compute engine; for a transfer, its pieces' time
  // on the core's DMA engines (their share of it), so a core's events sum to SimResult's busy.
  double engine_ticks = 0;
};

// Instructions per core a trace keeps by default (the first ones in flat order): about 40 MB of
// JSON per core.
inline constexpr int64_t kDefaultTraceLimit = 250'000;

// Writes a Chrome trace-event JSON file (opens in Perfetto or chrome://tracing) of `events`, which
// a simulation of `program` on `target` with result `result` recorded for the first `limit`
// instructions of each core, to `path`: one process per core; one track per compute engine and
// per lane of each DMA queue (a queue overlaps its transfers, so each goes on the first lane free
// at its start and no two slices of a track overlap); one complete event per instruction with its
// flat index, sizes, engine time and dependencies (flat indices) in args. otherData holds the
// result and, when instructions were left out, "truncated". Streamed (memory grows with the events
// only), written to a temporary name and renamed. Unavailable/DataLoss when the file cannot be
// written. (sim::WriteTrace in simulate.h simulates and writes in one call.)
absl::Status WriteTraceFile(const Target& target, const Program& program, const SimResult& result,
                            const std::vector<TraceEvent>& events, int64_t limit,
                            const std::string& path);

// One core's engines over time, for pictures: the run split into `bins` equal spans and, per
// engine (tensor, vector, scalar, gpsimd, dma), the busy fraction of each span (DMA: of all the
// core's DMA engines, a transfer's engine time spread over its span).
struct Timeline {
  double span_ns = 0;                     // the traced run's length
  std::vector<std::string> engines;       // track names, EngineKind order
  std::vector<std::vector<double>> busy;  // [engine][bin], 0..1
};
Timeline BinTimeline(const Target& target, const std::vector<TraceEvent>& events, int core,
                     int bins);

}  // namespace tessel::sim

#endif  // TESSEL_SIM_TRACE_H_

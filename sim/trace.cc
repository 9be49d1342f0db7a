// Chrome trace-event files of a simulation (WriteTrace, sim/trace.h).
#include "sim/trace.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/simulate.h"

namespace tessel::sim {
namespace {

constexpr int kNumComputeEngines = 4;  // Tensor, Vector, Scalar, GpSimd

}  // namespace

absl::Status WriteTrace(const Target& target, const Program& program, const SimOptions& options,
                        const std::string& path) {
  std::vector<TraceEvent> events;
  TESSEL_ASSIGN_OR_RETURN(const SimResult result, Simulate(target, program, options, &events));
  const int queues_per_core = kNumComputeEngines + target.dma_queues;
  nlohmann::json trace_events = nlohmann::json::array();
  std::vector<bool> used(program.cores.size() * queues_per_core, false);
  for (const TraceEvent& e : events) used[e.core * queues_per_core + e.track] = true;
  for (size_t c = 0; c < program.cores.size(); ++c) {
    trace_events.push_back({{"ph", "M"},
                            {"name", "process_name"},
                            {"pid", c},
                            {"args", {{"name", StrCat("core ", c)}}}});
    for (int track = 0; track < queues_per_core; ++track) {
      if (!used[c * queues_per_core + track]) continue;
      std::string name = track < kNumComputeEngines
                             ? std::string(EngineName(EngineKind(track)))
                             : StrCat("dma queue ", track - kNumComputeEngines);
      trace_events.push_back({{"ph", "M"},
                              {"name", "thread_name"},
                              {"pid", c},
                              {"tid", track},
                              {"args", {{"name", name}}}});
      trace_events.push_back({{"ph", "M"},
                              {"name", "thread_sort_index"},
                              {"pid", c},
                              {"tid", track},
                              {"args", {{"sort_index", track}}}});
    }
  }
  const double us_per_tick = 1e-3 / target.tick_ghz;
  for (const TraceEvent& e : events) {
    const Instruction& inst = program.cores[e.core].instructions[e.index];
    nlohmann::json args = {{"index", e.index}};
    if (inst.op == Op::kMatmul) {
      args["k"] = inst.k, args["m"] = inst.m, args["n"] = inst.n;
      args["dtype"] = std::string(DTypeName(inst.dtype));
    } else if (inst.engine == EngineKind::kDma) {
      args["partitions"] = inst.partitions;
      args["bytes_per_partition"] = inst.bytes_per_partition;
    } else {
      args["partitions"] = inst.partitions;
      args["free"] = inst.free;
    }
    std::vector<int32_t> deps(program.cores[e.core].DepsOf(e.index).begin(),
                              program.cores[e.core].DepsOf(e.index).end());
    if (!deps.empty()) args["deps"] = deps;
    trace_events.push_back({{"ph", "X"},
                            {"name", std::string(OpName(inst.op))},
                            {"pid", e.core},
                            {"tid", e.track},
                            {"ts", e.start_tick * us_per_tick},
                            {"dur", (e.end_tick - e.start_tick) * us_per_tick},
                            {"args", args}});
  }
  nlohmann::json doc = {{"traceEvents", trace_events},
                        {"displayTimeUnit", "ns"},
                        {"otherData",
                         {{"target", target.name},
                          {"program", program.name},
                          {"time_ns", result.time_ns},
                          {"bound", result.bound}}}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::UnavailableError(StrCat("cannot write trace file ", tmp));
    out << doc.dump() << "\n";
    if (!out) return absl::DataLossError(StrCat("failed writing trace file ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(StrCat("cannot rename trace file to ", path));
  }
  return absl::OkStatus();
}

}  // namespace tessel::sim

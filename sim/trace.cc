// Chrome trace-event files of a simulation's events (WriteTraceFile, sim/trace.h).
#include "sim/trace.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::sim {
namespace {

// A DMA lane's trace thread id: 100 + queue * kLaneStride + lane (compute engines are 0-3).
constexpr int kLaneBase = 100;
constexpr int kLaneStride = 1000;

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

// Lays each core's transfers of one DMA queue on lanes: a transfer goes on the first lane whose
// slices all end by its start, so no two slices of a lane overlap.
class Lanes {
 public:
  explicit Lanes(int queues) : ends_(size_t(queues)) {}
  int Place(int queue, int64_t start, int64_t end) {
    std::vector<int64_t>& lanes = ends_[size_t(queue)];
    for (size_t l = 0; l < lanes.size(); ++l) {
      if (lanes[l] <= start) {
        lanes[l] = std::max(lanes[l], end);
        return int(l);
      }
    }
    lanes.push_back(end);
    return int(lanes.size() - 1);
  }
  int Count(int queue) const { return int(ends_[size_t(queue)].size()); }

 private:
  std::vector<std::vector<int64_t>> ends_;  // per queue, per lane, the latest end
};

void WriteArgs(std::FILE* out, const Instruction& inst, const TraceEvent& e, double ns_per_tick,
               std::span<const int32_t> deps) {
  std::fprintf(out, "{\"index\":%d,\"engine_ns\":%.3f", e.index, e.engine_ticks * ns_per_tick);
  if (inst.op == Op::kMatmul) {
    std::fprintf(out, ",\"k\":%d,\"m\":%d,\"n\":%d,\"dtype\":\"%s\"", inst.k, inst.m, inst.n,
                 std::string(DTypeName(inst.dtype)).c_str());
  } else if (inst.engine == EngineKind::kDma) {
    std::fprintf(out, ",\"queue\":%d,\"partitions\":%d,\"bytes_per_partition\":%lld", inst.queue,
                 inst.partitions, static_cast<long long>(inst.bytes_per_partition));
  } else {
    std::fprintf(out, ",\"partitions\":%d,\"free\":%d", inst.partitions, inst.free);
  }
  if (!deps.empty()) {
    std::fputs(",\"deps\":[", out);
    for (size_t i = 0; i < deps.size(); ++i) std::fprintf(out, "%s%d", i ? "," : "", deps[i]);
    std::fputc(']', out);
  }
  std::fputc('}', out);
}

void WriteMetadata(std::FILE* out, const char* kind, int pid, int tid, const std::string& name,
                   int sort_index) {
  const std::string quoted = nlohmann::json(name).dump();
  std::fprintf(out,
               ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}",
               kind, pid, tid, quoted.c_str());
  if (sort_index >= 0) {
    std::fprintf(out,
                 ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"sort_index\":%d}}",
                 pid, tid, sort_index);
  }
}

}  // namespace

Timeline BinTimeline(const Target& target, const std::vector<TraceEvent>& events, int core,
                     int bins) {
  Timeline t;
  bins = std::max(1, bins);
  int64_t end = 0;
  for (const TraceEvent& e : events) {
    if (e.core == core) end = std::max(end, e.end_tick);
  }
  t.span_ns = double(end) / target.tick_ghz;
  for (int e = 0; e < kNumEngines; ++e) t.engines.emplace_back(EngineName(EngineKind(e)));
  t.busy.assign(size_t(kNumEngines), std::vector<double>(size_t(bins), 0.0));
  if (end <= 0) return t;
  const double bin_ticks = double(end) / bins;
  const int dma = int(EngineKind::kDma);
  for (const TraceEvent& e : events) {
    if (e.core != core || e.end_tick <= e.start_tick) continue;
    const int row = e.track < kNumComputeTracks ? e.track : dma;
    // Busy ticks per tick of the event's span: 1 on a compute engine; a transfer's engine time
    // over its span, as a part of all the DMA engines.
    const double density =
        row == dma ? e.engine_ticks / double(e.end_tick - e.start_tick) / target.dma_engines : 1.0;
    const int first = std::min(bins - 1, int(double(e.start_tick) / bin_ticks));
    const int last = std::min(bins - 1, int(double(e.end_tick) / bin_ticks));
    for (int b = first; b <= last; ++b) {
      const double lo = std::max(double(e.start_tick), b * bin_ticks);
      const double hi = std::min(double(e.end_tick), (b + 1) * bin_ticks);
      if (hi > lo) t.busy[size_t(row)][size_t(b)] += density * (hi - lo) / bin_ticks;
    }
  }
  for (auto& row : t.busy) {
    for (double& v : row) v = std::min(v, 1.0);
  }
  return t;
}

absl::Status WriteTraceFile(const Target& target, const Program& program, const SimResult& result,
                            const std::vector<TraceEvent>& events, int64_t limit,
                            const std::string& path) {
  // The instructions and absolute deps of the traced prefix of each core.
  TESSEL_ASSIGN_OR_RETURN(const Program flat, Flatten(program, limit));
  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(tmp.c_str(), "w"));
  if (file == nullptr) return absl::UnavailableError(StrCat("cannot write trace file ", tmp));
  std::FILE* out = file.get();
  const double ns_per_tick = 1.0 / target.tick_ghz;
  const double us_per_tick = 1e-3 / target.tick_ghz;
  const size_t num_cores = program.cores.size();
  std::vector<Lanes> lanes(num_cores, Lanes(target.dma_queues));
  std::vector<std::array<bool, kNumComputeTracks>> used(num_cores);
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
  bool first = true;
  for (const TraceEvent& e : events) {
    const CoreProgram& core = flat.cores[size_t(e.core)];
    if (e.index < 0 || size_t(e.index) >= core.instructions.size()) {
      return absl::InternalError(StrCat("trace event for instruction ", e.index, " of core ",
                                        e.core, ", which has ", core.instructions.size()));
    }
    const Instruction& inst = core.instructions[size_t(e.index)];
    int tid = e.track;
    std::string_view engine;
    if (e.track < kNumComputeTracks) {
      used[size_t(e.core)][size_t(e.track)] = true;
      engine = EngineName(EngineKind(e.track));
    } else {
      const int q = e.track - kNumComputeTracks;
      tid = kLaneBase + q * kLaneStride + lanes[size_t(e.core)].Place(q, e.start_tick, e.end_tick);
      engine = EngineName(EngineKind::kDma);
    }
    std::fprintf(out,
                 "%s{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,"
                 "\"ts\":%.6f,\"dur\":%.6f,\"args\":",
                 first ? "" : ",\n", std::string(OpName(inst.op)).c_str(),
                 std::string(engine).c_str(), e.core, tid, double(e.start_tick) * us_per_tick,
                 double(e.end_tick - e.start_tick) * us_per_tick);
    WriteArgs(out, inst, e, ns_per_tick, core.DepsOf(e.index));
    std::fputc('}', out);
    first = false;
  }
  if (first) std::fputs("{\"ph\":\"M\",\"name\":\"trace_empty\",\"pid\":0,\"args\":{}}", out);
  // Track names, after the events (a trace's order does not matter to its readers).
  bool truncated = false;
  nlohmann::json instructions = nlohmann::json::array();
  for (size_t c = 0; c < num_cores; ++c) {
    const int64_t total = program.Source(c).FlatSize();
    instructions.push_back(total);
    truncated |= total > limit;
    WriteMetadata(out, "process_name", int(c), 0, StrCat("core ", c), -1);
    for (int t = 0; t < kNumComputeTracks; ++t) {
      if (used[c][size_t(t)]) {
        WriteMetadata(out, "thread_name", int(c), t, std::string(EngineName(EngineKind(t))), t);
      }
    }
    for (int q = 0; q < target.dma_queues; ++q) {
      for (int l = 0; l < lanes[c].Count(q); ++l) {
        const int tid = kLaneBase + q * kLaneStride + l;
        WriteMetadata(out, "thread_name", int(c), tid, StrCat("dma queue ", q, " lane ", l), tid);
      }
    }
  }
  nlohmann::json engines = nlohmann::json::object();
  for (int e = 0; e < kNumEngines; ++e) {
    engines[std::string(EngineName(EngineKind(e)))] = result.engines[size_t(e)].busy_frac;
  }
  const nlohmann::json other = {{"target", target.name},
                                {"program", program.name},
                                {"time_ns", result.time_ns},
                                {"bound", result.bound},
                                {"busy_frac", engines},
                                {"cores", num_cores},
                                {"dma_engines", target.dma_engines},
                                {"instructions", instructions},
                                {"trace_limit", limit},
                                {"truncated", truncated}};
  std::fprintf(out, "\n],\"otherData\":%s}\n", other.dump().c_str());
  if (std::ferror(out) != 0 || std::fflush(out) != 0) {
    return absl::DataLossError(StrCat("failed writing trace file ", tmp));
  }
  if (std::fclose(file.release()) != 0) {
    return absl::DataLossError(StrCat("failed writing trace file ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(StrCat("cannot rename trace file to ", path));
  }
  return absl::OkStatus();
}

}  // namespace tessel::sim

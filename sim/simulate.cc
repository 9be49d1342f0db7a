#include "sim/simulate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"

namespace tessel::sim {
namespace {

// A resource counts as the bottleneck when it is busy at least this share of the run; otherwise
// the program is latency-bound (dependency chains, fill/drain).
constexpr double kSaturatedFraction = 0.5;
constexpr int kNumComputeEngines = 4;  // Tensor, Vector, Scalar, GpSimd

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double DTypeFactor(const Target& target, DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return target.matmul_fp32_factor;
    case DType::kFp8:
      return target.matmul_fp8_factor > 0 ? target.matmul_fp8_factor : 1.0;
    default:
      return 1.0;
  }
}

// splitmix64: a tiny, portable generator so noise is identical on every platform.
uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Gaussian(uint64_t seed) {
  uint64_t state = seed;
  double u1 = (double(SplitMix(&state) >> 11) + 0.5) / double(1ULL << 53);
  double u2 = (double(SplitMix(&state) >> 11) + 0.5) / double(1ULL << 53);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

bool TouchesSbuf(const Instruction& inst) {
  return inst.in0 == Mem::kSbuf || inst.out == Mem::kSbuf ||
         (inst.op == Op::kTensorTensor && inst.in1 == Mem::kSbuf);
}
bool TouchesPsum(const Instruction& inst) {
  return inst.in0 == Mem::kPsum || inst.out == Mem::kPsum ||
         (inst.op == Op::kTensorTensor && inst.in1 == Mem::kPsum);
}

// Reusable buffers: one set per thread, grown on demand, never shrunk.
struct Scratch {
  std::vector<int32_t> remaining;    // deps not yet issued
  std::vector<int64_t> ready;        // max result tick of issued deps
  std::vector<int64_t> result;       // tick the instruction's result is available
  std::vector<uint32_t> rev_offset;  // dependants CSR
  std::vector<uint32_t> rev;
  std::vector<uint32_t> queue_of;      // queue id of each instruction
  std::vector<uint32_t> queue_offset;  // queue items CSR
  std::vector<uint32_t> queue_items;
  std::vector<uint32_t> queue_head;
  std::vector<uint32_t> queue_fill;
  std::vector<int64_t> queue_free;       // compute: engine free tick; DMA: last issue tick
  std::vector<int32_t> last_issued;      // per compute queue: global id of the last instruction
  std::vector<int64_t> dma_engine_free;  // per core x engine
  std::vector<std::pair<int64_t, uint32_t>> heap;
  std::vector<uint32_t> core_base;  // global id of each core's first instruction
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

struct CoreState {
  int64_t last_matmul_start = 0;
  int64_t last_load_end = 0;
  int64_t port_vg_sbuf_free = 0;  // Vector/GpSimd SBUF port
  int64_t port_vs_psum_free = 0;  // Vector/Scalar PSUM port
  double hbm_free = 0;            // the core's HBM share, in ticks
};

}  // namespace

int64_t FirstResultLatencyCycles(const Target& target) {
  if (target.systolic) return 0;
  return 2 * int64_t(target.pe_rows) + target.pe_cols - 2;
}

int64_t SystolicGemmCycles(int rows, int cols, Dataflow dataflow, int64_t m, int64_t n, int64_t k) {
  int64_t rows_dim, cols_dim, t;
  switch (dataflow) {
    case Dataflow::kOutputStationary:
      rows_dim = m, cols_dim = n, t = k;
      break;
    case Dataflow::kInputStationary:
      rows_dim = k, cols_dim = m, t = n;
      break;
    case Dataflow::kWeightStationary:
    default:
      rows_dim = k, cols_dim = n, t = m;
      break;
  }
  int64_t folds = CeilDiv(rows_dim, rows) * CeilDiv(cols_dim, cols);
  int64_t fill = dataflow == Dataflow::kOutputStationary ? rows : 2 * int64_t(rows);
  return folds * (fill + cols + t - 2) - 1;
}

int64_t InstructionCycles(const Target& target, const Instruction& inst) {
  if (target.systolic) {
    return SystolicGemmCycles(target.systolic_rows, target.systolic_cols, target.dataflow, inst.m,
                              inst.n, inst.k);
  }
  const int64_t min_ii = target.min_ii_cycles;
  const int64_t n = inst.free;
  int64_t cycles = 0;
  switch (inst.op) {
    case Op::kMatmul: {
      int64_t base = std::max<int64_t>(std::min<int64_t>(target.matmul_min_free, inst.m), inst.n);
      return int64_t(std::ceil(base * DTypeFactor(target, inst.dtype)));
    }
    case Op::kTranspose:
      return std::max<int64_t>(inst.partitions, std::min<int64_t>(target.matmul_min_free, n));
    case Op::kActivation:
    case Op::kTensorScalar:
    case Op::kTensorCopy:
    case Op::kBnStats:
    case Op::kMemset:
      cycles = std::max(min_ii, n);
      break;
    case Op::kTensorTensor: {
      bool one_in_psum = inst.in0 == Mem::kPsum || inst.in1 == Mem::kPsum;
      bool both_bf16_sbuf =
          inst.dtype == DType::kBf16 && inst.in0 == Mem::kSbuf && inst.in1 == Mem::kSbuf;
      cycles = std::max(min_ii, (one_in_psum || both_bf16_sbuf) ? n : 2 * n);
      break;
    }
    case Op::kTensorReduce:
      cycles = (inst.dtype == DType::kBf16 && inst.add_op) ? CeilDiv(n, 2) : n;
      break;
    case Op::kReciprocal:
      cycles = std::max(min_ii, 8 * n);
      break;
    case Op::kBnAggr:
      cycles = std::max(min_ii, CeilDiv(13 * n, 3));
      break;
    case Op::kIota:
      cycles = target.iota_base_cycles + n;
      break;
    case Op::kDmaLoad:
    case Op::kDmaStore:
    case Op::kDmaCopy:
      return 0;
  }
  if (inst.strided) cycles *= target.strided_cost_factor;
  return target.fixed_access_cycles + cycles;
}

int64_t StationaryLoadCycles(const Target& target, const Instruction& inst) {
  if (target.systolic || !inst.reload_stationary) return 0;
  double width = std::max<int64_t>(std::min<int64_t>(target.matmul_min_free, inst.m), inst.m);
  return int64_t(std::ceil(width * DTypeFactor(target, inst.dtype) /
                           std::max(1.0, target.stationary_load_speedup)));
}

double DmaPieceNs(const Target& target, const Instruction& inst, int partitions) {
  if (target.dma_gbps_per_engine <= 0) return 0;
  const int64_t bpp = inst.bytes_per_partition;
  const int64_t chunk = inst.chunk_bytes > 0 ? std::min<int64_t>(inst.chunk_bytes, bpp) : bpp;
  const int64_t min_desc = target.dma_min_descriptor_bytes;
  const int64_t full = bpp / chunk;
  const int64_t rest = bpp - full * chunk;
  int64_t effective = full * std::max(chunk, min_desc) + (rest > 0 ? std::max(rest, min_desc) : 0);
  double ns = double(effective) * partitions / target.dma_gbps_per_engine;
  if (inst.transpose) {
    double factor = inst.op == Op::kDmaCopy ? target.dma_transpose_factor_sbuf
                                            : target.dma_transpose_factor_hbm;
    if (factor > 0) ns /= factor;
  }
  return target.dma_fixed_ns + ns;
}

absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options) {
  return Simulate(target, program, options, nullptr);
}

absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options, std::vector<TraceEvent>* trace) {
  absl::Status valid = ValidateProgram(target, program);
  if (!valid.ok()) return valid;

  const int num_cores = int(program.cores.size());
  const int dma_queues = target.dma_queues;
  const int queues_per_core = kNumComputeEngines + dma_queues;
  const int num_queues = num_cores * queues_per_core;
  const int dma_engines = target.dma_engines;
  const double tick_ghz = target.tick_ghz;
  const int64_t latency_ticks =
      FirstResultLatencyCycles(target) * target.ticks_per_cycle[int(EngineKind::kTensor)];
  // HBM rates in bytes per tick; 0 = unlimited.
  const double core_rate = target.hbm_gbps_per_core > 0 ? target.hbm_gbps_per_core / tick_ghz : 0;
  const double chip_rate = target.hbm_gbps_per_chip > 0 ? target.hbm_gbps_per_chip / tick_ghz : 0;

  Scratch& s = ThreadScratch();
  s.core_base.assign(num_cores + 1, 0);
  for (int c = 0; c < num_cores; ++c) {
    s.core_base[c + 1] = s.core_base[c] + uint32_t(program.cores[c].instructions.size());
  }
  const uint32_t total = s.core_base[num_cores];
  s.remaining.assign(total, 0);
  s.ready.assign(total, 0);
  s.result.assign(total, 0);
  s.queue_of.assign(total, 0);
  s.rev_offset.assign(total + 1, 0);
  s.queue_offset.assign(num_queues + 1, 0);
  s.queue_head.assign(num_queues, 0);
  s.queue_fill.assign(num_queues, 0);
  s.queue_free.assign(num_queues, 0);
  s.last_issued.assign(num_queues, -1);
  s.dma_engine_free.assign(size_t(num_cores) * dma_engines, 0);
  s.heap.clear();

  // Queue membership, dependency counts and the dependants CSR.
  for (int c = 0; c < num_cores; ++c) {
    const CoreProgram& core = program.cores[c];
    const uint32_t base = s.core_base[c];
    for (uint32_t i = 0; i < core.instructions.size(); ++i) {
      const Instruction& inst = core.instructions[i];
      int local =
          inst.engine == EngineKind::kDma ? kNumComputeEngines + inst.queue : int(inst.engine);
      uint32_t q = uint32_t(c * queues_per_core + local);
      s.queue_of[base + i] = q;
      s.queue_offset[q + 1]++;
      s.remaining[base + i] = int32_t(inst.dep_count);
      for (int32_t d : core.DepsOf(int32_t(i))) s.rev_offset[base + d + 1]++;
    }
  }
  for (int q = 0; q < num_queues; ++q) s.queue_offset[q + 1] += s.queue_offset[q];
  for (uint32_t i = 0; i < total; ++i) s.rev_offset[i + 1] += s.rev_offset[i];
  s.queue_items.resize(total);
  s.rev.resize(s.rev_offset[total]);
  // rev_fill reuses `ready` temporarily (it is reset below).
  for (int c = 0; c < num_cores; ++c) {
    const CoreProgram& core = program.cores[c];
    const uint32_t base = s.core_base[c];
    for (uint32_t i = 0; i < core.instructions.size(); ++i) {
      uint32_t q = s.queue_of[base + i];
      s.queue_items[s.queue_offset[q] + s.queue_fill[q]++] = base + i;
      for (int32_t d : core.DepsOf(int32_t(i))) {
        uint32_t producer = base + d;
        s.rev[s.rev_offset[producer] + uint32_t(s.ready[producer]++)] = base + i;
      }
    }
  }
  std::fill(s.ready.begin(), s.ready.end(), 0);

  std::vector<CoreState> cores(num_cores);  // tiny; one allocation per call
  SimResult out;
  double hbm_chip_free = 0;
  int64_t dma_busy = 0;

  auto cmp = [](const std::pair<int64_t, uint32_t>& a, const std::pair<int64_t, uint32_t>& b) {
    return a > b;  // min-heap on (tick, queue)
  };
  auto push = [&](int64_t tick, uint32_t q) {
    s.heap.emplace_back(tick, q);
    std::push_heap(s.heap.begin(), s.heap.end(), cmp);
  };
  auto try_push = [&](uint32_t q) {
    uint32_t pos = s.queue_offset[q] + s.queue_head[q];
    if (pos >= s.queue_offset[q + 1]) return;
    uint32_t g = s.queue_items[pos];
    if (s.remaining[g] != 0) return;
    push(std::max(s.ready[g], s.queue_free[q]), q);
  };
  for (int q = 0; q < num_queues; ++q) try_push(uint32_t(q));

  int64_t makespan = 0;
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), cmp);
    auto [tick, q] = s.heap.back();
    s.heap.pop_back();
    const int c = int(q) / queues_per_core;
    const int local = int(q) % queues_per_core;
    const uint32_t g = s.queue_items[s.queue_offset[q] + s.queue_head[q]];
    const uint32_t base = s.core_base[c];
    const CoreProgram& core = program.cores[c];
    const Instruction& inst = core.instructions[g - base];
    CoreState& cs = cores[c];
    int64_t finish = 0;

    if (local < kNumComputeEngines) {
      const int tpc = target.ticks_per_cycle[local];
      int64_t start = std::max({tick, s.ready[g], s.queue_free[q]});
      const int32_t prev = s.last_issued[q];
      if (prev >= 0) {
        for (int32_t d : core.DepsOf(int32_t(g - base))) {
          if (base + uint32_t(d) == uint32_t(prev)) {
            start = std::max(start,
                             s.result[prev] + int64_t(target.same_engine_dependency_cycles) * tpc);
            break;
          }
        }
      }
      int64_t load_end = 0;
      if (inst.op == Op::kMatmul && inst.reload_stationary && !target.systolic) {
        int64_t load_start = std::max({s.ready[g], cs.last_matmul_start, cs.last_load_end});
        load_end = load_start + StationaryLoadCycles(target, inst) * tpc;
        start = std::max(start, load_end);
      }
      const EngineKind engine = inst.engine;
      const bool vg_port = target.port_conflict_vector_gpsimd_sbuf &&
                           (engine == EngineKind::kVector || engine == EngineKind::kGpSimd) &&
                           TouchesSbuf(inst);
      const bool vs_port = target.port_conflict_vector_scalar_psum &&
                           (engine == EngineKind::kVector || engine == EngineKind::kScalar) &&
                           TouchesPsum(inst);
      if (vg_port) start = std::max(start, cs.port_vg_sbuf_free);
      if (vs_port) start = std::max(start, cs.port_vs_psum_free);
      if (start > tick) {  // a shared resource moved it: retry in time order
        push(start, q);
        continue;
      }
      const int64_t duration = InstructionCycles(target, inst) * tpc;
      finish = start + duration;
      if (inst.op == Op::kMatmul) {
        cs.last_matmul_start = start;
        if (load_end > 0) cs.last_load_end = load_end;
      }
      if (vg_port) cs.port_vg_sbuf_free = finish;
      if (vs_port) cs.port_vs_psum_free = finish;
      s.queue_free[q] = finish;
      s.last_issued[q] = int32_t(g);
      out.engines[local].busy_ticks += duration;
      out.engines[local].instructions++;
      s.result[g] = finish + (inst.op == Op::kMatmul ? latency_ticks : 0);
      if (trace) trace->push_back({c, local, int32_t(g - base), start, finish});
    } else {
      // DMA: split over the earliest-free engines serving ceil(P / partitions_per_engine).
      const int ppe = target.dma_partitions_per_engine;
      const int pieces = std::min<int>(dma_engines, int(CeilDiv(inst.partitions, ppe)));
      int64_t* engine_free = &s.dma_engine_free[size_t(c) * dma_engines];
      int order[64];
      const int n_eng = std::min(dma_engines, 64);
      for (int e = 0; e < n_eng; ++e) order[e] = e;
      if (pieces < n_eng) {
        std::partial_sort(order, order + pieces, order + n_eng, [&](int a, int b) {
          return engine_free[a] != engine_free[b] ? engine_free[a] < engine_free[b] : a < b;
        });
      } else {
        std::sort(order, order + n_eng, [&](int a, int b) {
          return engine_free[a] != engine_free[b] ? engine_free[a] < engine_free[b] : a < b;
        });
      }
      const bool uses_hbm = inst.op != Op::kDmaCopy;
      const int64_t fixed_ticks = int64_t(std::llround(target.dma_fixed_ns * tick_ghz));
      int remaining_partitions = inst.partitions;
      int64_t first_start = std::numeric_limits<int64_t>::max();
      // Partitions are spread as evenly as possible over the pieces.
      for (int p = 0; p < pieces; ++p) {
        int share = remaining_partitions / (pieces - p);
        remaining_partitions -= share;
        const int e = order[p];
        const int64_t start = std::max(tick, engine_free[e]);
        first_start = std::min(first_start, start);
        int64_t end = start + int64_t(std::ceil(DmaPieceNs(target, inst, share) * tick_ghz));
        if (uses_hbm && (core_rate > 0 || chip_rate > 0)) {
          const double bytes = double(share) * double(inst.bytes_per_partition);
          double hbm_start = std::max({double(start + fixed_ticks), cs.hbm_free, hbm_chip_free});
          double core_done = core_rate > 0 ? hbm_start + bytes / core_rate : hbm_start;
          double chip_done = chip_rate > 0 ? hbm_start + bytes / chip_rate : hbm_start;
          cs.hbm_free = core_done;
          hbm_chip_free = chip_done;
          end = std::max(end, int64_t(std::ceil(std::max(core_done, chip_done))));
        }
        engine_free[e] = end;
        dma_busy += end - start;
        finish = std::max(finish, end);
      }
      if (uses_hbm) out.hbm_bytes += int64_t(inst.partitions) * inst.bytes_per_partition;
      s.queue_free[q] = tick;
      out.engines[int(EngineKind::kDma)].instructions++;
      s.result[g] = finish;
      if (trace) trace->push_back({c, local, int32_t(g - base), first_start, finish});
    }
    makespan = std::max(makespan, s.result[g]);

    // Release dependants whose last producer this was.
    for (uint32_t r = s.rev_offset[g]; r < s.rev_offset[g + 1]; ++r) {
      const uint32_t d = s.rev[r];
      s.ready[d] = std::max(s.ready[d], s.result[g]);
      if (--s.remaining[d] == 0) {
        const uint32_t dq = s.queue_of[d];
        if (dq != q && s.queue_items[s.queue_offset[dq] + s.queue_head[dq]] == d) try_push(dq);
      }
    }
    s.queue_head[q]++;
    try_push(q);
  }

  for (int q = 0; q < num_queues; ++q) {
    if (s.queue_offset[q] + s.queue_head[q] != s.queue_offset[q + 1]) {
      return absl::InternalError(
          StrCat("simulation deadlock: queue ", q, " did not drain (cyclic dependencies?)"));
    }
  }

  // Results.
  out.ticks = makespan;
  out.time_ns = double(makespan) / tick_ghz;
  const int tensor_tpc = target.ticks_per_cycle[int(EngineKind::kTensor)];
  out.tensor_cycles = CeilDiv(makespan, tensor_tpc);
  out.engines[int(EngineKind::kDma)].busy_ticks = dma_busy;
  for (int e = 0; e < kNumEngines; ++e) {
    double capacity = double(makespan) * num_cores * (e == int(EngineKind::kDma) ? dma_engines : 1);
    out.engines[e].busy_frac = capacity > 0 ? out.engines[e].busy_ticks / capacity : 0;
  }
  for (const CoreProgram& core : program.cores) {
    out.sbuf_peak_bytes = std::max(out.sbuf_peak_bytes, SbufBytesPerPartition(core));
    out.psum_peak_bytes = std::max(out.psum_peak_bytes, PsumBytesPerPartition(core));
  }
  double compute_ns = 0;
  for (const CoreProgram& core : program.cores) {
    for (const Instruction& inst : core.instructions) {
      if (inst.op != Op::kMatmul) continue;
      double peak = target.PeakTflops(inst.dtype);
      if (peak > 0) compute_ns += 2.0 * inst.k * double(inst.m) * inst.n / (peak * 1e3);
    }
  }
  compute_ns /= num_cores;
  const double hbm_gbps = target.HbmGbps(num_cores);
  const double hbm_ns = hbm_gbps > 0 ? out.hbm_bytes / hbm_gbps : 0;
  out.roofline_ns = std::max(compute_ns, hbm_ns);

  // Bound: the busiest resource if saturated, else latency.
  double best = 0;
  std::string_view bound = "latency";
  for (int e = 0; e < kNumEngines; ++e) {
    double use = out.engines[e].busy_frac;
    if (e == int(EngineKind::kDma) && out.time_ns > 0) use = std::max(use, hbm_ns / out.time_ns);
    if (use > best) {
      best = use;
      bound = EngineName(EngineKind(e));
    }
  }
  out.bound = std::string(best >= kSaturatedFraction ? bound : "latency");

  if (options.noise_sigma > 0) {
    double factor = 1.0 + options.noise_sigma * Gaussian(options.seed);
    out.time_ns *= std::max(0.5, factor);
  }
  return out;
}

}  // namespace tessel::sim

namespace tessel::sim {

absl::Status WriteTrace(const Target& target, const Program& program, const SimOptions& options,
                        const std::string& path) {
  std::vector<TraceEvent> events;
  absl::StatusOr<SimResult> result = Simulate(target, program, options, &events);
  if (!result.ok()) return result.status();
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
                          {"time_ns", result->time_ns},
                          {"bound", result->bound}}}};
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

#include "sim/simulate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/core_sim.h"

namespace tessel::sim {
namespace {

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

bool Half(DType d) { return d == DType::kBf16 || d == DType::kFp16; }

// VectorE's performance-mode multiplier for `inst` (trainium2_arch.rst, "Vector Engine
// Performance Mode"; the hardware engages it when the conditions hold): 1 when they do not.
int64_t VectorPerfMode(const Target& target, const Instruction& inst) {
  if (inst.engine != EngineKind::kVector || !Half(inst.dtype) || !Half(inst.out_dtype)) return 1;
  double factor = 1;
  if (inst.op == Op::kTensorCopy || inst.op == Op::kTensorScalar) {
    const bool sbuf = inst.in0 == Mem::kSbuf && inst.out == Mem::kSbuf;
    const bool one_psum = (inst.in0 == Mem::kPsum) != (inst.out == Mem::kPsum);
    if (sbuf && !inst.strided) {
      factor = target.vector_perf_contiguous;
    } else if (sbuf || (one_psum && !inst.strided)) {
      factor = target.vector_perf;
    }
  } else if (inst.op == Op::kTensorTensor && inst.in0 == Mem::kSbuf && inst.in1 == Mem::kSbuf) {
    factor = target.vector_perf;
  }
  return std::max<int64_t>(1, std::llround(factor));
}

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
      cycles = std::max(min_ii, CeilDiv(n, VectorPerfMode(target, inst)));
      break;
    case Op::kTensorTensor: {
      bool one_in_psum = inst.in0 == Mem::kPsum || inst.in1 == Mem::kPsum;
      bool both_bf16_sbuf =
          inst.dtype == DType::kBf16 && inst.in0 == Mem::kSbuf && inst.in1 == Mem::kSbuf;
      cycles = std::max(min_ii, CeilDiv((one_in_psum || both_bf16_sbuf) ? n : 2 * n,
                                        VectorPerfMode(target, inst)));
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

namespace {

// Bytes per partition that `inst`'s descriptors take engine time for, each descriptor counted
// as at least dma_min_descriptor_bytes when `padded`.
int64_t DescriptorBytes(const Target& target, const Instruction& inst, bool padded) {
  const int64_t bpp = inst.bytes_per_partition;
  const int64_t chunk = inst.chunk_bytes > 0 ? std::min<int64_t>(inst.chunk_bytes, bpp) : bpp;
  const int64_t min_desc = padded ? target.dma_min_descriptor_bytes : 0;
  const int64_t full = bpp / chunk;
  const int64_t rest = bpp - full * chunk;
  return full * std::max(chunk, min_desc) + (rest > 0 ? std::max(rest, min_desc) : 0);
}

// The engine-time multiplier of a transpose (1 for a plain transfer); index of the kind.
int TransposeKind(const Instruction& inst) {
  return !inst.transpose ? 0 : inst.op == Op::kDmaCopy ? 2 : 1;
}
double TransposeSlowdown(const Target& target, int kind) {
  const double factor = kind == 0   ? 1.0
                        : kind == 2 ? target.dma_transpose_factor_sbuf
                                    : target.dma_transpose_factor_hbm;
  return factor > 0 ? 1.0 / factor : 1.0;
}

}  // namespace

double DmaDataNs(const Target& target, const Instruction& inst, int partitions, bool padded) {
  if (target.dma_gbps_per_engine <= 0) return 0;
  return double(DescriptorBytes(target, inst, padded)) * partitions / target.dma_gbps_per_engine *
         TransposeSlowdown(target, TransposeKind(inst));
}

double DmaPieceNs(const Target& target, const Instruction& inst, int partitions) {
  return target.dma_fixed_ns + DmaDataNs(target, inst, partitions, /*padded=*/true);
}

absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options) {
  return Simulate(target, program, options, nullptr);
}

namespace {

// How many times each template of `core` executes (`factor`: scratch).
void Multiplicities(const CoreProgram& core, std::vector<int64_t>* mult,
                    std::vector<int64_t>* scratch) {
  mult->assign(core.instructions.size(), core.compact() ? 0 : 1);
  if (!core.compact()) return;
  std::vector<int64_t>& factor = *scratch;
  factor.assign(1, 1);
  for (const Segment& s : core.segments) {
    if (s.kind == Segment::kBegin) {
      factor.push_back(factor.back() * s.count);
    } else if (s.kind == Segment::kEnd) {
      factor.pop_back();
    } else {
      for (uint32_t t = s.begin; t < s.end; ++t) (*mult)[t] += factor.back();
    }
  }
}

// Buffers of one thread's simulations, reused so that repeated calls do not allocate.
struct Scratch {
  std::vector<bool> copies;                          // core c runs the same program as core c - 1
  std::vector<std::vector<int32_t>> same_operation;  // from ValidateProgram
  std::vector<std::vector<int64_t>> mult;
  std::vector<std::vector<int64_t>> dma_kind_bytes;  // per queue and TransposeKind
  std::vector<std::vector<double>> dma_demand, hbm_bytes;
  std::vector<double> core_dma, core_hbm;
  std::vector<int64_t> factor;
  std::vector<Cost> costs;
  CoreSimulator sim;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Target& target, const Program& program,
                                   const SimOptions& options, std::vector<TraceEvent>* trace,
                                   int64_t trace_limit) {
  thread_local Scratch scratch;
  std::vector<bool>& copies = scratch.copies;
  TESSEL_RETURN_IF_ERROR(ValidateProgram(target, program, &copies, &scratch.same_operation));

  const int num_cores = int(program.cores.size());
  const int nq = target.dma_queues;
  const double tick_ghz = target.tick_ghz;
  const int64_t latency_ticks =
      FirstResultLatencyCycles(target) * target.ticks_per_cycle[int(EngineKind::kTensor)];
  const int64_t fixed_ticks = int64_t(std::llround(target.dma_fixed_ns * tick_ghz));

  // Static load per core and queue. A queue's share of the engines is its part of the core's
  // engine time (the bytes it moves, slowed by transposes; descriptor padding is not capacity),
  // its share of the HBM its
  // part of the HBM bytes: when every queue streams, a pool whose idle engines serve any waiting
  // queue finishes each queue's work in the same time as these shares do.
  auto& mult = scratch.mult;
  auto& dma_kind_bytes = scratch.dma_kind_bytes;
  auto& dma_demand = scratch.dma_demand;
  auto& hbm_bytes = scratch.hbm_bytes;
  if (int(mult.size()) < num_cores) {
    mult.resize(num_cores);
    dma_kind_bytes.resize(num_cores);
    dma_demand.resize(num_cores);
    hbm_bytes.resize(num_cores);
  }
  for (int c = 0; c < num_cores; ++c) {
    dma_kind_bytes[c].assign(size_t(nq) * 3, 0);
    dma_demand[c].assign(nq, 0.0);
    hbm_bytes[c].assign(nq, 0.0);
  }
  std::vector<double>& core_dma = scratch.core_dma;
  std::vector<double>& core_hbm = scratch.core_hbm;
  core_dma.assign(num_cores, 0.0);
  core_hbm.assign(num_cores, 0.0);
  double chip_hbm = 0;
  SimResult out;
  int64_t flops[kNumDTypes] = {};  // exact, so the sum does not depend on program form
  // The last counted core's part of the totals, added again for each copy of it.
  int64_t core_instructions[kNumEngines] = {};
  int64_t core_flops[kNumDTypes] = {};
  int64_t core_hbm_bytes = 0;
  for (int c = 0; c < num_cores; ++c) {
    const CoreProgram& core = program.Source(c);
    if (c > 0 && copies[c]) {  // the previous core's program (ValidateProgram), so its load
      mult[c] = mult[c - 1];
      dma_kind_bytes[c] = dma_kind_bytes[c - 1];
      dma_demand[c] = dma_demand[c - 1];
      hbm_bytes[c] = hbm_bytes[c - 1];
      core_dma[c] = core_dma[c - 1];
      core_hbm[c] = core_hbm[c - 1];
    } else {
      std::fill(core_instructions, core_instructions + kNumEngines, 0);
      std::fill(core_flops, core_flops + kNumDTypes, 0);
      core_hbm_bytes = 0;
      Multiplicities(core, &mult[c], &scratch.factor);
      for (size_t t = 0; t < core.instructions.size(); ++t) {
        const Instruction& inst = core.instructions[t];
        const int64_t n = mult[c][t];
        if (n == 0) continue;
        core_instructions[int(inst.engine)] += n;
        if (inst.engine == EngineKind::kDma) {
          const double bytes = double(inst.partitions) * double(inst.bytes_per_partition) * n;
          // Summed exactly (bytes by transpose kind), so a share does not depend on program form.
          dma_kind_bytes[c][size_t(inst.queue) * 3 + size_t(TransposeKind(inst))] +=
              DescriptorBytes(target, inst, false) * inst.partitions * n;
          if (inst.op != Op::kDmaCopy) {
            hbm_bytes[c][inst.queue] += bytes;  // integers below 2^53: exact
            core_hbm[c] += bytes;
            core_hbm_bytes += int64_t(inst.partitions) * inst.bytes_per_partition * n;
          }
        } else if (inst.op == Op::kMatmul) {
          core_flops[int(inst.dtype)] += 2 * int64_t(inst.k) * inst.m * inst.n * n;
        }
      }
      for (int q = 0; q < nq; ++q) {
        for (int kind = 0; kind < 3; ++kind) {
          dma_demand[c][q] += double(dma_kind_bytes[c][size_t(q) * 3 + size_t(kind)]) *
                              TransposeSlowdown(target, kind);
        }
        core_dma[c] += dma_demand[c][q];
      }
    }
    for (int e = 0; e < kNumEngines; ++e) out.engines[e].instructions += core_instructions[e];
    for (int d = 0; d < kNumDTypes; ++d) flops[d] += core_flops[d];
    out.hbm_bytes += core_hbm_bytes;
    chip_hbm += core_hbm[c];
  }
  const double chip_gbps = target.HbmGbps(num_cores);
  // The chip's HBM bytes at its bandwidth: no core that moves HBM bytes finishes sooner.
  const int64_t hbm_floor_ticks =
      chip_gbps > 0 ? int64_t(std::ceil(chip_hbm / chip_gbps * tick_ghz)) : 0;

  int64_t makespan = 0;
  double dma_busy = 0, core_dma_busy = 0;
  int64_t core_busy[kNumEngines] = {};  // compute busy ticks of the last simulated core
  std::vector<Cost>& costs = scratch.costs;
  for (int c = 0; c < num_cores; ++c) {
    const CoreProgram& core = program.Source(c);
    // A core with the same program as the previous one has the same shares of the DMA engines
    // and of the chip's HBM (both follow its bytes), so the same schedule: reuse it.
    if (c > 0 && trace == nullptr && copies[c]) {
      dma_busy += core_dma_busy;
      for (int e = 0; e < kNumEngines; ++e) out.engines[e].busy_ticks += core_busy[e];
      continue;
    }
    std::fill(core_busy, core_busy + kNumEngines, 0);
    costs.assign(core.instructions.size(), Cost{});
    // A template that is the SameOperation as an earlier one (found by ValidateProgram) has its
    // cost: it depends on the instruction, the target and the core's DMA shares only.
    // (A copied core, simulated for a trace, has the vector of the core it copies.)
    int checked = c;
    while (checked > 0 && copies[checked]) --checked;
    const int32_t* same = scratch.same_operation[checked].data();
    for (size_t t = 0; t < core.instructions.size(); ++t) {
      const Instruction& inst = core.instructions[t];
      Cost& k = costs[t];
      if (size_t(same[t]) != t) {
        k = costs[size_t(same[t])];
        if (inst.engine != EngineKind::kDma && mult[c][t] > 0) {
          core_busy[int(inst.engine)] += k.dur * mult[c][t];
        }
        continue;
      }
      k.engine = int8_t(inst.engine);
      if (inst.engine != EngineKind::kDma) {
        const int tpc = target.ticks_per_cycle[int(inst.engine)];
        k.dur = InstructionCycles(target, inst) * tpc;
        k.matmul = inst.op == Op::kMatmul;
        k.reload = k.matmul && inst.reload_stationary && !target.systolic;
        if (k.reload) k.load = StationaryLoadCycles(target, inst) * tpc;
        if (k.matmul) k.extra = latency_ticks;
        k.vg = target.port_conflict_vector_gpsimd_sbuf &&
               (inst.engine == EngineKind::kVector || inst.engine == EngineKind::kGpSimd) &&
               TouchesSbuf(inst);
        k.vs = target.port_conflict_vector_scalar_psum &&
               (inst.engine == EngineKind::kVector || inst.engine == EngineKind::kScalar) &&
               TouchesPsum(inst);
        if (mult[c][t] > 0) core_busy[int(inst.engine)] += k.dur * mult[c][t];
        continue;
      }
      const int q = inst.queue;
      k.queue = int16_t(q);
      k.hbm = inst.op != Op::kDmaCopy && chip_gbps > 0;
      const int ppe = target.dma_partitions_per_engine;
      k.pieces = int16_t(std::min<int>(target.dma_engines, int(CeilDiv(inst.partitions, ppe))));
      const int lo = inst.partitions / k.pieces;
      k.n_lo = int16_t(k.pieces - inst.partitions % k.pieces);
      // The queue's share of every DMA engine: its part of the core's DMA engine time. A piece
      // holds its engine for its data only; the transfer's fixed cost (descriptor generation) is
      // paid by the queue before the data moves and overlaps the previous transfer's data. The
      // per-descriptor cost (descriptors under dma_min_descriptor_bytes take as long as one of
      // that size) overlaps other pieces' data: it bounds how fast the piece itself completes,
      // while the engines' shared capacity is spent on the bytes moved.
      const double share = core_dma[c] > 0 ? dma_demand[c][q] / core_dma[c] : 1.0;
      auto eng_ticks = [&](int parts, bool padded, double at) {
        if (parts <= 0) return int64_t(0);
        const double data = DmaDataNs(target, inst, parts, padded);
        return int64_t(std::ceil(data / std::max(at, 1e-12) * tick_ghz));
      };
      k.eng_lo = eng_ticks(lo, false, share);
      k.eng_hi = eng_ticks(lo + 1, false, share);
      k.eng_full_lo = eng_ticks(lo, true, 1.0);
      k.eng_full_hi = eng_ticks(lo + 1, true, 1.0);
      if (k.hbm) {
        // Bytes per tick for this queue: the chip's HBM split by HBM bytes over cores and queues.
        // At full rate: the core's part of the chip's HBM bytes.
        const double rate = chip_gbps / tick_ghz * (hbm_bytes[c][q] / chip_hbm);
        const double full = chip_gbps / tick_ghz * (core_hbm[c] / chip_hbm);
        auto hbm_ticks = [&](int parts, double r) {
          return int64_t(std::ceil(double(parts) * double(inst.bytes_per_partition) / r));
        };
        k.hbm_lo = hbm_ticks(lo, rate);
        k.hbm_hi = hbm_ticks(lo + 1, rate);
        k.hbm_full_lo = hbm_ticks(lo, full);
        k.hbm_full_hi = hbm_ticks(lo + 1, full);
      }
    }
    CoreSimulator& sim = scratch.sim;
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError("simulation cancelled");
    }
    const size_t first_event = trace != nullptr ? trace->size() : 0;
    TESSEL_RETURN_IF_ERROR(sim.Run(target, core, costs,
                                   {.exact = options.exact || trace != nullptr,
                                    .trace = trace,
                                    .trace_limit = trace_limit,
                                    .core_index = c,
                                    .fixed_ticks = fixed_ticks,
                                    .cancel = options.cancel}));
    makespan = std::max(makespan, sim.makespan());
    // Borrowing lets each queue's last transfers run at the full rates (CoreSim), so a run's tail
    // may beat the shares by up to a transfer per queue; the core is never faster than its bytes
    // at the chip's HBM bandwidth (its part of it) and its engine time over all the engines.
    if (core_hbm[c] > 0) makespan = std::max(makespan, hbm_floor_ticks);
    if (target.dma_gbps_per_engine > 0) {
      const double engines_gbps = target.dma_gbps_per_engine * target.dma_engines;
      makespan = std::max(makespan, int64_t(std::ceil(core_dma[c] / engines_gbps * tick_ghz)));
    }
    core_dma_busy = 0;
    for (int q = 0; q < nq; ++q) {
      const double share = core_dma[c] > 0 ? dma_demand[c][q] / core_dma[c] : 0.0;
      core_dma_busy += share * double(sim.dma_busy()[q]);
    }
    for (size_t i = first_event; trace != nullptr && i < trace->size(); ++i) {
      TraceEvent& event = (*trace)[i];
      const int q = event.track - kNumComputeTracks;
      if (q >= 0) event.engine_ticks *= core_dma[c] > 0 ? dma_demand[c][q] / core_dma[c] : 0.0;
    }
    dma_busy += core_dma_busy;
    for (int e = 0; e < kNumEngines; ++e) out.engines[e].busy_ticks += core_busy[e];
  }

  // Results.
  out.ticks = makespan;
  out.time_ns = double(makespan) / tick_ghz;
  const int tensor_tpc = target.ticks_per_cycle[int(EngineKind::kTensor)];
  out.tensor_cycles = CeilDiv(makespan, tensor_tpc);
  out.engines[int(EngineKind::kDma)].busy_ticks = int64_t(std::llround(dma_busy));
  for (int e = 0; e < kNumEngines; ++e) {
    double capacity =
        double(makespan) * num_cores * (e == int(EngineKind::kDma) ? target.dma_engines : 1);
    out.engines[e].busy_frac = capacity > 0 ? out.engines[e].busy_ticks / capacity : 0;
  }
  for (const CoreProgram& core : program.cores) {
    out.sbuf_peak_bytes = std::max(out.sbuf_peak_bytes, SbufBytesPerPartition(core));
    out.psum_peak_bytes = std::max(out.psum_peak_bytes, PsumBytesPerPartition(core));
  }
  double flops_ns = 0;
  for (int d = 0; d < kNumDTypes; ++d) {
    const double peak = target.PeakTflops(DType(d));
    if (peak > 0 && flops[d] > 0) flops_ns += double(flops[d]) / (peak * 1e3);
  }
  const double compute_ns = flops_ns / num_cores;
  const double hbm_ns = chip_gbps > 0 ? out.hbm_bytes / chip_gbps : 0;
  out.issued_roofline_ns = std::max(compute_ns, hbm_ns);
  out.roofline_ns = out.issued_roofline_ns;  // kernels::Evaluate sets the problem's minimum

  // Bound: the busiest resource if it explains the run time (kBoundBusyFraction), else latency.
  std::array<SimResult::Busy, kNumEngines> use{};
  for (int e = 0; e < kNumEngines; ++e) {
    use[e] = {EngineKind(e), out.engines[e].busy_frac};
    if (e == int(EngineKind::kDma) && out.time_ns > 0) {
      use[e].busy_frac = std::max(use[e].busy_frac, hbm_ns / out.time_ns);
    }
  }
  // Ties by engine order. (std::sort: stable_sort may allocate a buffer.)
  std::sort(use.begin(), use.end(), [](const auto& a, const auto& b) {
    return a.busy_frac > b.busy_frac || (a.busy_frac == b.busy_frac && a.resource < b.resource);
  });
  std::copy(use.begin(), use.begin() + out.busiest.size(), out.busiest.begin());
  out.bound = use[0].busy_frac >= kBoundBusyFraction ? EngineName(use[0].resource) : "latency";

  if (options.noise_sigma > 0) {
    double factor = 1.0 + options.noise_sigma * Gaussian(options.seed);
    out.time_ns *= std::max(0.5, factor);
  }
  return out;
}

absl::Status WriteTrace(const Target& target, const Program& program, const SimOptions& options,
                        const std::string& path, int64_t limit) {
  std::vector<TraceEvent> events;
  TESSEL_ASSIGN_OR_RETURN(const SimResult result,
                          Simulate(target, program, options, &events, limit));
  return WriteTraceFile(target, program, result, events, limit, path);
}

}  // namespace tessel::sim

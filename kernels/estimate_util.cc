#include "kernels/estimate_util.h"

#include <algorithm>
#include <cmath>

#include "kernels/schedule_util.h"
#include "sim/simulate.h"

namespace tessel::kernels {

double EngineNs(const sim::Target& target, const sim::Instruction& inst, double count) {
  int64_t cycles = sim::InstructionCycles(target, inst);
  if (inst.op == sim::Op::kMatmul) {
    cycles = std::max(cycles, sim::StationaryLoadCycles(target, inst));
  }
  const double ticks = double(cycles) * target.ticks_per_cycle[int(inst.engine)];
  return count * ticks / target.tick_ghz;
}

namespace {

// The pieces a transfer over `partitions` partitions is split into (as the simulator splits it).
struct Pieces {
  int count = 1, n_lo = 1, lo = 1;
};
Pieces Split(const sim::Target& target, int partitions) {
  Pieces p;
  const int ppe = std::max(1, target.dma_partitions_per_engine);
  p.count = std::max(1, std::min<int>(target.dma_engines, int(CeilDiv(partitions, ppe))));
  p.lo = partitions / p.count;
  p.n_lo = p.count - partitions % p.count;
  return p;
}

}  // namespace

void DmaLoad::Add(const sim::Target& target, const sim::Instruction& inst, double count) {
  if (count <= 0) return;
  Queue& q = q_[size_t(std::clamp<int>(inst.queue, 0, kMaxQueues - 1))];
  const double bytes = double(inst.partitions) * double(inst.bytes_per_partition) * count;
  q.bytes += bytes;
  total_bytes_ += bytes;
  if (inst.op != sim::Op::kDmaCopy) {
    q.hbm_bytes += bytes;
    hbm_bytes_ += bytes;
  }
  const double data = sim::DmaDataNs(target, inst, inst.partitions, false) * count;
  q.fixed_ns += count * target.dma_fixed_ns;
  q.data_ns += data;
  q.padded_ns += sim::DmaDataNs(target, inst, inst.partitions, true) * count;
  total_data_ns_ += data;
}

double DmaLoad::HbmNs(const sim::Target& target, int cores) const {
  const double chip = target.HbmGbps(cores);
  return chip > 0 ? hbm_bytes_ * cores / chip : 0;
}

double DmaLoad::QueueNs(const sim::Target& target, int cores, int queue) const {
  const Queue& q = q_[size_t(queue)];
  if (q.bytes <= 0) return 0;
  // At its share of the engines every queue's data takes the core's data time over the engines;
  // its descriptors are generated one transfer after another, overlapping that data.
  const double engines = std::max(1, target.dma_engines);
  const double eng = std::max(
      {q.fixed_ns, q.padded_ns / engines, (q.data_ns > 0 ? total_data_ns_ : 0.0) / engines});
  return std::max(eng, q.hbm_bytes > 0 ? HbmNs(target, cores) : 0.0);
}

double DmaLoad::QueueNs(const sim::Target& target, int cores) const {
  double worst = 0;
  for (int q = 0; q < kMaxQueues; ++q) worst = std::max(worst, QueueNs(target, cores, q));
  return worst;
}

double DmaLoad::BurstNs(const sim::Target& target, int cores, const sim::Instruction& inst,
                        double count) const {
  const Queue& q = q_[size_t(std::clamp<int>(inst.queue, 0, kMaxQueues - 1))];
  if (q.bytes <= 0 || count <= 0) return 0;
  const double share = total_data_ns_ > 0 ? q.data_ns / total_data_ns_ : 1.0;
  const Pieces p = Split(target, inst.partitions);
  const int parts = p.count > p.n_lo ? p.lo + 1 : p.lo;
  const double data = sim::DmaDataNs(target, inst, parts, false);
  const double padded = sim::DmaDataNs(target, inst, parts, true);
  const double waves = std::ceil(count * p.count / std::max(1, target.dma_engines));
  // The queue generates the transfers' descriptors one after another; the last one's data moves
  // after its descriptors (at the full rate: a piece alone on an idle engine).
  const double eng =
      target.dma_fixed_ns + std::max({waves * data / std::max(share, 1e-12), waves * padded,
                                      (count - 1) * target.dma_fixed_ns + data});
  const double chip = target.HbmGbps(cores);
  double hbm = 0;
  if (chip > 0 && q.hbm_bytes > 0) {
    const double rate = chip / cores * (q.hbm_bytes / hbm_bytes_);  // bytes per ns
    hbm = target.dma_fixed_ns +
          count * double(inst.partitions) * double(inst.bytes_per_partition) / rate;
  }
  return std::max(eng, hbm);
}

double DmaLoad::LatencyNs(const sim::Target& target, const sim::Instruction& inst) {
  const Pieces p = Split(target, inst.partitions);
  const double piece = sim::DmaPieceNs(target, inst, p.count > p.n_lo ? p.lo + 1 : p.lo);
  const double rate = target.HbmGbps(1);
  const double bytes = double(inst.partitions) * double(inst.bytes_per_partition);
  const double hbm =
      rate > 0 && inst.op != sim::Op::kDmaCopy ? target.dma_fixed_ns + bytes / rate : 0.0;
  return std::max(piece, hbm);
}

int32_t CountingCore::Add(const sim::Instruction& inst, std::span<const int32_t>) {
  if (inst.engine == sim::EngineKind::kDma) {
    dma_.Add(*target_, inst, weight_);
    return count_++;
  }
  const double ns = EngineNs(*target_, inst, weight_);
  engine_ns_[int(inst.engine)] += ns;
  auto touches = [&](sim::Mem m) {
    return inst.in0 == m || inst.out == m || (inst.op == sim::Op::kTensorTensor && inst.in1 == m);
  };
  const sim::EngineKind e = inst.engine;
  if (target_->port_conflict_vector_scalar_psum &&
      (e == sim::EngineKind::kVector || e == sim::EngineKind::kScalar) &&
      touches(sim::Mem::kPsum)) {
    psum_port_ns_ += ns;
  }
  if (target_->port_conflict_vector_gpsimd_sbuf &&
      (e == sim::EngineKind::kVector || e == sim::EngineKind::kGpSimd) &&
      touches(sim::Mem::kSbuf)) {
    sbuf_port_ns_ += ns;
  }
  return count_++;
}

double CountingCore::ComputeNs() const {
  double bound = std::max(psum_port_ns_, sbuf_port_ns_);
  for (double ns : engine_ns_) bound = std::max(bound, ns);
  return bound;
}

double CountingCore::BoundNs(int cores) const {
  return std::max(ComputeNs(), dma_.QueueNs(*target_, cores));
}

}  // namespace tessel::kernels

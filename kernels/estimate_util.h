// Building blocks of the kernels' analytic time estimates (Space::Estimate): per-resource busy
// times summed from instruction counts, with every cost taken from the simulator's own cost
// functions (sim/simulate.h) and so from the target's numbers. No simulation: a kernel counts how
// many instructions of each kind its schedule issues and adds them here.
#ifndef TESSEL_KERNELS_ESTIMATE_UTIL_H_
#define TESSEL_KERNELS_ESTIMATE_UTIL_H_

#include <array>
#include <cstdint>

#include "sim/api.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {

// Time in ns that `count` back-to-back copies of compute instruction `inst` keep its engine busy
// (sim::InstructionCycles at the engine's clock); a matmul that reloads its stationary tile is
// charged the longer of the multiply and the background load.
double EngineNs(const sim::Target& target, const sim::Instruction& inst, double count = 1);

// The DMA traffic of one core, queue by queue, and the time it needs on the simulator's DMA
// model (docs/simulator.md): each queue owns the share of every DMA engine and of the HBM
// bandwidth that its bytes are of the core's (and the core's of the chip's).
class DmaLoad {
 public:
  static constexpr int kMaxQueues = 8;
  // Adds `count` transfers like `inst` (a DMA instruction) on its queue (< kMaxQueues).
  void Add(const sim::Target& target, const sim::Instruction& inst, double count);
  // The busiest queue's time when `cores` cores run this traffic at once: its transfers' fixed
  // costs and data at its share of the DMA engines, or the core's HBM bytes at its share of the
  // chip's HBM bandwidth, whichever is longer.
  double QueueNs(const sim::Target& target, int cores) const;
  // The same for the transfers of `queue` alone.
  double QueueNs(const sim::Target& target, int cores, int queue) const;
  // The core's HBM bytes over its share of the chip's bandwidth when `cores` cores run at once.
  double HbmNs(const sim::Target& target, int cores) const;
  double bytes() const { return total_bytes_; }
  double bytes(int queue) const { return q_[size_t(queue)].bytes; }
  // Time in ns from issuing `count` transfers like `inst` together on its queue until the last
  // arrives, at the queue's shares of this traffic (call after adding all of it): their pieces in
  // waves over the DMA engines, or their bytes at the queue's HBM rate, whichever is longer.
  double BurstNs(const sim::Target& target, int cores, const sim::Instruction& inst,
                 double count) const;
  // Time in ns for one transfer like `inst` alone on an idle core (fixed cost plus its pieces'
  // data at full DMA engine rate, or its bytes at the core's HBM bandwidth).
  static double LatencyNs(const sim::Target& target, const sim::Instruction& inst);

 private:
  struct Queue {
    double bytes = 0, hbm_bytes = 0;
    double fixed_ns = 0;  // summed over pieces
    double data_ns = 0;   // summed over pieces, at the full engine rate
  };
  std::array<Queue, kMaxQueues> q_{};
  double total_bytes_ = 0, hbm_bytes_ = 0;
};

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ESTIMATE_UTIL_H_

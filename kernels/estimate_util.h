// Building blocks of the kernels' analytic time estimates (Space::Estimate): per-resource busy
// times summed from instruction counts, with every cost taken from the simulator's own cost
// functions (sim/simulate.h) and so from the target's numbers. No simulation: a kernel counts how
// many instructions of each kind its schedule issues and adds them here.
#ifndef TESSEL_KERNELS_ESTIMATE_UTIL_H_
#define TESSEL_KERNELS_ESTIMATE_UTIL_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sim/api.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {

// Time in ns that `count` back-to-back copies of compute instruction `inst` keep its engine busy
// (sim::InstructionCycles at the engine's clock); a matmul that reloads its stationary tile is
// charged the longer of the multiply and the background load.
double EngineNs(const sim::Target& target, const sim::Instruction& inst, double count = 1);

// The DMA traffic of one core, queue by queue, and the time it needs on the simulator's DMA
// model (docs/simulator.md): each queue owns the share of every DMA engine that its data time is
// of the core's, and the share of the HBM bandwidth that its bytes are of the core's (and the
// core's of the chip's); a queue generates one transfer's descriptors (the fixed cost) at a time.
class DmaLoad {
 public:
  static constexpr int kMaxQueues = 8;
  // Adds `count` transfers like `inst` (a DMA instruction) on its queue (< kMaxQueues).
  void Add(const sim::Target& target, const sim::Instruction& inst, double count);
  // The busiest queue's time when `cores` cores run this traffic at once: its transfers' fixed
  // costs one after another, its data at its share of the DMA engines, or the core's HBM bytes
  // at its share of the chip's HBM bandwidth, whichever is longest.
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
    double fixed_ns = 0;   // summed over transfers
    double data_ns = 0;    // summed over pieces, at the full engine rate
    double padded_ns = 0;  // the same with each descriptor at least the minimum descriptor size
  };
  std::array<Queue, kMaxQueues> q_{};
  double total_bytes_ = 0, hbm_bytes_ = 0, total_data_ns_ = 0;
};

// A stand-in for sim::CoreProgram that a kernel's emitter can write to instead (the same Add
// and allocations): it keeps no instructions, only what they cost. Each instruction runs once,
// or `weight` times (set_weight).
class CountingCore {
 public:
  explicit CountingCore(const sim::Target* target) : target_(target) {}
  std::vector<sim::Allocation> allocations;  // written by the emitter, unused

  int32_t Add(const sim::Instruction& inst, std::span<const int32_t> deps);
  // Later instructions count `weight` times each (an analytic caller adds one instruction of a
  // kind and weights it by how often the schedule issues it). 1 at the start.
  void set_weight(double weight) { weight_ = weight; }
  int32_t Add(const sim::Instruction& inst, std::initializer_list<int32_t> deps) {
    return Add(inst, std::span<const int32_t>(deps.begin(), deps.size()));
  }

  // The slowest resource over this core's instructions, when `cores` cores run such programs at
  // once (they share the chip's HBM): each compute engine's busy time, the Vector/Scalar PSUM and
  // Vector/GpSimd SBUF ports where the target has those conflicts, and the busiest DMA queue.
  double BoundNs(int cores) const;
  // The busiest compute engine (or shared port), and DMA queue `queue` (DmaLoad::QueueNs).
  double ComputeNs() const;
  double QueueNs(int cores, int queue) const { return dma_.QueueNs(*target_, cores, queue); }
  int64_t instructions() const { return count_; }

 private:
  const sim::Target* target_;
  double engine_ns_[sim::kNumEngines] = {};
  double psum_port_ns_ = 0, sbuf_port_ns_ = 0;
  DmaLoad dma_;
  int32_t count_ = 0;
  double weight_ = 1;
};

// A stand-in for sim::Program whose cores are CountingCores (what an emitter needs of it).
struct CountingProgram {
  explicit CountingProgram(const sim::Target& target) : cores(&target) {}
  struct Cores {
    explicit Cores(const sim::Target* target) : target(target) {}
    void resize(size_t n) {
      while (v.size() < n) v.emplace_back(target);
    }
    CountingCore& operator[](size_t i) { return v[i]; }
    size_t size() const { return v.size(); }
    const sim::Target* target;
    std::vector<CountingCore> v;
  } cores;
  std::string name;

  // As sim::Program::Core.
  CountingCore& Core(size_t index) {
    cores.resize(index + 1);
    return cores[index];
  }
};

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_ESTIMATE_UTIL_H_

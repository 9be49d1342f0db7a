// The parts of the simulator the rest of tessel relies on. sim/ may add to this, but these names
// and meanings are a contract with kernels/, worker/, server/ and the CLI.
#ifndef TESSEL_SIM_API_H_
#define TESSEL_SIM_API_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessel::sim {

enum class EngineKind { kTensor = 0, kVector = 1, kScalar = 2, kGpSimd = 3, kDma = 4 };
inline constexpr int kNumEngines = 5;
// "tensor", "vector", "scalar", "gpsimd", "dma".
std::string_view EngineName(EngineKind kind);

// A hardware description loaded from a target file (sim/targets/*.json, embedded in the binary) or,
// for "systolic-RxC-{ws,os,is}", built from its name. The full field list lives in sim/target.h.
struct Target;

// Returns the target called `name`; NotFound listing the known targets otherwise.
absl::StatusOr<Target> LoadTarget(std::string_view name);
// Names of the built-in targets, sorted ("snc2", "snc3", plus an example systolic name).
std::vector<std::string> TargetNames();

struct SimOptions {
  double noise_sigma = 0;  // relative run-to-run noise; 0 = deterministic
  uint64_t seed = 0;       // seeds the noise
  bool exact = false;      // disable the steady-state fast path
  // When set, Simulate checks it between cores and every 65,536 instructions, and ends with
  // Cancelled once it is true (a worker stops a trial its job no longer wants).
  const std::atomic<bool>* cancel = nullptr;
};

struct EngineStats {
  int64_t busy_ticks = 0;
  double busy_frac = 0;  // busy_ticks / total ticks
  int64_t instructions = 0;
};

struct SimResult {
  int64_t ticks = 0;
  double time_ns = 0;
  int64_t tensor_cycles = 0;  // makespan in TensorE cycles
  std::array<EngineStats, kNumEngines> engines{};
  int64_t hbm_bytes = 0;        // bytes moved between HBM and on-chip memories
  int64_t sbuf_peak_bytes = 0;  // per partition
  int64_t psum_peak_bytes = 0;  // per partition
  // Lower bounds, max(flops / peak, HBM bytes / bandwidth): roofline_ns of the problem's
  // minimum work (its compulsory bytes and flops, set by kernels::Evaluate; for a bare program,
  // the program is the problem and it equals issued_roofline_ns), issued_roofline_ns of the work
  // this program issues. roofline_ns <= issued_roofline_ns <= time_ns.
  double roofline_ns = 0;
  double issued_roofline_ns = 0;
  // The resource whose busy time explains the run time: "tensor" | "vector" | "scalar" |
  // "gpsimd" | "dma" when it is busy at least kBoundBusyFraction of the run (DMA: its engines or
  // the core's HBM share), else "latency" (dependency chains, fill and drain).
  std::string bound;
  // The busiest resources, busiest first; an entry with busy_frac 0 is unused. (An array: a
  // repeated simulation allocates nothing, sim/alloc_test.cc.)
  struct Busy {
    EngineKind resource = EngineKind::kTensor;
    double busy_frac = 0;
  };
  std::array<Busy, 3> busiest{};
};

inline constexpr double kBoundBusyFraction = 0.7;

}  // namespace tessel::sim

#endif  // TESSEL_SIM_API_H_

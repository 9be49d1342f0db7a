// The parts of the simulator the rest of tessel relies on. sim/ may add to this, but these names
// and meanings are a contract with kernels/, worker/, server/ and the CLI.
#ifndef TESSEL_SIM_API_H_
#define TESSEL_SIM_API_H_

#include <array>
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
  double roofline_ns = 0;       // lower bound from flops/peak and hbm bytes/bandwidth
  std::string bound;            // "dma" | "tensor" | "vector" | "scalar" | "gpsimd" | "latency"
};

}  // namespace tessel::sim

#endif  // TESSEL_SIM_API_H_

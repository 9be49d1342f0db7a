// Hardware descriptions the simulator runs on.
//
// A Target is plain data: every number comes from a target file (sim/targets/*.json, embedded in
// the binary at build time) where each number carries its source. The systolic family
// "systolic-RxC-{ws,os,is}" is built from sim/targets/systolic.json with R, C and the dataflow
// parsed from the name. Code never hard-codes a hardware number; it reads it from here.
#ifndef TESSEL_SIM_TARGET_H_
#define TESSEL_SIM_TARGET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/api.h"

namespace tessel::sim {

// Element types the engines understand. fp8 is NKI's float8_e4m3 as NeuronCore-v2 and -v3 hold it:
// IEEE-754 style e4m3 (bias 7, infinities and NaNs kept), so its largest finite value is
// S.1110.111 = 1.875 x 2^7 = 240 (kFp8MaxFinite). The extended-range e4m3fn (448) is not this type.
enum class DType : uint8_t { kFp8 = 0, kBf16 = 1, kFp16 = 2, kTf32 = 3, kFp32 = 4 };
inline constexpr int kNumDTypes = 5;
inline constexpr float kFp8MaxFinite = 240.0f;
// "fp8", "bf16", "fp16", "tf32", "fp32".
std::string_view DTypeName(DType dtype);
// Parses a dtype name; InvalidArgument listing the known names otherwise.
absl::StatusOr<DType> ParseDType(std::string_view name);
// Bytes per element (fp8 = 1, bf16/fp16 = 2, tf32/fp32 = 4).
int DTypeBytes(DType dtype);

// Systolic dataflows of the SCALE-Sim family (ACCELERATOR.md section 6).
enum class Dataflow : uint8_t { kNone = 0, kWeightStationary, kOutputStationary, kInputStationary };

struct Target {
  std::string name;         // "snc2", "snc3", "systolic-128x128-ws"
  int version = 0;          // model version: bump when results for this target change
  std::string description;  // one line for `tessel targets`

  // "neuron" (engines, SBUF/PSUM, DMA) or "systolic" (SCALE-Sim closed form, unlimited bandwidth).
  bool systolic = false;
  int systolic_rows = 0;  // R of systolic-RxC-df; 0 for neuron targets
  int systolic_cols = 0;  // C of systolic-RxC-df
  Dataflow dataflow = Dataflow::kNone;

  // Clocks. The common tick makes every engine cycle a whole number of ticks.
  double tick_ghz = 0;
  double engine_ghz[kNumEngines] = {};    // indexed by EngineKind; kDma unused (DMA is in ns)
  int ticks_per_cycle[kNumEngines] = {};  // tick_ghz / engine_ghz, checked to be whole

  int cores_per_chip = 1;
  double hbm_gbps_per_core = 0;  // 0 = unlimited
  double hbm_gbps_per_chip = 0;  // 0 = unlimited
  double hbm_gib_per_chip = 0;   // device memory; 0 = unlimited

  // On-chip memories (per core).
  int sbuf_partitions = 128;
  int64_t sbuf_bytes_per_partition = 0;
  int64_t sbuf_reserved_bytes_per_partition = 0;  // runtime reserve
  int psum_banks = 0;
  int64_t psum_bank_bytes_per_partition = 0;
  int max_accumulation_groups = 0;

  // TensorE.
  int pe_rows = 0;
  int pe_cols = 0;
  int matmul_max_k = 0;      // 0 = unlimited
  int matmul_max_k_fp8 = 0;  // fp8 double-row limit
  int matmul_max_m = 0;
  int matmul_max_n = 0;
  int matmul_min_free = 0;  // the 64 of max(min(64, M), N)
  double matmul_fp32_factor = 1;
  double matmul_fp8_factor = 0;  // 0 = fp8 unsupported
  double stationary_load_speedup = 1;

  // Vector / Scalar / GpSimd.
  int min_ii_cycles = 0;
  int fixed_access_cycles = 0;
  int same_engine_dependency_cycles = 0;
  int strided_cost_factor = 1;
  int iota_base_cycles = 0;
  int max_free_sbuf = 0;  // 0 = unlimited
  int max_free_psum = 0;
  int max_bn_stats_free = 0;
  bool port_conflict_vector_gpsimd_sbuf = false;
  bool port_conflict_vector_scalar_psum = false;
  // VectorE performance mode (engaged by the hardware on its own): throughput multiplier of
  // tensor_copy / tensor_scalar with bf16/fp16 input and output, both in SBUF, contiguous
  // (`vector_perf_contiguous`), and of the other qualifying cases (`vector_perf`): those ops
  // strided, or with one side in PSUM, and tensor_tensor with both inputs in SBUF, all bf16/fp16.
  // 1 = no performance mode.
  double vector_perf_contiguous = 1;
  double vector_perf = 1;
  // TensorE transposes (a matmul against an identity): whether the PSUM result keeps the input's
  // dtype (NeuronCore-v3 on: nc_matmul with is_transpose, bf16 in, bf16 out) instead of being
  // written as fp32 like any matmul result (NeuronCore-v2). See TransposePsumDType.
  bool transpose_keeps_dtype = false;

  // The dtype a TensorE transpose of `data` leaves in PSUM.
  DType TransposePsumDType(DType data) const { return transpose_keeps_dtype ? data : DType::kFp32; }

  // DMA (per core).
  int dma_engines = 0;
  int dma_queues = 0;
  double dma_gbps_per_engine = 0;  // 0 = unlimited
  int dma_partitions_per_engine = 0;
  double dma_fixed_ns = 0;
  int dma_min_descriptor_bytes = 0;
  double dma_transpose_factor_hbm = 1;
  double dma_transpose_factor_sbuf = 1;

  // Peak TensorE throughput per dtype in TFLOPS (indexed by DType); 0 = unsupported.
  double peak_tflops[kNumDTypes] = {};

  // SBUF bytes per partition a kernel may use (capacity minus the runtime reserve).
  int64_t UsableSbufPerPartition() const {
    return sbuf_bytes_per_partition - sbuf_reserved_bytes_per_partition;
  }
  int64_t PsumBytesPerPartition() const { return psum_banks * psum_bank_bytes_per_partition; }
  // Largest matmul contraction for `dtype`; 0 = unlimited.
  int MaxMatmulK(DType dtype) const {
    return dtype == DType::kFp8 ? matmul_max_k_fp8 : matmul_max_k;
  }
  // Whether TensorE supports `dtype` on this target.
  bool SupportsDType(DType dtype) const {
    return systolic || (dtype == DType::kFp8 ? matmul_fp8_factor > 0 : peak_tflops[int(dtype)] > 0);
  }
  // Peak TensorE FLOP/s of one core for `dtype` (TFLOPS). For systolic targets derived as
  // R x C x 2 x clock.
  double PeakTflops(DType dtype) const;
  // The HBM bandwidth (GB/s) available to `cores` cores running at once; 0 = unlimited.
  double HbmGbps(int cores) const;
};

// Parses a target description in the JSON format of sim/targets/*.json (each number given as
// {"value": V, "source": "..."}). InvalidArgument naming the missing or bad field.
absl::StatusOr<Target> ParseTargetJson(std::string_view json_text);

// The embedded target files as (file stem, JSON text). Generated at build time.
const std::vector<std::pair<std::string, std::string>>& EmbeddedTargetFiles();

}  // namespace tessel::sim

#endif  // TESSEL_SIM_TARGET_H_

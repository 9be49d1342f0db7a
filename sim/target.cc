#include "sim/target.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/enum_names.h"

namespace tessel::sim {
namespace {

constexpr std::string_view kSystolicPrefix = "systolic-";
// The example systolic name listed by TargetNames().
constexpr std::string_view kExampleSystolic = "systolic-128x128-ws";

// Reads field `key` of the form {"value": V, "source": "..."} into `out`.
template <typename T>
absl::Status Field(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object() || !it->contains("value")) {
    return absl::InvalidArgumentError(
        StrCat("target field '", key, "' missing or not {\"value\", \"source\"}"));
  }
  if (!it->contains("source") || !(*it)["source"].is_string() ||
      (*it)["source"].get<std::string>().empty()) {
    return absl::InvalidArgumentError(StrCat("target field '", key, "' has no source"));
  }
  try {
    *out = (*it)["value"].get<T>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(StrCat("target field '", key, "': ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParsePositive(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0) {
    return absl::InvalidArgumentError(StrCat("not a positive integer: '", text, "'"));
  }
  return value;
}

std::string KnownNames() { return StrJoin(TargetNames(), ", "); }

absl::StatusOr<Target> LoadSystolic(std::string_view name) {
  // systolic-RxC-df
  std::string_view rest = name.substr(kSystolicPrefix.size());
  std::vector<std::string_view> parts = StrSplit(rest, '-');
  auto bad = [&](const std::string& why) {
    return absl::NotFoundError(
        StrCat("unknown target '", name, "' (", why,
               "); expected systolic-RxC-{ws,os,is}; known targets: ", KnownNames()));
  };
  if (parts.size() != 2) return bad("malformed systolic name");
  std::vector<std::string_view> dims = StrSplit(parts[0], 'x');
  if (dims.size() != 2) return bad("malformed array size");
  absl::StatusOr<int> rows = ParsePositive(dims[0]);
  absl::StatusOr<int> cols = ParsePositive(dims[1]);
  if (!rows.ok() || !cols.ok()) return bad("array size must be positive integers");
  Dataflow dataflow;
  if (parts[1] == "ws") {
    dataflow = Dataflow::kWeightStationary;
  } else if (parts[1] == "os") {
    dataflow = Dataflow::kOutputStationary;
  } else if (parts[1] == "is") {
    dataflow = Dataflow::kInputStationary;
  } else {
    return bad("dataflow must be ws, os or is");
  }
  for (const auto& [stem, text] : EmbeddedTargetFiles()) {
    if (stem != "systolic") continue;
    absl::StatusOr<Target> target = ParseTargetJson(text);
    if (!target.ok()) return target.status();
    target->name = std::string(name);
    target->systolic_rows = *rows;
    target->systolic_cols = *cols;
    target->pe_rows = *rows;
    target->pe_cols = *cols;
    target->dataflow = dataflow;
    target->description = StrCat(*rows, "x", *cols, " systolic array, ", parts[1],
                                 " dataflow, unlimited bandwidth (SCALE-Sim v2 closed form)");
    return target;
  }
  return absl::InternalError("embedded systolic template missing");
}

}  // namespace

std::string_view EngineName(EngineKind kind) {
  using enum EngineKind;
  static constexpr EnumName<EngineKind> kNames[] = {{kTensor, "tensor"},
                                                    {kVector, "vector"},
                                                    {kScalar, "scalar"},
                                                    {kGpSimd, "gpsimd"},
                                                    {kDma, "dma"}};
  return NameIn(kNames, kind, "unknown");
}

std::string_view DTypeName(DType dtype) {
  using enum DType;
  static constexpr EnumName<DType> kNames[] = {
      {kFp8, "fp8"}, {kBf16, "bf16"}, {kFp16, "fp16"}, {kTf32, "tf32"}, {kFp32, "fp32"}};
  return NameIn(kNames, dtype, "unknown");
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (DTypeName(DType(i)) == name) return DType(i);
  }
  return absl::InvalidArgumentError(
      StrCat("unknown dtype '", name, "'; known: fp8, bf16, fp16, tf32, fp32"));
}

int DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFp8:
      return 1;
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kTf32:
    case DType::kFp32:
      return 4;
  }
  return 4;
}

double Target::PeakTflops(DType dtype) const {
  if (systolic) return systolic_rows * double(systolic_cols) * 2 * engine_ghz[0] / 1000.0;
  return peak_tflops[int(dtype)];
}

double Target::HbmGbps(int cores) const {
  if (hbm_gbps_per_core <= 0 && hbm_gbps_per_chip <= 0) return 0;
  double per_cores = hbm_gbps_per_core > 0 ? hbm_gbps_per_core * cores : 1e300;
  double chip = hbm_gbps_per_chip > 0 ? hbm_gbps_per_chip : 1e300;
  return std::min(per_cores, chip);
}

absl::StatusOr<Target> ParseTargetJson(std::string_view json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("target file is not a JSON object");
  }
  Target t;
  if (!j.contains("name") || !j["name"].is_string() || !j.contains("version") ||
      !j["version"].is_number_integer() || !j.contains("description")) {
    return absl::InvalidArgumentError(
        "target file needs string name, integer version, description");
  }
  t.name = j["name"].get<std::string>();
  t.version = j["version"].get<int>();
  t.description = j["description"].get<std::string>();
  std::string kind;
  TESSEL_RETURN_IF_ERROR(Field(j, "kind", &kind));
  if (kind != "neuron" && kind != "systolic") {
    return absl::InvalidArgumentError(StrCat("target kind must be neuron or systolic, not ", kind));
  }
  t.systolic = kind == "systolic";
  TESSEL_RETURN_IF_ERROR(Field(j, "tick_ghz", &t.tick_ghz));
  TESSEL_RETURN_IF_ERROR(Field(j, "tensor_ghz", &t.engine_ghz[int(EngineKind::kTensor)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "vector_ghz", &t.engine_ghz[int(EngineKind::kVector)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "scalar_ghz", &t.engine_ghz[int(EngineKind::kScalar)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "gpsimd_ghz", &t.engine_ghz[int(EngineKind::kGpSimd)]));
  t.engine_ghz[int(EngineKind::kDma)] = t.tick_ghz;
  for (int e = 0; e < kNumEngines; ++e) {
    if (t.engine_ghz[e] <= 0 || t.tick_ghz <= 0) {
      return absl::InvalidArgumentError("clocks must be positive");
    }
    double ratio = t.tick_ghz / t.engine_ghz[e];
    int whole = int(std::lround(ratio));
    if (whole < 1 || std::abs(ratio - whole) > 1e-9) {
      return absl::InvalidArgumentError(
          StrCat("tick_ghz ", t.tick_ghz, " is not a whole multiple of the ",
                 EngineName(EngineKind(e)), " clock ", t.engine_ghz[e]));
    }
    t.ticks_per_cycle[e] = whole;
  }
  TESSEL_RETURN_IF_ERROR(Field(j, "cores_per_chip", &t.cores_per_chip));
  TESSEL_RETURN_IF_ERROR(Field(j, "hbm_gbps_per_core", &t.hbm_gbps_per_core));
  TESSEL_RETURN_IF_ERROR(Field(j, "hbm_gbps_per_chip", &t.hbm_gbps_per_chip));
  TESSEL_RETURN_IF_ERROR(Field(j, "sbuf_partitions", &t.sbuf_partitions));
  TESSEL_RETURN_IF_ERROR(Field(j, "sbuf_bytes_per_partition", &t.sbuf_bytes_per_partition));
  TESSEL_RETURN_IF_ERROR(
      Field(j, "sbuf_reserved_bytes_per_partition", &t.sbuf_reserved_bytes_per_partition));
  TESSEL_RETURN_IF_ERROR(Field(j, "psum_banks", &t.psum_banks));
  TESSEL_RETURN_IF_ERROR(
      Field(j, "psum_bank_bytes_per_partition", &t.psum_bank_bytes_per_partition));
  TESSEL_RETURN_IF_ERROR(Field(j, "max_accumulation_groups", &t.max_accumulation_groups));
  TESSEL_RETURN_IF_ERROR(Field(j, "pe_rows", &t.pe_rows));
  TESSEL_RETURN_IF_ERROR(Field(j, "pe_cols", &t.pe_cols));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_max_k", &t.matmul_max_k));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_max_k_fp8", &t.matmul_max_k_fp8));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_max_m", &t.matmul_max_m));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_max_n", &t.matmul_max_n));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_min_free", &t.matmul_min_free));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_fp32_factor", &t.matmul_fp32_factor));
  TESSEL_RETURN_IF_ERROR(Field(j, "matmul_fp8_factor", &t.matmul_fp8_factor));
  TESSEL_RETURN_IF_ERROR(Field(j, "stationary_load_speedup", &t.stationary_load_speedup));
  TESSEL_RETURN_IF_ERROR(Field(j, "min_ii_cycles", &t.min_ii_cycles));
  TESSEL_RETURN_IF_ERROR(Field(j, "fixed_access_cycles", &t.fixed_access_cycles));
  TESSEL_RETURN_IF_ERROR(
      Field(j, "same_engine_dependency_cycles", &t.same_engine_dependency_cycles));
  TESSEL_RETURN_IF_ERROR(Field(j, "strided_cost_factor", &t.strided_cost_factor));
  TESSEL_RETURN_IF_ERROR(Field(j, "iota_base_cycles", &t.iota_base_cycles));
  TESSEL_RETURN_IF_ERROR(Field(j, "max_free_sbuf", &t.max_free_sbuf));
  TESSEL_RETURN_IF_ERROR(Field(j, "max_free_psum", &t.max_free_psum));
  TESSEL_RETURN_IF_ERROR(Field(j, "max_bn_stats_free", &t.max_bn_stats_free));
  TESSEL_RETURN_IF_ERROR(
      Field(j, "port_conflict_vector_gpsimd_sbuf", &t.port_conflict_vector_gpsimd_sbuf));
  TESSEL_RETURN_IF_ERROR(
      Field(j, "port_conflict_vector_scalar_psum", &t.port_conflict_vector_scalar_psum));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_engines", &t.dma_engines));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_queues", &t.dma_queues));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_gbps_per_engine", &t.dma_gbps_per_engine));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_partitions_per_engine", &t.dma_partitions_per_engine));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_fixed_ns", &t.dma_fixed_ns));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_min_descriptor_bytes", &t.dma_min_descriptor_bytes));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_transpose_factor_hbm", &t.dma_transpose_factor_hbm));
  TESSEL_RETURN_IF_ERROR(Field(j, "dma_transpose_factor_sbuf", &t.dma_transpose_factor_sbuf));
  TESSEL_RETURN_IF_ERROR(Field(j, "peak_tflops_fp8", &t.peak_tflops[int(DType::kFp8)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "peak_tflops_bf16", &t.peak_tflops[int(DType::kBf16)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "peak_tflops_fp16", &t.peak_tflops[int(DType::kFp16)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "peak_tflops_tf32", &t.peak_tflops[int(DType::kTf32)]));
  TESSEL_RETURN_IF_ERROR(Field(j, "peak_tflops_fp32", &t.peak_tflops[int(DType::kFp32)]));
  if (t.dma_engines < 1 || t.dma_queues < 1 || t.dma_partitions_per_engine < 1 ||
      t.cores_per_chip < 1) {
    return absl::InvalidArgumentError(
        "dma_engines, dma_queues, dma_partitions_per_engine and "
        "cores_per_chip must be at least 1");
  }
  return t;
}

absl::StatusOr<Target> LoadTarget(std::string_view name) {
  if (name.substr(0, kSystolicPrefix.size()) == kSystolicPrefix) return LoadSystolic(name);
  for (const auto& [stem, text] : EmbeddedTargetFiles()) {
    if (stem == "systolic" || stem != name) continue;
    return ParseTargetJson(text);
  }
  return absl::NotFoundError(StrCat("unknown target '", name, "'; known targets: ", KnownNames(),
                                    " (systolic-RxC-{ws,os,is} for any R, C)"));
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const auto& [stem, text] : EmbeddedTargetFiles()) {
    if (stem != "systolic") names.push_back(stem);
  }
  names.emplace_back(kExampleSystolic);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tessel::sim

#include "sim/target.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <variant>

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
absl::Status Field(const nlohmann::json& j, const std::string& key, T* out) {
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

// The target's scalar fields, each read from the JSON key of the same name, in file order.
struct ScalarField {
  const char* key;
  std::variant<int Target::*, int64_t Target::*, double Target::*, bool Target::*> member;
};
const ScalarField kScalarFields[] = {
    {"cores_per_chip", &Target::cores_per_chip},
    {"hbm_gbps_per_core", &Target::hbm_gbps_per_core},
    {"hbm_gbps_per_chip", &Target::hbm_gbps_per_chip},
    {"hbm_gib_per_chip", &Target::hbm_gib_per_chip},
    {"sbuf_partitions", &Target::sbuf_partitions},
    {"sbuf_bytes_per_partition", &Target::sbuf_bytes_per_partition},
    {"sbuf_reserved_bytes_per_partition", &Target::sbuf_reserved_bytes_per_partition},
    {"psum_banks", &Target::psum_banks},
    {"psum_bank_bytes_per_partition", &Target::psum_bank_bytes_per_partition},
    {"max_accumulation_groups", &Target::max_accumulation_groups},
    {"pe_rows", &Target::pe_rows},
    {"pe_cols", &Target::pe_cols},
    {"matmul_max_k", &Target::matmul_max_k},
    {"matmul_max_k_fp8", &Target::matmul_max_k_fp8},
    {"matmul_max_m", &Target::matmul_max_m},
    {"matmul_max_n", &Target::matmul_max_n},
    {"matmul_min_free", &Target::matmul_min_free},
    {"matmul_fp32_factor", &Target::matmul_fp32_factor},
    {"matmul_fp8_factor", &Target::matmul_fp8_factor},
    {"stationary_load_speedup", &Target::stationary_load_speedup},
    {"min_ii_cycles", &Target::min_ii_cycles},
    {"fixed_access_cycles", &Target::fixed_access_cycles},
    {"same_engine_dependency_cycles", &Target::same_engine_dependency_cycles},
    {"strided_cost_factor", &Target::strided_cost_factor},
    {"iota_base_cycles", &Target::iota_base_cycles},
    {"max_free_sbuf", &Target::max_free_sbuf},
    {"max_free_psum", &Target::max_free_psum},
    {"max_bn_stats_free", &Target::max_bn_stats_free},
    {"port_conflict_vector_gpsimd_sbuf", &Target::port_conflict_vector_gpsimd_sbuf},
    {"port_conflict_vector_scalar_psum", &Target::port_conflict_vector_scalar_psum},
    {"vector_perf_contiguous", &Target::vector_perf_contiguous},
    {"vector_perf", &Target::vector_perf},
    {"transpose_keeps_dtype", &Target::transpose_keeps_dtype},
    {"dma_engines", &Target::dma_engines},
    {"dma_queues", &Target::dma_queues},
    {"dma_gbps_per_engine", &Target::dma_gbps_per_engine},
    {"dma_partitions_per_engine", &Target::dma_partitions_per_engine},
    {"dma_fixed_ns", &Target::dma_fixed_ns},
    {"dma_min_descriptor_bytes", &Target::dma_min_descriptor_bytes},
    {"dma_transpose_factor_hbm", &Target::dma_transpose_factor_hbm},
    {"dma_transpose_factor_sbuf", &Target::dma_transpose_factor_sbuf},
};

absl::StatusOr<int> ParsePositive(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0) {
    return absl::InvalidArgumentError(StrCat("not a positive integer: '", Shown(text), "'"));
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
        StrCat("unknown target '", Shown(name), "' (", why,
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
      StrCat("unknown dtype '", Shown(name), "'; known: fp8, bf16, fp16, tf32, fp32"));
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
  // "<engine>_ghz" for every engine but DMA, which runs on the tick clock.
  for (EngineKind engine :
       {EngineKind::kTensor, EngineKind::kVector, EngineKind::kScalar, EngineKind::kGpSimd}) {
    TESSEL_RETURN_IF_ERROR(
        Field(j, StrCat(EngineName(engine), "_ghz"), &t.engine_ghz[int(engine)]));
  }
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
  for (const ScalarField& field : kScalarFields) {
    TESSEL_RETURN_IF_ERROR(
        std::visit([&](auto member) { return Field(j, field.key, &(t.*member)); }, field.member));
  }
  // "peak_tflops_<dtype>" for every dtype.
  for (int d = 0; d < kNumDTypes; ++d) {
    TESSEL_RETURN_IF_ERROR(
        Field(j, StrCat("peak_tflops_", DTypeName(DType(d))), &t.peak_tflops[d]));
  }
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
  return absl::NotFoundError(StrCat("unknown target '", Shown(name), "'; known targets: ",
                                    KnownNames(), " (systolic-RxC-{ws,os,is} for any R, C)"));
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

#include "kernels/schedule_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "schema/strings.h"

namespace tessel::kernels {

absl::Status CheckProblem(std::string_view kernel, const std::vector<std::string>& dims,
                          const std::vector<std::string>& dtypes, const Problem& problem,
                          const sim::Target& target, const std::vector<std::string>& may_be_zero) {
  const std::string names = StrJoin(dims, ", ");
  for (const auto& [name, value] : problem.dims.items()) {
    if (std::find(dims.begin(), dims.end(), name) == dims.end()) {
      return absl::InvalidArgumentError(
          StrCat(kernel, " has dims ", names, "; got unknown dim ", Shown(name)));
    }
    const bool zero_ok =
        std::find(may_be_zero.begin(), may_be_zero.end(), name) != may_be_zero.end();
    if (value < 0 || (value == 0 && !zero_ok)) {
      return absl::InvalidArgumentError(StrCat(
          "dim ", name, "=", value, zero_ok ? " must not be negative" : " must be positive"));
    }
  }
  for (const std::string& name : dims) {
    if (!problem.dims.Has(name)) {
      return absl::InvalidArgumentError(StrCat(kernel, " needs dim ", name, " (", names, ")"));
    }
  }
  if (std::find(dtypes.begin(), dtypes.end(), problem.dtype) == dtypes.end()) {
    return absl::InvalidArgumentError(StrCat(kernel, " dtype must be one of ",
                                             StrJoin(dtypes, ", "), ", not '", Shown(problem.dtype),
                                             "'"));
  }
  absl::StatusOr<sim::DType> dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return dtype.status();
  if (*dtype == sim::DType::kFp8 && !target.SupportsDType(*dtype)) {
    return absl::InvalidArgumentError(
        StrCat("dtype ", problem.dtype, " is not supported by TensorE on ", target.name));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntParam(const Config& config, std::string_view name, int64_t min) {
  absl::StatusOr<int64_t> v = config.GetInt(name);
  if (!v.ok()) return v.status();
  if (*v < min) return absl::InvalidArgumentError(StrCat(name, "=", *v, " is out of range"));
  return *v;
}

absl::Status IntParams(const Config& config, std::initializer_list<IntField> fields) {
  for (const IntField& f : fields) {
    absl::StatusOr<int64_t> v = IntParam(config, f.name, f.min);
    if (!v.ok()) return v.status();
    *f.out = *v;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChoiceParam(const Config& config, std::string_view name,
                                        const std::vector<std::string>& allowed) {
  std::optional<std::string_view> v = config.Get(name);
  if (!v) return absl::InvalidArgumentError(StrCat("parameter '", name, "' missing"));
  if (std::find(allowed.begin(), allowed.end(), std::string(*v)) == allowed.end()) {
    return absl::InvalidArgumentError(
        StrCat(name, " must be one of ", StrJoin(allowed, ","), ", not '", std::string(*v), "'"));
  }
  return std::string(*v);
}

absl::Status ChoiceParams(const Config& config, std::initializer_list<ChoiceField> fields) {
  for (const ChoiceField& f : fields) {
    absl::StatusOr<std::string> v = ChoiceParam(config, f.name, f.allowed);
    if (!v.ok()) return v.status();
    *f.out = *std::move(v);
  }
  return absl::OkStatus();
}

std::vector<std::string> ShardValues(const sim::Target& target) {
  std::vector<std::string> shards;
  for (int s = 1; s <= target.cores_per_chip; s *= 2) shards.push_back(std::to_string(s));
  return shards;
}

int64_t ReducedDim(int64_t dim, int64_t tile, int64_t keep) {
  if (dim <= keep * tile) return dim;
  int64_t tail = dim % tile;
  if (tail == 0) tail = tile / 2 + 1;
  if (tail >= tile) tail = tile - 1;
  return (keep - 1) * tile + std::max<int64_t>(tail, 1);
}

absl::Status CheckMatmulTile(const sim::Target& target, sim::DType dtype,
                             std::string_view dtype_name, std::string_view k_name, int64_t k,
                             std::string_view stationary_label, int64_t stationary_free,
                             int64_t moving_free) {
  const int max_k = target.MaxMatmulK(dtype);
  if (max_k > 0 && k > max_k) {
    return absl::InvalidArgumentError(StrCat(k_name, "=", k,
                                             " exceeds the TensorE contraction limit K <= ", max_k,
                                             " for ", dtype_name, " on ", target.name));
  }
  if (target.matmul_max_m > 0 && stationary_free > target.matmul_max_m) {
    return absl::InvalidArgumentError(
        StrCat(stationary_label, stationary_free,
               " is the stationary free size and exceeds the TensorE limit ", target.matmul_max_m));
  }
  if (target.matmul_max_n > 0 && moving_free > target.matmul_max_n) {
    return absl::InvalidArgumentError(StrCat("moving free size ", moving_free,
                                             " exceeds the TensorE limit ", target.matmul_max_n));
  }
  if (moving_free * 4 > target.psum_bank_bytes_per_partition) {
    return absl::InvalidArgumentError(
        StrCat("a ", moving_free, "-wide fp32 PSUM tile exceeds one PSUM bank"));
  }
  return absl::OkStatus();
}

}  // namespace tessel::kernels

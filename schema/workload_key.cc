#include "schema/workload_key.h"

#include "schema/strings.h"

namespace tessel {

std::string WorkloadKey(std::string_view kernel, const Dims& dims, std::string_view dtype,
                        std::string_view target) {
  return WorkloadKeyFromCanonical(kernel, dims.Canonical(), dtype, target);
}

std::string WorkloadKeyFromCanonical(std::string_view kernel, std::string_view canonical_dims,
                                     std::string_view dtype, std::string_view target) {
  return StrCat(kernel, "|", canonical_dims, "|", dtype, "|", target);
}

}  // namespace tessel

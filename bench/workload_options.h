// The --kernel / --shape / --dtype / --target options shared by the bench tools that work on one
// workload (space_cache, search_prior), and the kernel, problem, target and space they name.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/strings.h"
#include "sim/target.h"

namespace tessel::bench {

struct WorkloadOptions {
  std::string kernel = "matmul", shape = "M=4096,N=4096,K=4096", dtype = "bf16", target = "snc2";

  // Stores `value` if `arg` is one of the four workload options; false if it is not one of them.
  bool Take(const std::string& arg, const std::string& value) {
    std::string* field = arg == "--kernel"   ? &kernel
                         : arg == "--shape"  ? &shape
                         : arg == "--dtype"  ? &dtype
                         : arg == "--target" ? &target
                                             : nullptr;
    if (field != nullptr) *field = value;
    return field != nullptr;
  }
};

struct Workload {
  const kernels::Kernel* kernel;
  kernels::Problem problem;
  sim::Target target;
  kernels::Space space;
};

// The kernel, problem, target and space the options name; an error names what is unknown or bad.
inline absl::StatusOr<Workload> ResolveWorkload(const WorkloadOptions& o) {
  const kernels::Kernel* kernel = kernels::FindKernel(o.kernel);
  if (kernel == nullptr) return absl::InvalidArgumentError(StrCat("unknown kernel ", o.kernel));
  absl::StatusOr<Dims> dims = Dims::Parse(o.shape);
  if (!dims.ok()) return dims.status();
  absl::StatusOr<sim::Target> target = sim::LoadTarget(o.target);
  if (!target.ok()) return target.status();
  const kernels::Problem problem{*dims, o.dtype};
  absl::StatusOr<kernels::Space> space = kernel->SpaceFor(problem, *target);
  if (!space.ok()) return space.status();
  return Workload{kernel, problem, *std::move(target), *std::move(space)};
}

}  // namespace tessel::bench

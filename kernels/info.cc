#include "kernels/info.h"

#include "schema/status_macros.h"

namespace tessel::kernels {

Problem ExampleProblem(const Kernel& kernel, std::string_view dtype) {
  Problem problem = kernel.Example();
  if (!dtype.empty()) problem.dtype = std::string(dtype);
  return problem;
}

KernelInfo DescribeKernel(const Kernel& kernel, const sim::Target& target) {
  KernelInfo info;
  info.name = std::string(kernel.name());
  info.version = kernel.version();
  info.description = std::string(kernel.description());
  info.dims = kernel.dims();
  info.dtypes = kernel.dtypes();
  info.example = kernel.Example();
  if (absl::StatusOr<Space> space = kernel.SpaceFor(info.example, target); space.ok()) {
    info.params = space->params();
    info.default_config = kernel.Default(info.example, target);
  }
  return info;
}

absl::StatusOr<Config> ExampleDefault(const Kernel& kernel, std::string_view dtype,
                                      const sim::Target& target) {
  const Problem problem = ExampleProblem(kernel, dtype);
  TESSEL_RETURN_IF_ERROR(kernel.ValidateProblem(problem, target));
  return kernel.Default(problem, target);
}

}  // namespace tessel::kernels

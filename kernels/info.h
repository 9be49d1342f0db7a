// What the registry tells people about a kernel: its dims, dtypes, parameters and default config,
// all taken from the kernel's own example problem (Kernel::Example()), the one problem every
// kernel promises to accept. ListKernels, `tessel kernels`, exports' default configs and
// snapshots' `match=default` answers are built from here.
#ifndef TESSEL_KERNELS_INFO_H_
#define TESSEL_KERNELS_INFO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "sim/target.h"

namespace tessel::kernels {

// A kernel's description on one target.
struct KernelInfo {
  std::string name;
  int version = 0;
  std::string description;
  std::vector<std::string> dims;    // in the kernel's order
  std::vector<std::string> dtypes;  // supported dtypes, the kernel's order
  Problem example;                  // Kernel::Example()
  // The space of `example` on the target, and the kernel's default config for it. Both empty
  // when the target rejects the example (e.g. a target without the example's dtype).
  std::vector<Param> params;
  Config default_config;
};

// The kernel's example problem in `dtype` (the example's own dtype when empty).
Problem ExampleProblem(const Kernel& kernel, std::string_view dtype = {});

// Describes `kernel` on `target` from its example problem.
KernelInfo DescribeKernel(const Kernel& kernel, const sim::Target& target);

// The kernel's default config for its example problem in `dtype` on `target`: the default an
// export records for (kernel, dtype, target). InvalidArgument (ValidateProblem's reason) when the
// target cannot run that dtype for this kernel.
absl::StatusOr<Config> ExampleDefault(const Kernel& kernel, std::string_view dtype,
                                      const sim::Target& target);

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_INFO_H_

#include "kernels/lowering/planned_kernel.h"

#include "schema/strings.h"

namespace tessel::kernels {

absl::StatusOr<Space> PlannedKernel::SpaceFor(const Problem& problem,
                                              const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  Space space(steps_.params(problem, target), [this, problem, target](const Config& config) {
    return steps_.check(problem, config, target);
  });
  if (steps_.estimate) {
    space.set_estimate([this, problem, target](const Config& config) {
      return steps_.estimate(problem, config, target);
    });
  }
  return space;
}

absl::StatusOr<sim::Program> PlannedKernel::Lower(const Problem& problem, const Config& config,
                                                  const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  sim::Program program;
  program.name = StrCat(name(), " ", problem.dims.ToString(), " ", problem.dtype, " [",
                        config.ToString(), "]");
  absl::Status emitted = steps_.emit(problem, config, target, &program);
  if (!emitted.ok()) return emitted;
  return program;
}

absl::Status PlannedKernel::Verify(const Problem& problem, const Config& config,
                                   const sim::Target& target) const {
  absl::Status valid = ValidateProblem(problem, target);
  if (!valid.ok()) return valid;
  return steps_.verify(problem, config, target);
}

}  // namespace tessel::kernels

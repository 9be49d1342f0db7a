// PlannedKernel: the skeleton every planned kernel shares, written once. A kernel's lowering is
// three steps over its plan (the parsed, checked config with everything the schedule derives):
//
//   plan       problem x config x target -> Plan, or InvalidArgument with the violated rule
//   emit       Plan -> simulator instructions (the kernel's SimEmitter driven by its generator)
//   verify     Plan -> a reduced problem run on the CPU (the same generator driving a CpuEmitter)
//              and compared with a plain reference
//
// A kernel fills in PlanSteps<Plan> with those (plus its params and, optionally, its analytic
// estimate) and hands them to the PlannedKernel constructor, which implements SpaceFor (a space of
// the params whose check is the plan step), Lower and Verify on top: each validates the problem
// first and fails as ValidateProblem does. The kernel still defines ValidateProblem, Default and
// MinimumWork (and may override Example).
#ifndef TESSEL_KERNELS_LOWERING_PLANNED_KERNEL_H_
#define TESSEL_KERNELS_LOWERING_PLANNED_KERNEL_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "sim/program.h"
#include "sim/target.h"

namespace tessel::kernels {

// What `tessel kernels` shows of a kernel: Kernel's name(), version(), description(), dims() and
// dtypes().
struct KernelSpec {
  std::string name;
  int version = 1;  // bumped, with a comment where the spec is written, when results change
  std::string description;
  std::vector<std::string> dims;
  std::vector<std::string> dtypes;
};

// The analytic estimate of one config (see Space::Estimate); nullopt when it cannot judge it.
using ConfigEstimate =
    std::function<std::optional<double>(const Problem&, const Config&, const sim::Target&)>;

// A kernel's steps over its plan type. Each is called only for a problem ValidateProblem
// accepted. `plan` is the strict plan (the one the space checks configs with); `emit` and `verify`
// receive the plan `plan` built for the config.
template <typename Plan>
struct PlanSteps {
  // The schedule params of a problem on a target.
  std::function<std::vector<Param>(const Problem&, const sim::Target&)> params;
  // The plan of a config; InvalidArgument with the violated rule for an invalid config.
  std::function<absl::StatusOr<Plan>(const Problem&, const Config&, const sim::Target&)> plan;
  // Fills `program` (named, no cores yet) with the plan's instructions.
  std::function<void(const Plan&, const Problem&, const sim::Target&, sim::Program*)> emit;
  // Runs the plan's schedule on the CPU for a reduced problem against a reference, as
  // Kernel::Verify: OK on a match, DataLoss describing the first mismatch otherwise.
  std::function<absl::Status(const Plan&, const Config&, const sim::Target&)> verify;
  // The analytic estimate of the plan (see Space::Estimate), or empty for none; nullopt when it
  // cannot judge it.
  std::function<std::optional<double>(const Plan&, const Problem&, const sim::Target&)> estimate;
};

// The plan step of a kernel whose MakePlan takes a `strict` flag (the redundancy rules that prune
// the space): MakePlan(problem, config, target, /*strict=*/true).
template <typename Plan>
std::function<absl::StatusOr<Plan>(const Problem&, const Config&, const sim::Target&)> StrictPlan(
    absl::StatusOr<Plan> (*make_plan)(const Problem&, const Config&, const sim::Target&, bool)) {
  return [make_plan](const Problem& problem, const Config& config, const sim::Target& target) {
    return make_plan(problem, config, target, /*strict=*/true);
  };
}

class PlannedKernel : public Kernel {
 public:
  // The steps, with the plan type erased (see Erase).
  struct Steps {
    std::function<std::vector<Param>(const Problem&, const sim::Target&)> params;
    std::function<absl::Status(const Problem&, const Config&, const sim::Target&)> check;
    std::function<absl::Status(const Problem&, const Config&, const sim::Target&, sim::Program*)>
        emit;
    std::function<absl::Status(const Problem&, const Config&, const sim::Target&)> verify;
    ConfigEstimate estimate;
  };
  template <typename Plan>
  static Steps Erase(PlanSteps<Plan> steps);

  PlannedKernel(KernelSpec spec, Steps steps) : spec_(std::move(spec)), steps_(std::move(steps)) {}
  PlannedKernel(const PlannedKernel&) = delete;
  PlannedKernel& operator=(const PlannedKernel&) = delete;

  std::string_view name() const final { return spec_.name; }
  int version() const final { return spec_.version; }
  std::string_view description() const final { return spec_.description; }
  std::vector<std::string> dims() const final { return spec_.dims; }
  std::vector<std::string> dtypes() const final { return spec_.dtypes; }

  // The params' space, its check the plan step, with the estimate when the kernel has one. The
  // space refers to this kernel, which must outlive it.
  absl::StatusOr<Space> SpaceFor(const Problem& problem, const sim::Target& target) const final;
  // A program named "<kernel> <dims> <dtype> [<config>]", filled by the emit step.
  absl::StatusOr<sim::Program> Lower(const Problem& problem, const Config& config,
                                     const sim::Target& target) const final;
  // The verify step on the config's plan.
  absl::Status Verify(const Problem& problem, const Config& config,
                      const sim::Target& target) const final;

 private:
  KernelSpec spec_;
  Steps steps_;
};

template <typename Plan>
PlannedKernel::Steps PlannedKernel::Erase(PlanSteps<Plan> steps) {
  auto plan = std::move(steps.plan);
  Steps erased;
  erased.params = std::move(steps.params);
  erased.check = [plan](const Problem& problem, const Config& config, const sim::Target& target) {
    return plan(problem, config, target).status();
  };
  erased.emit = [plan, emit = std::move(steps.emit)](const Problem& problem, const Config& config,
                                                     const sim::Target& target,
                                                     sim::Program* program) -> absl::Status {
    absl::StatusOr<Plan> p = plan(problem, config, target);
    if (!p.ok()) return p.status();
    emit(*p, problem, target, program);
    return absl::OkStatus();
  };
  erased.verify = [plan, verify = std::move(steps.verify)](
                      const Problem& problem, const Config& config,
                      const sim::Target& target) -> absl::Status {
    absl::StatusOr<Plan> p = plan(problem, config, target);
    if (!p.ok()) return p.status();
    return verify(*p, config, target);
  };
  if (steps.estimate) {  // a config without a plan has no estimate
    erased.estimate = [plan, estimate = std::move(steps.estimate)](
                          const Problem& problem, const Config& config,
                          const sim::Target& target) -> std::optional<double> {
      absl::StatusOr<Plan> p = plan(problem, config, target);
      if (!p.ok()) return std::nullopt;
      return estimate(*p, problem, target);
    };
  }
  return erased;
}

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_LOWERING_PLANNED_KERNEL_H_

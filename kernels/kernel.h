// The kernel interface: everything a search needs to know about one kernel, nothing about search.
#ifndef TESSEL_KERNELS_KERNEL_H_
#define TESSEL_KERNELS_KERNEL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/key.h"
#include "sim/api.h"

namespace tessel::sim {
struct Program;
}

namespace tessel::kernels {

// A concrete problem: the kernel's named dims and the element type.
struct Problem {
  Dims dims;
  std::string dtype = "bf16";
};

// One tunable parameter and the values it may take, as written in configs.
struct Param {
  std::string name;
  std::vector<std::string> values;
  std::string help;
};

// A schedule space: the product of the params' values, filtered by a validity check.
// Indices address the product in mixed radix, the first param varying fastest.
class Space {
 public:
  using Check = std::function<absl::Status(const Config&)>;
  // A cheap analytic estimate of a valid config's time in ns, computed without simulating (bytes
  // moved, instruction counts, engine-time bounds). Only its order matters: the search ranks
  // candidates by it and measures the most promising first. nullopt when it cannot judge a config.
  using Estimate = std::function<std::optional<double>(const Config&)>;
  Space(std::vector<Param> params, Check check);

  const std::vector<Param>& params() const { return params_; }
  // Number of points in the full product (valid or not).
  uint64_t Size() const { return size_; }
  // The config at `index` (< Size()), params in order.
  Config Decode(uint64_t index) const;
  // The index of `config`, or nullopt when it names an unknown param or value.
  std::optional<uint64_t> Encode(const Config& config) const;
  // OK when valid; InvalidArgument with a human-readable reason (the violated rule) otherwise.
  absl::Status Validate(const Config& config) const;
  // Validate(Decode(index)), without re-checking what decoding guarantees (each param once, with
  // one of its values).
  absl::Status ValidateAt(uint64_t index) const;

  // Who built the space for what (the workload and the versions), so that what searches derive
  // from the space alone can be shared by the searches of one workload; empty (the default):
  // nothing is shared.
  void set_identity(std::string identity) { identity_ = std::move(identity); }
  const std::string& identity() const { return identity_; }

  // The kernel's analytic estimate, if it has one (recorded replay spaces have none).
  void set_estimate(Estimate estimate) { estimate_ = std::move(estimate); }
  bool has_estimate() const { return static_cast<bool>(estimate_); }
  // The estimate of `config`; nullopt without an estimate or when it cannot judge the config.
  std::optional<double> EstimateNs(const Config& config) const {
    return estimate_ ? estimate_(config) : std::nullopt;
  }

 private:
  std::vector<Param> params_;
  Check check_;
  Estimate estimate_;
  std::string identity_;
  uint64_t size_ = 1;
  // Distinct param names, each with values: a decoded config is then in the space as decoded.
  bool decoded_in_space_ = true;
};

class Kernel {
 public:
  virtual ~Kernel() = default;

  virtual std::string_view name() const = 0;
  // Bumped (with a comment saying why) whenever lowering changes results; old results go stale.
  virtual int version() const = 0;
  virtual std::string_view description() const = 0;
  // Dim names in their canonical order, e.g. {"M", "N", "K"}.
  virtual std::vector<std::string> dims() const = 0;
  virtual std::vector<std::string> dtypes() const = 0;
  // A valid problem that shows the whole space (`tessel kernels` lists its parameters): every dim
  // 1024 and the first dtype, unless the kernel needs other values.
  virtual Problem Example() const;

  // OK when `problem` names exactly this kernel's dims, each positive, and a supported dtype;
  // InvalidArgument saying what is missing or wrong otherwise.
  virtual absl::Status ValidateProblem(const Problem& problem, const sim::Target& target) const = 0;
  // The schedule space for `problem` on `target`. Fails as ValidateProblem does.
  virtual absl::StatusOr<Space> SpaceFor(const Problem& problem,
                                         const sim::Target& target) const = 0;
  // Lowers a valid config to a simulator program; InvalidArgument with the reason for an invalid
  // one.
  virtual absl::StatusOr<sim::Program> Lower(const Problem& problem, const Config& config,
                                             const sim::Target& target) const = 0;
  // What a plain compiler would pick. Always valid for a valid problem.
  virtual Config Default(const Problem& problem, const sim::Target& target) const = 0;
  // Runs the config's tiled schedule on the CPU for a reduced version of `problem` and compares it
  // with a plain reference. OK on a match; DataLoss describing the mismatch on a wrong answer;
  // InvalidArgument for an invalid config.
  virtual absl::Status Verify(const Problem& problem, const Config& config,
                              const sim::Target& target) const = 0;

  // The least work any schedule of `problem` must do: its flops (on TensorE, in `problem.dtype`)
  // and the HBM bytes it must move at least once (inputs read, outputs written).
  struct Work {
    double flops = 0;
    double hbm_bytes = 0;
  };
  virtual Work MinimumWork(const Problem& problem) const = 0;
};

// The workload's roofline on `target`: max(flops / peak of all the chip's cores,
// compulsory HBM bytes / the chip's HBM bandwidth). Independent of any config, so
// roofline / time is how close a schedule gets to the hardware's limit. 0 when the target has no
// peak for the dtype.
double RooflineNs(const Kernel& kernel, const Problem& problem, const sim::Target& target);

// The kernel called `name`, or nullptr.
const Kernel* FindKernel(std::string_view name);
// All kernels, sorted by name.
std::vector<const Kernel*> AllKernels();

// Lowers and simulates in one call. Returns what Lower or the simulator returns on failure.
absl::StatusOr<sim::SimResult> Evaluate(const Kernel& kernel, const Problem& problem,
                                        const Config& config, const sim::Target& target,
                                        const sim::SimOptions& options = {});

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_KERNEL_H_

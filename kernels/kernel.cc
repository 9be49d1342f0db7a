#include "kernels/kernel.h"

#include <algorithm>

#include "schema/strings.h"
#include "sim/program.h"
#include "sim/simulate.h"

namespace tessel::kernels {

Space::Space(std::vector<Param> params, Check check)
    : params_(std::move(params)), check_(std::move(check)) {
  size_ = 1;
  for (const Param& p : params_) size_ *= std::max<uint64_t>(1, p.values.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].values.empty()) decoded_in_space_ = false;
    for (size_t j = 0; j < i; ++j) {
      if (params_[j].name == params_[i].name) decoded_in_space_ = false;
    }
  }
}

Config Space::Decode(uint64_t index) const {
  auto value = [&](const Param& p) {
    const uint64_t radix = std::max<uint64_t>(1, p.values.size());
    std::string v = p.values.empty() ? "" : p.values[index % radix];
    index /= radix;
    return v;
  };
  if (!decoded_in_space_) {  // a repeated name keeps its first place and its last value
    Config config;
    for (const Param& p : params_) config.Set(p.name, value(p));
    return config;
  }
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(params_.size());
  for (const Param& p : params_) items.emplace_back(p.name, value(p));
  return Config::FromItems(std::move(items));
}

absl::Status Space::ValidateAt(uint64_t index) const {
  const Config config = Decode(index);
  if (!decoded_in_space_) return Validate(config);
  // Every param once, with one of its values: only the kernel's rules are left to check.
  return check_ ? check_(config) : absl::OkStatus();
}

std::optional<uint64_t> Space::Encode(const Config& config) const {
  uint64_t index = 0, scale = 1;
  if (config.size() != params_.size()) return std::nullopt;
  for (const Param& p : params_) {
    std::optional<std::string_view> value = config.Get(p.name);
    if (!value) return std::nullopt;
    auto it = std::find(p.values.begin(), p.values.end(), *value);
    if (it == p.values.end()) return std::nullopt;
    index += scale * uint64_t(it - p.values.begin());
    scale *= std::max<uint64_t>(1, p.values.size());
  }
  return index;
}

absl::Status Space::Validate(const Config& config) const {
  for (const auto& [name, value] : config.items()) {
    auto it = std::find_if(params_.begin(), params_.end(),
                           [&](const Param& p) { return p.name == name; });
    if (it == params_.end()) {
      return absl::InvalidArgumentError(StrCat("unknown parameter '", name, "'"));
    }
    if (std::find(it->values.begin(), it->values.end(), value) == it->values.end()) {
      return absl::InvalidArgumentError(
          StrCat("parameter ", name, "=", value, " is not one of ", StrJoin(it->values, "|")));
    }
  }
  for (const Param& p : params_) {
    if (!config.Get(p.name)) {
      return absl::InvalidArgumentError(StrCat("parameter '", p.name, "' missing"));
    }
  }
  return check_ ? check_(config) : absl::OkStatus();
}

Problem Kernel::Example() const {
  Problem problem;
  for (const std::string& dim : dims()) problem.dims.Set(dim, 1024);
  if (!dtypes().empty()) problem.dtype = dtypes().front();
  return problem;
}

absl::StatusOr<sim::SimResult> Evaluate(const Kernel& kernel, const Problem& problem,
                                        const Config& config, const sim::Target& target,
                                        const sim::SimOptions& options) {
  absl::StatusOr<sim::Program> program = kernel.Lower(problem, config, target);
  if (!program.ok()) return program.status();
  absl::StatusOr<sim::SimResult> result = sim::Simulate(target, *program, options);
  sim::RecycleProgram(*std::move(program));  // the thread's next lowering reuses its memory
  if (result.ok()) {
    const double minimum = RooflineNs(kernel, problem, target);
    if (minimum > 0) result->roofline_ns = minimum;
  }
  return result;
}

double RooflineNs(const Kernel& kernel, const Problem& problem, const sim::Target& target) {
  auto dtype = sim::ParseDType(problem.dtype);
  if (!dtype.ok()) return 0;
  const Kernel::Work work = kernel.MinimumWork(problem);
  const int cores = std::max(1, target.cores_per_chip);
  const double peak_tflops = target.PeakTflops(*dtype) * cores;
  if (peak_tflops <= 0) return 0;
  const double compute_ns = work.flops / (peak_tflops * 1e3);
  const double hbm_gbps = target.HbmGbps(cores);
  const double hbm_ns = hbm_gbps > 0 ? work.hbm_bytes / hbm_gbps : 0;
  return std::max(compute_ns, hbm_ns);
}

}  // namespace tessel::kernels

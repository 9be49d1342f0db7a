#include "kernels/workload.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"

namespace tessel::kernels {

std::string KnownKernelNames() {
  std::vector<std::string> names;
  for (const Kernel* kernel : AllKernels()) names.emplace_back(kernel->name());
  return StrJoin(names, ", ");
}

absl::StatusOr<sim::Target> CachedTarget(std::string_view name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, sim::Target, std::less<>>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(name); it != cache->end()) return it->second;
  }
  TESSEL_ASSIGN_OR_RETURN(sim::Target target, sim::LoadTarget(name));
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(std::string(name), std::move(target)).first->second;
}

v1::Workload ResolvedWorkload::ToProto() const {
  v1::Workload out;
  out.set_kernel(std::string(kernel->name()));
  for (const auto& [name, value] : problem.dims.items()) {
    v1::Dim* dim = out.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  out.set_dtype(problem.dtype);
  out.set_target(target.name);
  return out;
}

namespace {

// InvalidArgument naming `field` when `name` is longer than any name tessel knows.
absl::Status CheckNameLength(std::string_view field, std::string_view name) {
  if (name.size() <= kMaxNameBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(field, " is ", name.size(), " bytes; names are at most ", kMaxNameBytes));
}

}  // namespace

absl::StatusOr<const Kernel*> ResolveKernel(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        StrCat("no kernel given; known kernels: ", KnownKernelNames()));
  }
  TESSEL_RETURN_IF_ERROR(CheckNameLength("kernel", name));
  const Kernel* kernel = FindKernel(name);
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("unknown kernel '", Shown(name), "'; known kernels: ", KnownKernelNames()));
  }
  return kernel;
}

absl::StatusOr<sim::Target> ResolveTarget(std::string_view name) {
  TESSEL_RETURN_IF_ERROR(CheckNameLength("target", name));
  const std::string target_name = name.empty() ? kDefaultTarget : std::string(name);
  absl::StatusOr<sim::Target> target = CachedTarget(target_name);
  if (!target.ok()) {
    std::string message(target.status().message());
    if (message.find(Shown(target_name)) == std::string::npos) {
      message = StrCat("unknown target '", Shown(target_name), "': ", message);
    }
    return absl::InvalidArgumentError(message);
  }
  return target;
}

namespace {

// The dims of a wire workload; Dims cannot hold an empty name or a repeated one.
absl::StatusOr<Dims> DimsOf(const v1::Workload& workload) {
  if (workload.dims_size() > kMaxDims) {
    return absl::InvalidArgumentError(
        StrCat("dims has ", workload.dims_size(), " entries; at most ", kMaxDims));
  }
  Dims dims;
  for (const v1::Dim& dim : workload.dims()) {
    if (dim.name().empty()) return absl::InvalidArgumentError("a dim has an empty name");
    TESSEL_RETURN_IF_ERROR(CheckNameLength("dim name", dim.name()));
    if (dims.Has(dim.name())) {
      return absl::InvalidArgumentError(
          StrCat("dim ", Shown(dim.name()), " is given more than once"));
    }
    // Zero is a value (conv2d's padding); each kernel's check says which dims must be positive.
    if (dim.value() < 0) {
      return absl::InvalidArgumentError(
          StrCat("dim ", Shown(dim.name()), "=", dim.value(), " must not be negative"));
    }
    dims.Set(dim.name(), dim.value());
  }
  return dims;
}

// InvalidArgument when the problem's inputs and outputs do not fit the target's HBM, or when it
// needs more TensorE instructions than one trial may simulate (the limits in workload.h).
absl::Status CheckSize(const ResolvedWorkload& w) {
  const Kernel::Work work = w.kernel->MinimumWork(w.problem);
  constexpr double kGiB = double(int64_t{1} << 30);
  if (w.target.hbm_gib_per_chip > 0 && work.hbm_bytes > w.target.hbm_gib_per_chip * kGiB) {
    return absl::InvalidArgumentError(fmt::format(
        "dims: the workload's inputs and outputs take {:.1f} GiB; {}'s HBM holds {:g} GiB",
        work.hbm_bytes / kGiB, w.target.name, w.target.hbm_gib_per_chip));
  }
  const double tiles = work.flops / kLargestTileFlops;
  if (tiles > kMaxTensorInstructions) {
    return absl::InvalidArgumentError(
        fmt::format("dims: the workload needs at least {:.3g} TensorE instructions; a trial "
                    "simulates at most {:g}",
                    tiles, kMaxTensorInstructions));
  }
  return absl::OkStatus();
}

// Fills out->problem from `dims` (any order) and `dtype` for the resolved kernel and target.
absl::Status ResolveProblem(const Dims& dims, const std::string& dtype, ResolvedWorkload* out) {
  const std::vector<std::string> names = out->kernel->dims();
  for (const auto& [name, value] : dims.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(StrCat("kernel ", out->kernel->name(), " has no dim '",
                                               Shown(name), "'; its dims are ",
                                               StrJoin(names, ", ")));
    }
    if (value > kMaxDimValue) {
      return absl::InvalidArgumentError(
          StrCat("dim ", name, "=", value, " exceeds the largest dim, ", kMaxDimValue));
    }
  }
  TESSEL_RETURN_IF_ERROR(CheckNameLength("dtype", dtype));
  for (const std::string& name : names) {
    std::optional<int64_t> value = dims.Get(name);
    if (!value) {
      return absl::InvalidArgumentError(StrCat("missing dim ", name, " for kernel ",
                                               out->kernel->name(), " (needs ",
                                               StrJoin(names, ", "), ")"));
    }
    out->problem.dims.Set(name, *value);
  }
  out->problem.dtype = dtype.empty() ? kDefaultDtype : dtype;
  if (absl::Status valid = out->kernel->ValidateProblem(out->problem, out->target); !valid.ok()) {
    return absl::InvalidArgumentError(std::string(valid.message()));
  }
  return CheckSize(*out);
}

}  // namespace

absl::StatusOr<ResolvedWorkload> Resolve(const WorkloadRequest& request) {
  ResolvedWorkload out;
  TESSEL_ASSIGN_OR_RETURN(out.kernel, ResolveKernel(request.kernel));
  TESSEL_ASSIGN_OR_RETURN(out.target, ResolveTarget(request.target));
  TESSEL_RETURN_IF_ERROR(ResolveProblem(request.dims, request.dtype, &out));
  return out;
}

absl::StatusOr<ResolvedWorkload> Resolve(const v1::Workload& workload) {
  ResolvedWorkload out;  // kernel, then target, then dims and dtype, as for a WorkloadRequest
  TESSEL_ASSIGN_OR_RETURN(out.kernel, ResolveKernel(workload.kernel()));
  TESSEL_ASSIGN_OR_RETURN(out.target, ResolveTarget(workload.target()));
  TESSEL_ASSIGN_OR_RETURN(const Dims dims, DimsOf(workload));
  TESSEL_RETURN_IF_ERROR(ResolveProblem(dims, workload.dtype(), &out));
  return out;
}

}  // namespace tessel::kernels

// Workload resolution, written once: a kernel name, target name, dtype and named dims checked
// against the kernel registry and the target files, with the defaults (schema/vocab.h) filled in.
// The CLI, the server and the worker all resolve workloads here, so they accept and reject the
// same workloads with the same messages.
#ifndef TESSEL_KERNELS_WORKLOAD_H_
#define TESSEL_KERNELS_WORKLOAD_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/key.h"
#include "schema/tessel.pb.h"
#include "sim/target.h"

namespace tessel::kernels {

// Limits on what a workload may ask for, checked by Resolve before anything is computed from it
// (docs/api.md, "Limits"), so no request can make a worker or the CLI lower a program for hours:
//   names (kernel, target, dtype, dim) at most kMaxNameBytes; at most kMaxDims dims;
//   every dim at most kMaxDimValue;
//   inputs and outputs (Kernel::MinimumWork's bytes) within the target's HBM (hbm_gib_per_chip);
//   at least flops / kLargestTileFlops TensorE instructions, at most kMaxTensorInstructions
//   (and a lowered program holds at most 2^21 instructions per core: sim/program.h).
inline constexpr size_t kMaxNameBytes = 64;
inline constexpr int kMaxDims = 16;
inline constexpr int64_t kMaxDimValue = int64_t{1} << 24;
// The most flops one TensorE instruction does on any target here: K=256 (fp8 double row) x 128
// stationary columns x 512 moving columns, two flops each.
inline constexpr double kLargestTileFlops = 2.0 * 256 * 128 * 512;
inline constexpr double kMaxTensorInstructions = double(int64_t{1} << 20);

// What a caller names. Empty `target` and `dtype` mean kDefaultTarget and kDefaultDtype; `dims`
// may be in any order.
struct WorkloadRequest {
  std::string kernel;
  Dims dims;
  std::string dtype;
  std::string target;
};

// A workload checked against the registry.
struct ResolvedWorkload {
  const Kernel* kernel = nullptr;  // from the registry (never owned)
  sim::Target target;
  Problem problem;  // dims in the kernel's order (Kernel::dims()), dtype filled in

  // "M=512,N=512,K=512": the dims in the kernel's order.
  std::string Shape() const { return problem.dims.ToString(); }
  // The wire form: kernel, dims in the kernel's order, dtype and the target's name.
  v1::Workload ToProto() const;
};

// Resolves `request`. InvalidArgument with a message naming the field otherwise:
//   "no kernel given; known kernels: ..." / "unknown kernel 'x'; known kernels: ...";
//   "unknown target 'x': ..." (the target loader's reason);
//   "kernel K has no dim 'Q'; its dims are ..." / "missing dim K for kernel matmul (needs ...)";
//   the kernel's ValidateProblem reason (non-positive dims, an unsupported dtype, ...);
//   a limit above, naming the field and the limit. Names are never echoed whole (Shown).
absl::StatusOr<ResolvedWorkload> Resolve(const WorkloadRequest& request);

// Resolves a wire workload: as above, after checking its dims list, which a Dims value cannot
// express ("a dim has an empty name", "dim M is given more than once", "dim M=0 must be
// positive").
absl::StatusOr<ResolvedWorkload> Resolve(const v1::Workload& workload);

// The registered kernel called `name`; InvalidArgument "no kernel given; ..." or "unknown kernel
// 'x'; known kernels: ..." otherwise. The first step of Resolve, for callers that need the kernel
// before they have dims (e.g. to say which dims a missing --shape needs).
absl::StatusOr<const Kernel*> ResolveKernel(std::string_view name);
// The target called `name` (kDefaultTarget when empty), cached; InvalidArgument naming it when
// there is no such target. The second step of Resolve.
absl::StatusOr<sim::Target> ResolveTarget(std::string_view name);

// sim::LoadTarget, parsed once per process and name (targets are immutable data). Thread-safe.
absl::StatusOr<sim::Target> CachedTarget(std::string_view name);

// "a, b, c": the registered kernel names, sorted.
std::string KnownKernelNames();

}  // namespace tessel::kernels

#endif  // TESSEL_KERNELS_WORKLOAD_H_

#include "server/wire.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "schema/strings.h"

namespace tessel::server {
namespace {

constexpr char kDefaultDtype[] = "bf16";
constexpr char kDefaultTarget[] = "snc2";

std::vector<std::string> KernelNames() {
  std::vector<std::string> names;
  for (const kernels::Kernel* k : kernels::AllKernels()) names.emplace_back(k->name());
  return names;
}

}  // namespace

absl::StatusOr<sim::Target> CachedTarget(const std::string& name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, sim::Target>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(name); it != cache->end()) return it->second;
  }
  auto target = sim::LoadTarget(name);
  if (!target.ok()) return target.status();
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(name, *std::move(target)).first->second;
}

absl::StatusOr<ResolvedWorkload> ResolveWorkload(const v1::Workload& workload) {
  ResolvedWorkload out;
  if (workload.kernel().empty()) {
    return absl::InvalidArgumentError(
        StrCat("no kernel given; known kernels: ", StrJoin(KernelNames(), ", ")));
  }
  out.kernel = kernels::FindKernel(workload.kernel());
  if (out.kernel == nullptr) {
    return absl::InvalidArgumentError(StrCat("unknown kernel '", workload.kernel(),
                                             "'; known kernels: ", StrJoin(KernelNames(), ", ")));
  }
  const std::string target_name = workload.target().empty() ? kDefaultTarget : workload.target();
  auto target = CachedTarget(target_name);
  if (!target.ok()) {
    return absl::InvalidArgumentError(std::string(target.status().message()));
  }
  out.target = std::move(*target);

  Dims given;
  for (const v1::Dim& dim : workload.dims()) {
    if (dim.name().empty()) return absl::InvalidArgumentError("a dim has an empty name");
    if (given.Has(dim.name())) {
      return absl::InvalidArgumentError(StrCat("dim ", dim.name(), " is given more than once"));
    }
    if (dim.value() <= 0) {
      return absl::InvalidArgumentError(
          StrCat("dim ", dim.name(), "=", dim.value(), " must be positive"));
    }
    given.Set(dim.name(), dim.value());
  }
  const std::vector<std::string> names = out.kernel->dims();
  for (const auto& [name, value] : given.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(StrCat("kernel ", out.kernel->name(), " has no dim '", name,
                                               "'; its dims are ", StrJoin(names, ", ")));
    }
  }
  for (const std::string& name : names) {
    auto value = given.Get(name);
    if (!value) {
      return absl::InvalidArgumentError(StrCat("missing dim ", name, " for kernel ",
                                               out.kernel->name(), " (needs ", StrJoin(names, ", "),
                                               ")"));
    }
    out.problem.dims.Set(name, *value);
  }
  out.problem.dtype = workload.dtype().empty() ? kDefaultDtype : workload.dtype();
  if (absl::Status s = out.kernel->ValidateProblem(out.problem, out.target); !s.ok()) {
    return absl::InvalidArgumentError(std::string(s.message()));
  }
  return out;
}

WorkloadRecord WorkloadRecordFor(const ResolvedWorkload& workload) {
  return WorkloadRecord{std::string(workload.kernel->name()), workload.problem.dims.Canonical(),
                        workload.problem.dtype, workload.target.name};
}

v1::Workload WorkloadProto(const JobRecord& job) {
  v1::Workload out;
  out.set_kernel(job.workload.kernel);
  out.set_dtype(job.workload.dtype);
  out.set_target(job.workload.target);
  auto dims = Dims::Parse(job.dims_display.empty() ? job.workload.dims : job.dims_display);
  if (dims.ok()) {
    for (const auto& [name, value] : dims->items()) {
      v1::Dim* dim = out.add_dims();
      dim->set_name(name);
      dim->set_value(value);
    }
  }
  return out;
}

std::string JobStateToString(v1::JobState state) {
  switch (state) {
    case v1::JOB_QUEUED:
      return "queued";
    case v1::JOB_RUNNING:
      return "running";
    case v1::JOB_COMPLETED:
      return "completed";
    case v1::JOB_CANCELLED:
      return "cancelled";
    case v1::JOB_FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

v1::JobState JobStateFromString(const std::string& state) {
  if (state == "queued") return v1::JOB_QUEUED;
  if (state == "running") return v1::JOB_RUNNING;
  if (state == "completed") return v1::JOB_COMPLETED;
  if (state == "cancelled") return v1::JOB_CANCELLED;
  if (state == "failed") return v1::JOB_FAILED;
  return v1::JOB_STATE_UNSPECIFIED;
}

std::string TrialStatusToString(v1::TrialStatus status) {
  switch (status) {
    case v1::TRIAL_OK:
      return "OK";
    case v1::TRIAL_INVALID_CONFIG:
      return "INVALID_CONFIG";
    case v1::TRIAL_WRONG_ANSWER:
      return "WRONG_ANSWER";
    case v1::TRIAL_RUNTIME_ERROR:
      return "RUNTIME_ERROR";
    case v1::TRIAL_TIMEOUT:
      return "TIMEOUT";
    case v1::TRIAL_WORKER_LOST:
      return "WORKER_LOST";
    case v1::TRIAL_CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

v1::TrialStatus TrialStatusFromString(const std::string& status) {
  if (status == "OK") return v1::TRIAL_OK;
  if (status == "INVALID_CONFIG") return v1::TRIAL_INVALID_CONFIG;
  if (status == "WRONG_ANSWER") return v1::TRIAL_WRONG_ANSWER;
  if (status == "RUNTIME_ERROR") return v1::TRIAL_RUNTIME_ERROR;
  if (status == "TIMEOUT") return v1::TRIAL_TIMEOUT;
  if (status == "WORKER_LOST") return v1::TRIAL_WORKER_LOST;
  if (status == "CANCELLED") return v1::TRIAL_CANCELLED;
  return v1::TRIAL_STATUS_UNSPECIFIED;
}

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_COMPLETED || state == v1::JOB_CANCELLED || state == v1::JOB_FAILED;
}

v1::TrialResult TrialResultFromRecord(const TrialRecord& record) {
  v1::TrialResult out;
  out.set_trial_id(record.id);
  out.set_status(TrialStatusFromString(record.status));
  out.set_time_ns(record.time_ns.value_or(0));
  for (double s : record.samples_ns) out.add_samples_ns(s);
  out.set_message(record.message);
  out.set_bound(record.bound);
  out.set_stats_json(record.stats_json);
  out.set_verified(record.verified);
  out.set_config(record.config);
  out.set_worker_id(record.worker_id);
  return out;
}

v1::BestConfig BestProto(const BestRecord& best) {
  v1::BestConfig out;
  out.set_kernel(best.workload.kernel);
  out.set_dims(best.workload.dims);
  out.set_dtype(best.workload.dtype);
  out.set_target(best.workload.target);
  out.set_kernel_version(best.kernel_version);
  out.set_target_version(best.target_version);
  out.set_config(best.config);
  out.set_time_ns(best.time_ns);
  out.set_job_id(best.job_id);
  out.set_snapshot_id(best.snapshot_id);
  out.set_published_unix_ms(best.published_ms);
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace tessel::server

#include "server/wire.h"

#include <optional>
#include <string>
#include <vector>

#include "schema/strings.h"
#include "schema/vocab.h"

namespace tessel::server {

WorkloadRecord WorkloadRecordFor(const kernels::ResolvedWorkload& workload) {
  return WorkloadRecord{std::string(workload.kernel->name()), workload.problem.dims.Canonical(),
                        workload.problem.dtype, workload.target.name};
}

v1::Workload WorkloadProto(const JobRecord& job) {
  v1::Workload out;
  SetWorkloadNames(job.workload, out);
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

bool IsFinal(v1::JobState state) {
  std::optional<JobState> known = JobStateFromProto(state);
  return known && tessel::IsFinal(*known);
}

std::string ShapeOf(const v1::Workload& workload) {
  std::vector<std::string> pieces;
  for (const v1::Dim& dim : workload.dims()) pieces.push_back(StrCat(dim.name(), "=", dim.value()));
  return StrJoin(pieces, ",");
}

v1::TrialResult TrialResultFromRecord(const TrialRecord& record) {
  v1::TrialResult out;
  out.set_trial_id(record.id);
  out.set_status(ToProto(record.status));
  SetMeasuredConfig(record.config, record.time_ns.value_or(0), out);
  for (double s : record.samples_ns) out.add_samples_ns(s);
  out.set_message(record.message);
  out.set_bound(record.bound);
  out.set_stats_json(record.stats_json);
  out.set_verified(record.verified);
  out.set_worker_id(record.worker_id);
  out.set_arm(record.arm);
  return out;
}

v1::BestConfig BestProto(const BestRecord& best) {
  v1::BestConfig out;
  SetWorkloadNames(best.workload, out);
  out.set_dims(best.workload.dims);
  SetVersions(best, out);
  SetMeasuredConfig(best.config, best.time_ns, out);
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

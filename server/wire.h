// The wire: conversions between the types of schema/tessel.proto, the store's records and the
// kernel registry, plus the one place where absl::Status becomes grpc::Status. States and statuses
// convert through schema/vocab.h. Depends on no other server/ file but the store's records.
#ifndef TESSEL_SERVER_WIRE_H_
#define TESSEL_SERVER_WIRE_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/workload.h"
#include "schema/tessel.pb.h"
#include "server/store.h"

namespace tessel::server {

namespace v1 = ::tessel::v1;

// Workloads are resolved by kernels::Resolve (kernels/workload.h), once per request; these turn
// a resolved workload into the store's record and a stored job back into the wire's workload.
WorkloadRecord WorkloadRecordFor(const kernels::ResolvedWorkload& workload);
// The job's workload with dims in the order the job shows them.
v1::Workload WorkloadProto(const JobRecord& job);

// Sets `out`'s kernel, dtype and target (strings in every message that has them) from
// `workload`. Dims are left to the caller: a string in some messages, repeated v1::Dim in others.
template <typename Proto>
void SetWorkloadNames(const WorkloadRecord& workload, Proto& out) {
  out.set_kernel(workload.kernel);
  out.set_dtype(workload.dtype);
  out.set_target(workload.target);
}

// Sets `out`'s kernel_version and target_version from a record that has both (a JobRecord or
// a BestRecord).
template <typename Record, typename Proto>
void SetVersions(const Record& record, Proto& out) {
  out.set_kernel_version(record.kernel_version);
  out.set_target_version(record.target_version);
}

// Sets `out`'s config and time_ns (a v1::TrialResult or a v1::BestConfig: a config and its
// measured time).
template <typename Proto>
void SetMeasuredConfig(const std::string& config, double time_ns, Proto& out) {
  out.set_config(config);
  out.set_time_ns(time_ns);
}

// schema/vocab.h's IsFinal for the proto enum: completed, cancelled and failed.
bool IsFinal(v1::JobState state);

v1::TrialResult TrialResultFromRecord(const TrialRecord& record);
// The workload's dims as sent, "M=512,N=512,K=512" (for tables and pages).
std::string ShapeOf(const v1::Workload& workload);
v1::BestConfig BestProto(const BestRecord& best);

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_WIRE_H_

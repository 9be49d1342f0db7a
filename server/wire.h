// The wire: conversions between the types of schema/tessel.proto, the store's records and the
// kernel registry, plus the one place where absl::Status becomes grpc::Status. Depends on no other
// server/ file but the store's records.
#ifndef TESSEL_SERVER_WIRE_H_
#define TESSEL_SERVER_WIRE_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/tessel.pb.h"
#include "server/store.h"
#include "sim/target.h"

namespace tessel::server {

namespace v1 = ::tessel::v1;

// A workload checked against the registry: the kernel, its target and the problem with dims in
// the kernel's order.
struct ResolvedWorkload {
  const kernels::Kernel* kernel = nullptr;
  sim::Target target;
  kernels::Problem problem;
};

// Checks a workload and fills defaults (dtype bf16, target snc2). InvalidArgument with a message a
// person can act on for an unknown kernel or target, missing, repeated, unknown or non-positive
// dims, or an unsupported dtype.
absl::StatusOr<ResolvedWorkload> ResolveWorkload(const v1::Workload& workload);

// sim::LoadTarget, parsed once per process and name (targets are immutable data).
absl::StatusOr<sim::Target> CachedTarget(const std::string& name);

WorkloadRecord WorkloadRecordFor(const ResolvedWorkload& workload);
// The job's workload with dims in the order the job shows them.
v1::Workload WorkloadProto(const JobRecord& job);

std::string JobStateToString(v1::JobState state);
v1::JobState JobStateFromString(const std::string& state);
std::string TrialStatusToString(v1::TrialStatus status);
v1::TrialStatus TrialStatusFromString(const std::string& status);

// True for completed, cancelled and failed: a job in a final state never changes again.
bool IsFinal(v1::JobState state);

v1::TrialResult TrialResultFromRecord(const TrialRecord& record);
v1::BestConfig BestProto(const BestRecord& best);

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_WIRE_H_

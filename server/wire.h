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

// schema/vocab.h's IsFinal for the proto enum: completed, cancelled and failed.
bool IsFinal(v1::JobState state);

v1::TrialResult TrialResultFromRecord(const TrialRecord& record);
v1::BestConfig BestProto(const BestRecord& best);

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_WIRE_H_

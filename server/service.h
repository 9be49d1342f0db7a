// The gRPC services (callback API). Thin: each handler validates the request's shape, calls the
// Scheduler, and converts absl::Status to grpc::Status.
#ifndef TESSEL_SERVER_SERVICE_H_
#define TESSEL_SERVER_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <memory>

#include "server/auth.h"
#include "server/client_quota.h"
#include "server/scheduler.h"

namespace tessel::server {

// v1::TesselService (jobs, trials, watches, lookups, export and import, the kernel, target and
// worker lists) over `scheduler`. Every call is first checked by `auth` (server/auth.h: the
// caller's token and role), and refused with its status when the check fails. Each client (peer
// address) may hold `limits` open watches and active jobs (RESOURCE_EXHAUSTED beyond). Both must
// outlive the service.
std::unique_ptr<grpc::Service> MakeTesselService(Scheduler* scheduler, const Authorizer* auth,
                                                 ClientLimits limits = {});

// v1::WorkerService (register, lease, report, heartbeat) over `scheduler`, each call checked by
// `auth` first. Both must outlive the service.
std::unique_ptr<grpc::Service> MakeWorkerService(Scheduler* scheduler, const Authorizer* auth);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SERVICE_H_

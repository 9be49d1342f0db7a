// The gRPC services (callback API). Thin: each handler validates the request's shape, calls the
// Scheduler, and converts absl::Status to grpc::Status.
#ifndef TESSEL_SERVER_SERVICE_H_
#define TESSEL_SERVER_SERVICE_H_

#include "schema/tessel.grpc.pb.h"
#include "server/scheduler.h"

namespace tessel::server {

class TesselServiceImpl final : public v1::TesselService::CallbackService {
 public:
  // `scheduler` must outlive the service.
  explicit TesselServiceImpl(Scheduler* scheduler) : scheduler_(scheduler) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* context,
                                       const v1::ListTrialsRequest* request,
                                       v1::ListTrialsResponse* response) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const v1::LookupRequest* request,
                                   v1::LookupResponse* response) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* context,
                                        const v1::ListKernelsRequest* request,
                                        v1::ListKernelsResponse* response) override;
  grpc::ServerUnaryReactor* ListTargets(grpc::CallbackServerContext* context,
                                        const v1::ListTargetsRequest* request,
                                        v1::ListTargetsResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context,
                                   const v1::ExportRequest* request,
                                   v1::ExportResponse* response) override;
  grpc::ServerUnaryReactor* Import(grpc::CallbackServerContext* context,
                                   const v1::ImportRequest* request,
                                   v1::ImportResponse* response) override;

 private:
  Scheduler* const scheduler_;
};

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(Scheduler* scheduler) : scheduler_(scheduler) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* context,
                                  const v1::LeaseRequest* request,
                                  v1::LeaseResponse* response) override;
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const v1::ReportRequest* request,
                                   v1::ReportResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;

 private:
  Scheduler* const scheduler_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SERVICE_H_

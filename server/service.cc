#include "server/service.h"

#include <deque>
#include <memory>
#include <mutex>

#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/strings.h"
#include "server/catalog.h"
#include "server/wire.h"
#include "sim/target.h"

namespace tessel::server {
namespace {

// Most jobs one ListJobs call returns.
constexpr int kMaxListedJobs = 10'000;
constexpr int kDefaultListedJobs = 100;

template <typename T>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 const absl::StatusOr<T>& result, T* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = *result;
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// Calls `start` with a callback that answers the call with the result it is given (later, from
// any thread), and returns the call's reactor.
template <typename T, typename Start>
grpc::ServerUnaryReactor* AnswerLater(grpc::CallbackServerContext* context, T* response,
                                      Start start) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  start([reactor, response](absl::StatusOr<T> result) {
    if (result.ok()) *response = std::move(*result);
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* Reject(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Answers with every item of `result` moved into `items`, or with its error.
template <typename T>
grpc::ServerUnaryReactor* AnswerEach(grpc::CallbackServerContext* context,
                                     absl::StatusOr<std::vector<T>> result,
                                     google::protobuf::RepeatedPtrField<T>* items) {
  if (result.ok()) {
    for (T& item : *result) *items->Add() = std::move(item);
  }
  return Reject(context, result.status());
}

// Streams job events to one client. Scheduler callbacks reach the reactor through a shared
// state that outlives it, so a late event after the call ended is dropped, not a use-after-free.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(Scheduler* scheduler, int64_t job_id)
      : scheduler_(scheduler), state_(std::make_shared<State>()) {
    state_->reactor = this;
    std::shared_ptr<State> state = state_;
    auto watch = scheduler_->Watch(
        job_id, [state](const v1::JobEvent& event) { return state->Push(event); });
    if (!watch.ok()) {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->FinishLocked(ToGrpcStatus(watch.status()));
      return;
    }
    watch_id_ = *watch;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->writing = false;
    if (!ok) {
      state_->FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    state_->queue.pop_front();
    state_->WriteNextLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
    }
    if (watch_id_ != 0) scheduler_->Unwatch(watch_id_);
    delete this;
  }

 private:
  struct State {
    std::mutex mu;
    WatchReactor* reactor = nullptr;  // null once the call is done
    std::deque<v1::JobEvent> queue;   // front is being written when `writing`
    bool writing = false;
    bool finished = false;
    bool final_queued = false;

    // Returns false when the watch should end.
    bool Push(const v1::JobEvent& event) {
      std::lock_guard<std::mutex> lock(mu);
      if (finished || reactor == nullptr || final_queued) return false;
      queue.push_back(event);
      final_queued = IsFinal(event.job().state());
      WriteNextLocked();
      return !final_queued;
    }
    // REQUIRES: mu held.
    void WriteNextLocked() {
      if (finished || writing || reactor == nullptr) return;
      if (queue.empty()) {
        if (final_queued) FinishLocked(grpc::Status::OK);
        return;
      }
      writing = true;
      reactor->StartWrite(&queue.front());
    }
    // REQUIRES: mu held.
    void FinishLocked(const grpc::Status& status) {
      if (finished || reactor == nullptr) return;
      finished = true;
      reactor->Finish(status);
    }
  };

  Scheduler* const scheduler_;
  std::shared_ptr<State> state_;
  int64_t watch_id_ = 0;
};

}  // namespace

grpc::ServerUnaryReactor* TesselServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                       const v1::SubmitJobRequest* request,
                                                       v1::Job* response) {
  return Answer(context, scheduler_->Submit(*request), response);
}

grpc::ServerUnaryReactor* TesselServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                    const v1::GetJobRequest* request,
                                                    v1::Job* response) {
  if (request->job_id() <= 0) {
    return Reject(context, absl::InvalidArgumentError("job_id must be positive"));
  }
  return Answer(context, scheduler_->GetJob(request->job_id()), response);
}

grpc::ServerUnaryReactor* TesselServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                      const v1::ListJobsRequest* request,
                                                      v1::ListJobsResponse* response) {
  if (request->limit() < 0 || request->limit() > kMaxListedJobs) {
    return Reject(context, absl::InvalidArgumentError(
                               StrCat("limit must be between 0 and ", kMaxListedJobs)));
  }
  return AnswerEach(
      context, scheduler_->ListJobs(request->limit() == 0 ? kDefaultListedJobs : request->limit()),
      response->mutable_jobs());
}

grpc::ServerUnaryReactor* TesselServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                       const v1::CancelJobRequest* request,
                                                       v1::Job* response) {
  if (request->job_id() <= 0) {
    return Reject(context, absl::InvalidArgumentError("job_id must be positive"));
  }
  return Answer(context, scheduler_->Cancel(request->job_id()), response);
}

grpc::ServerWriteReactor<v1::JobEvent>* TesselServiceImpl::WatchJob(
    grpc::CallbackServerContext* /*context*/, const v1::WatchJobRequest* request) {
  return new WatchReactor(scheduler_, request->job_id());
}

grpc::ServerUnaryReactor* TesselServiceImpl::ListTrials(grpc::CallbackServerContext* context,
                                                        const v1::ListTrialsRequest* request,
                                                        v1::ListTrialsResponse* response) {
  if (request->job_id() <= 0) {
    return Reject(context, absl::InvalidArgumentError("job_id must be positive"));
  }
  return AnswerEach(context, scheduler_->ListTrials(request->job_id()), response->mutable_trials());
}

grpc::ServerUnaryReactor* TesselServiceImpl::Lookup(grpc::CallbackServerContext* context,
                                                    const v1::LookupRequest* request,
                                                    v1::LookupResponse* response) {
  return Answer(context, scheduler_->Lookup(*request), response);
}

grpc::ServerUnaryReactor* TesselServiceImpl::ListKernels(grpc::CallbackServerContext* context,
                                                         const v1::ListKernelsRequest* /*request*/,
                                                         v1::ListKernelsResponse* response) {
  *response = Catalog::ListKernels();
  return Reject(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TesselServiceImpl::ListTargets(grpc::CallbackServerContext* context,
                                                         const v1::ListTargetsRequest* /*request*/,
                                                         v1::ListTargetsResponse* response) {
  for (const std::string& name : sim::TargetNames()) {
    auto target = kernels::CachedTarget(name);
    if (!target.ok()) continue;
    v1::TargetInfo* info = response->add_targets();
    info->set_name(target->name);
    info->set_version(target->version);
    info->set_description(target->description);
  }
  return Reject(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TesselServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                         const v1::ListWorkersRequest* /*request*/,
                                                         v1::ListWorkersResponse* response) {
  return AnswerEach<v1::WorkerInfo>(context, scheduler_->ListWorkers(),
                                    response->mutable_workers());
}

grpc::ServerUnaryReactor* TesselServiceImpl::Export(grpc::CallbackServerContext* context,
                                                    const v1::ExportRequest* request,
                                                    v1::ExportResponse* response) {
  return Answer(context, scheduler_->Export(*request), response);
}

grpc::ServerUnaryReactor* TesselServiceImpl::Import(grpc::CallbackServerContext* context,
                                                    const v1::ImportRequest* request,
                                                    v1::ImportResponse* response) {
  return Answer(context, scheduler_->Import(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return Answer(context, scheduler_->Register(*request), response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Lease(grpc::CallbackServerContext* context,
                                                   const v1::LeaseRequest* request,
                                                   v1::LeaseResponse* response) {
  return AnswerLater(context, response,
                     [&](auto done) { scheduler_->Lease(*request, std::move(done)); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Report(grpc::CallbackServerContext* context,
                                                    const v1::ReportRequest* request,
                                                    v1::ReportResponse* response) {
  if (request->worker_id().empty()) {
    return Reject(context, absl::InvalidArgumentError("worker_id is required"));
  }
  return AnswerLater(context, response,
                     [&](auto done) { scheduler_->Report(*request, std::move(done)); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return Answer(context, scheduler_->Heartbeat(*request), response);
}

}  // namespace tessel::server

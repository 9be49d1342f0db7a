#include "server/service.h"

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/tessel.grpc.pb.h"
#include "server/catalog.h"
#include "server/client_quota.h"
#include "server/request_check.h"
#include "server/wire.h"
#include "sim/target.h"

namespace tessel::server {
namespace {

// Most jobs one ListJobs call returns.
constexpr int kMaxListedJobs = 10'000;
constexpr int kDefaultListedJobs = 100;
// ListTrials pages: trials per page by default and at most, and the bytes a page stays under
// (gRPC's default message limit is 4 MiB).
constexpr int kDefaultTrialPage = 1000;
constexpr int kMaxTrialPage = 10'000;
constexpr size_t kMaxPageBytes = size_t{3} << 20;

// Answers the call at once with `status` (the response as it stands when OK).
grpc::ServerUnaryReactor* AnswerNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
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

// Moves `result`'s value into `response`; returns its status.
template <typename T>
absl::Status Set(absl::StatusOr<T> result, T* response) {
  if (result.ok()) *response = std::move(*result);
  return result.status();
}

// Moves every item of `result` into `items`; returns its status.
template <typename T>
absl::Status AddEach(absl::StatusOr<std::vector<T>> result,
                     google::protobuf::RepeatedPtrField<T>* items) {
  if (result.ok()) {
    for (T& item : *result) *items->Add() = std::move(item);
  }
  return result.status();
}

// InvalidArgument unless `job_id` is positive.
absl::Status CheckJobId(int64_t job_id) { return CheckId("job_id", job_id); }

// The rule of every unary method of both services, one overload per request type: check the
// request's shape (an error answers the call without asking the scheduler), ask the scheduler,
// fill the response. Run answers at once; Start answers through `done`, later, from any thread.
class Rules {
 public:
  explicit Rules(Scheduler* scheduler) : scheduler_(scheduler) {}

  // ---- TesselService ----
  absl::Status Run(const v1::SubmitJobRequest& request, v1::Job* response) {
    TESSEL_RETURN_IF_ERROR(CheckRequest(request));
    return Set(scheduler_->Submit(request), response);
  }
  absl::Status Run(const v1::GetJobRequest& request, v1::Job* response) {
    TESSEL_RETURN_IF_ERROR(CheckJobId(request.job_id()));
    return Set(scheduler_->GetJob(request.job_id()), response);
  }
  absl::Status Run(const v1::ListJobsRequest& request, v1::ListJobsResponse* response) {
    if (request.limit() < 0 || request.limit() > kMaxListedJobs) {
      return absl::InvalidArgumentError(StrCat("limit must be between 0 and ", kMaxListedJobs));
    }
    const int limit = request.limit() == 0 ? kDefaultListedJobs : request.limit();
    TESSEL_ASSIGN_OR_RETURN(const int64_t before, PageTokenId(request.page_token(), 'j'));
    TESSEL_RETURN_IF_ERROR(AddEach(scheduler_->ListJobs(limit, before), response->mutable_jobs()));
    if (response->jobs_size() == limit) {
      response->set_next_page_token(PageToken('j', response->jobs(limit - 1).id()));
    }
    return absl::OkStatus();
  }
  absl::Status Run(const v1::CancelJobRequest& request, v1::Job* response) {
    TESSEL_RETURN_IF_ERROR(CheckJobId(request.job_id()));
    return Set(scheduler_->Cancel(request.job_id()), response);
  }
  absl::Status Run(const v1::ListTrialsRequest& request, v1::ListTrialsResponse* response) {
    TESSEL_RETURN_IF_ERROR(CheckJobId(request.job_id()));
    if (request.page_size() < 0 || request.page_size() > kMaxTrialPage) {
      return absl::InvalidArgumentError(StrCat("page_size must be between 0 and ", kMaxTrialPage));
    }
    const int page_size = request.page_size() == 0 ? kDefaultTrialPage : request.page_size();
    TESSEL_ASSIGN_OR_RETURN(const int64_t after, PageTokenId(request.page_token(), 't'));
    TESSEL_ASSIGN_OR_RETURN(std::vector<v1::TrialResult> trials,
                            scheduler_->ListTrials(request.job_id(), after, page_size));
    // A page ends before it would pass kMaxPageBytes (at least one trial per page).
    size_t bytes = 0;
    for (v1::TrialResult& trial : trials) {
      bytes += trial.ByteSizeLong();
      if (bytes > kMaxPageBytes && response->trials_size() > 0) break;
      *response->add_trials() = std::move(trial);
    }
    if (response->trials_size() < int(trials.size()) || int(trials.size()) == page_size) {
      response->set_next_page_token(
          PageToken('t', response->trials(response->trials_size() - 1).trial_id()));
    }
    return absl::OkStatus();
  }
  absl::Status Run(const v1::LookupRequest& request, v1::LookupResponse* response) {
    return Set(scheduler_->Lookup(request), response);
  }
  absl::Status Run(const v1::ListKernelsRequest& /*request*/, v1::ListKernelsResponse* response) {
    *response = Catalog::ListKernels();
    return absl::OkStatus();
  }
  absl::Status Run(const v1::ListTargetsRequest& /*request*/, v1::ListTargetsResponse* response) {
    for (const std::string& name : sim::TargetNames()) {
      auto target = kernels::CachedTarget(name);
      if (!target.ok()) continue;
      v1::TargetInfo* info = response->add_targets();
      info->set_name(target->name);
      info->set_version(target->version);
      info->set_description(target->description);
    }
    return absl::OkStatus();
  }
  absl::Status Run(const v1::ListWorkersRequest& /*request*/, v1::ListWorkersResponse* response) {
    return AddEach<v1::WorkerInfo>(scheduler_->ListWorkers(), response->mutable_workers());
  }
  absl::Status Run(const v1::ExportRequest& request, v1::ExportResponse* response) {
    TESSEL_RETURN_IF_ERROR(CheckRequest(request));
    return Set(scheduler_->Export(request), response);
  }
  absl::Status Run(const v1::ImportRequest& request, v1::ImportResponse* response) {
    return Set(scheduler_->Import(request), response);
  }

  // ---- WorkerService ----
  absl::Status Run(const v1::RegisterRequest& request, const Caller& caller,
                   v1::RegisterResponse* response) {
    TESSEL_RETURN_IF_ERROR(CheckRequest(request));
    return Set(scheduler_->Register(request, caller.credential), response);
  }
  void Start(const v1::LeaseRequest& request, LeaseCallback done) {
    if (absl::Status shape = CheckRequest(request); !shape.ok()) {
      done(shape);
      return;
    }
    scheduler_->Lease(request, std::move(done));
  }
  void Start(const v1::ReportRequest& request, ReportCallback done) {
    if (absl::Status shape = CheckRequest(request); !shape.ok()) {
      done(shape);
      return;
    }
    scheduler_->Report(request, std::move(done));
  }
  absl::Status Run(const v1::HeartbeatRequest& request, v1::HeartbeatResponse* response) {
    TESSEL_RETURN_IF_ERROR(CheckRequest(request));
    return Set(scheduler_->Heartbeat(request), response);
  }

 private:
  Scheduler* const scheduler_;
};

// Streams job events to one client. Scheduler callbacks reach the reactor through a shared
// state that outlives it, so a late event after the call ended is dropped, not a use-after-free.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  // `on_done` runs once the call is over (it gives back the client's watch quota).
  WatchReactor(Scheduler* scheduler, int64_t job_id, std::function<void()> on_done)
      : scheduler_(scheduler), on_done_(std::move(on_done)), state_(std::make_shared<State>()) {
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
    on_done_();
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
  const std::function<void()> on_done_;
  std::shared_ptr<State> state_;
  int64_t watch_id_ = 0;
};

// The call answered with the refusal when `auth` does not let its caller call `method`;
// nullptr when it may.
grpc::ServerUnaryReactor* Refused(const Authorizer& auth, std::string_view method,
                                  grpc::CallbackServerContext* context) {
  absl::Status allowed = auth.Check(method, *context);
  return allowed.ok() ? nullptr : AnswerNow(context, allowed);
}

// A watch refused before it started, answered at once with its status.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  explicit RefusedWatch(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// The override of unary method `Method` (Request -> Response): refused unless auth_ allows the
// caller, then answered at once by rules_.Run or later by rules_.Start. Each method's signature
// is written once, in its service's table below.
#define TESSEL_UNARY_METHOD(Method, Request, Response)                                            \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* context,                          \
                                   const v1::Request* request, v1::Response* response) override { \
    if (auto* refused = Refused(*auth_, #Method, context)) return refused;                        \
    return AnswerNow(context, rules_.Run(*request, response));                                    \
  }
#define TESSEL_UNARY_METHOD_LATER(Method, Request, Response)                                      \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* context,                          \
                                   const v1::Request* request, v1::Response* response) override { \
    if (auto* refused = Refused(*auth_, #Method, context)) return refused;                        \
    return AnswerLater(context, response,                                                         \
                       [&](auto done) { rules_.Start(*request, std::move(done)); });              \
  }

class TesselServiceImpl final : public v1::TesselService::CallbackService {
 public:
  TesselServiceImpl(Scheduler* scheduler, const Authorizer* auth, ClientLimits limits)
      : scheduler_(scheduler), auth_(auth), rules_(scheduler), quota_(limits) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::Job* response) override {
    if (auto* refused = Refused(*auth_, "SubmitJob", context)) return refused;
    const std::string client = ClientOfPeer(context->peer());
    if (absl::Status quota = quota_.MayStartJob(client, [this](int64_t id) { return Active(id); });
        !quota.ok()) {
      return AnswerNow(context, quota);
    }
    absl::Status status = rules_.Run(*request, response);
    if (status.ok() && !response->attached()) quota_.StartedJob(client, response->id());
    return AnswerNow(context, status);
  }
  TESSEL_UNARY_METHOD(GetJob, GetJobRequest, Job)
  TESSEL_UNARY_METHOD(ListJobs, ListJobsRequest, ListJobsResponse)
  TESSEL_UNARY_METHOD(CancelJob, CancelJobRequest, Job)
  TESSEL_UNARY_METHOD(ListTrials, ListTrialsRequest, ListTrialsResponse)
  TESSEL_UNARY_METHOD(Lookup, LookupRequest, LookupResponse)
  TESSEL_UNARY_METHOD(ListKernels, ListKernelsRequest, ListKernelsResponse)
  TESSEL_UNARY_METHOD(ListTargets, ListTargetsRequest, ListTargetsResponse)
  TESSEL_UNARY_METHOD(ListWorkers, ListWorkersRequest, ListWorkersResponse)
  TESSEL_UNARY_METHOD(Export, ExportRequest, ExportResponse)
  TESSEL_UNARY_METHOD(Import, ImportRequest, ImportResponse)

  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override {
    if (absl::Status allowed = auth_->Check("WatchJob", *context); !allowed.ok()) {
      return new RefusedWatch(allowed);
    }
    if (absl::Status id = CheckJobId(request->job_id()); !id.ok()) return new RefusedWatch(id);
    std::string client = ClientOfPeer(context->peer());
    if (absl::Status quota = quota_.OpenWatch(client); !quota.ok()) return new RefusedWatch(quota);
    return new WatchReactor(scheduler_, request->job_id(),
                            [this, client = std::move(client)] { quota_.CloseWatch(client); });
  }

 private:
  // Whether job `id` is queued or running.
  bool Active(int64_t id) {
    absl::StatusOr<v1::Job> job = scheduler_->GetJob(id);
    return job.ok() && (job->state() == v1::JOB_QUEUED || job->state() == v1::JOB_RUNNING);
  }

  Scheduler* const scheduler_;
  const Authorizer* const auth_;
  Rules rules_;
  ClientQuota quota_;
};

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Scheduler* scheduler, const Authorizer* auth)
      : auth_(auth), rules_(scheduler) {}

  // Register also passes on who the caller is: a quarantined worker's token registers no other.
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override {
    absl::StatusOr<Caller> caller = auth_->Authorize("Register", *context);
    if (!caller.ok()) return AnswerNow(context, caller.status());
    return AnswerNow(context, rules_.Run(*request, *caller, response));
  }
  TESSEL_UNARY_METHOD_LATER(Lease, LeaseRequest, LeaseResponse)
  TESSEL_UNARY_METHOD_LATER(Report, ReportRequest, ReportResponse)
  TESSEL_UNARY_METHOD(Heartbeat, HeartbeatRequest, HeartbeatResponse)

 private:
  const Authorizer* const auth_;
  Rules rules_;
};

#undef TESSEL_UNARY_METHOD
#undef TESSEL_UNARY_METHOD_LATER

}  // namespace

std::unique_ptr<grpc::Service> MakeTesselService(Scheduler* scheduler, const Authorizer* auth,
                                                 ClientLimits limits) {
  return std::make_unique<TesselServiceImpl>(scheduler, auth, limits);
}

std::unique_ptr<grpc::Service> MakeWorkerService(Scheduler* scheduler, const Authorizer* auth) {
  return std::make_unique<WorkerServiceImpl>(scheduler, auth);
}

}  // namespace tessel::server

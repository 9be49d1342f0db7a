#include "client/client.h"

#include <chrono>
#include <utility>

#include "schema/strings.h"

namespace tessel::client {
namespace {

using tessel::v1::Job;

std::chrono::system_clock::time_point DeadlineAfter(int timeout_ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& rpc,
                            const std::string& target) {
  if (status.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(static_cast<int>(status.error_code()));
  const std::string& detail = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(StrCat("cannot reach tessel server at ", target,
                                           " (is it running?)", detail.empty() ? "" : ": ",
                                           detail));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(StrCat("tessel server at ", target, " did not answer ",
                                                rpc, " in time (is it running and reachable?)"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(StrCat("tessel server at ", target, " does not implement ",
                                             rpc, " (is it a tessel server of the same version?)"));
    case grpc::StatusCode::CANCELLED:
      return absl::CancelledError(
          StrCat(rpc, " was cancelled", detail.empty() ? "" : ": ", detail));
    default:
      return absl::Status(code, detail.empty() ? StrCat(rpc, " failed") : detail);
  }
}

bool IsFinalState(tessel::v1::JobState state) {
  return state == tessel::v1::JOB_COMPLETED || state == tessel::v1::JOB_CANCELLED ||
         state == tessel::v1::JOB_FAILED;
}

std::string JobStateName(tessel::v1::JobState state) {
  switch (state) {
    case tessel::v1::JOB_QUEUED:
      return "queued";
    case tessel::v1::JOB_RUNNING:
      return "running";
    case tessel::v1::JOB_COMPLETED:
      return "completed";
    case tessel::v1::JOB_CANCELLED:
      return "cancelled";
    case tessel::v1::JOB_FAILED:
      return "failed";
    default:
      return "unspecified";
  }
}

std::string TrialStatusName(tessel::v1::TrialStatus status) {
  switch (status) {
    case tessel::v1::TRIAL_OK:
      return "OK";
    case tessel::v1::TRIAL_INVALID_CONFIG:
      return "INVALID_CONFIG";
    case tessel::v1::TRIAL_WRONG_ANSWER:
      return "WRONG_ANSWER";
    case tessel::v1::TRIAL_RUNTIME_ERROR:
      return "RUNTIME_ERROR";
    case tessel::v1::TRIAL_TIMEOUT:
      return "TIMEOUT";
    case tessel::v1::TRIAL_WORKER_LOST:
      return "WORKER_LOST";
    case tessel::v1::TRIAL_CANCELLED:
      return "CANCELLED";
    default:
      return "UNSPECIFIED";
  }
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ClientOptions& options) {
  if (address.empty())
    return absl::InvalidArgumentError("empty server address; expected HOST:PORT");
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (channel == nullptr) {
    return absl::InvalidArgumentError(StrCat("cannot create a channel to '", address, "'"));
  }
  if (!channel->WaitForConnected(DeadlineAfter(options.connect_timeout_ms))) {
    return absl::UnavailableError(StrCat("cannot reach tessel server at ", address,
                                         " (is it running?): no connection within ",
                                         options.connect_timeout_ms, " ms"));
  }
  return std::make_unique<Client>(std::move(channel), address, options);
}

Client::Client(std::shared_ptr<grpc::Channel> channel, std::string description,
               const ClientOptions& options)
    : channel_(std::move(channel)),
      stub_(tessel::v1::TesselService::NewStub(channel_)),
      target_(std::move(description)),
      options_(options) {}

void Client::PrepareContext(grpc::ClientContext& context, int timeout_ms) const {
  if (timeout_ms > 0) context.set_deadline(DeadlineAfter(timeout_ms));
  context.set_wait_for_ready(false);
}

absl::StatusOr<Job> Client::SubmitJob(const tessel::v1::SubmitJobRequest& request) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  Job job;
  grpc::Status status = stub_->SubmitJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, "SubmitJob", target_);
  return job;
}

absl::StatusOr<Job> Client::GetJob(int64_t job_id) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::GetJobRequest request;
  request.set_job_id(job_id);
  Job job;
  grpc::Status status = stub_->GetJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, "GetJob", target_);
  return job;
}

absl::StatusOr<std::vector<Job>> Client::ListJobs(int limit) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ListJobsRequest request;
  request.set_limit(limit);
  tessel::v1::ListJobsResponse response;
  grpc::Status status = stub_->ListJobs(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListJobs", target_);
  return std::vector<Job>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<Job> Client::CancelJob(int64_t job_id) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  Job job;
  grpc::Status status = stub_->CancelJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, "CancelJob", target_);
  return job;
}

absl::StatusOr<Job> Client::WatchJob(int64_t job_id, const JobEventCallback& on_event) {
  grpc::ClientContext context;
  PrepareContext(context, options_.watch_timeout_ms);
  tessel::v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<tessel::v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  tessel::v1::JobEvent event;
  Job last;
  bool seen_any = false;
  bool stopped_by_caller = false;
  while (reader->Read(&event)) {
    last = event.job();
    seen_any = true;
    if (on_event && !on_event(event)) {
      stopped_by_caller = true;
      break;
    }
    if (IsFinalState(last.state())) break;
  }
  if (stopped_by_caller || (seen_any && IsFinalState(last.state()))) {
    // Nothing more is wanted from the stream; cancel it rather than wait for the server to close.
    context.TryCancel();
    reader->Finish().ok();
    if (stopped_by_caller && !IsFinalState(last.state())) {
      return absl::CancelledError(StrCat("stopped watching job ", job_id));
    }
    return last;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status, "WatchJob", target_);
  if (!seen_any) {
    return absl::UnavailableError(
        StrCat("tessel server at ", target_, " closed the watch of job ", job_id, " without news"));
  }
  return last;
}

absl::StatusOr<std::vector<tessel::v1::TrialResult>> Client::ListTrials(int64_t job_id) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ListTrialsRequest request;
  request.set_job_id(job_id);
  tessel::v1::ListTrialsResponse response;
  grpc::Status status = stub_->ListTrials(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListTrials", target_);
  return std::vector<tessel::v1::TrialResult>(response.trials().begin(), response.trials().end());
}

absl::StatusOr<tessel::v1::LookupResponse> Client::Lookup(const tessel::v1::Workload& workload) {
  tessel::v1::LookupRequest request;
  *request.mutable_workload() = workload;
  return Lookup(request);
}

absl::StatusOr<tessel::v1::LookupResponse> Client::Lookup(
    const tessel::v1::LookupRequest& request) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::LookupResponse response;
  grpc::Status status = stub_->Lookup(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Lookup", target_);
  return response;
}

absl::StatusOr<tessel::v1::ExportResponse> Client::Export(
    const tessel::v1::ExportRequest& request) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ExportResponse response;
  grpc::Status status = stub_->Export(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Export", target_);
  return response;
}

absl::StatusOr<tessel::v1::ImportResponse> Client::Import(
    const tessel::v1::ImportRequest& request) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ImportResponse response;
  grpc::Status status = stub_->Import(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Import", target_);
  return response;
}

absl::StatusOr<std::vector<tessel::v1::KernelInfo>> Client::ListKernels() {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ListKernelsResponse response;
  grpc::Status status = stub_->ListKernels(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListKernels", target_);
  return std::vector<tessel::v1::KernelInfo>(response.kernels().begin(), response.kernels().end());
}

absl::StatusOr<std::vector<tessel::v1::TargetInfo>> Client::ListTargets() {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ListTargetsResponse response;
  grpc::Status status = stub_->ListTargets(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListTargets", target_);
  return std::vector<tessel::v1::TargetInfo>(response.targets().begin(), response.targets().end());
}

absl::StatusOr<std::vector<tessel::v1::WorkerInfo>> Client::ListWorkers() {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  tessel::v1::ListWorkersResponse response;
  grpc::Status status = stub_->ListWorkers(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListWorkers", target_);
  return std::vector<tessel::v1::WorkerInfo>(response.workers().begin(), response.workers().end());
}

}  // namespace tessel::client

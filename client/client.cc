#include "client/client.h"

#include <chrono>
#include <optional>
#include <utility>

#include "schema/credentials.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"

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
  const std::optional<JobState> known = JobStateFromProto(state);
  return known.has_value() && IsFinal(*known);
}

std::string JobStateName(tessel::v1::JobState state) {
  const std::optional<JobState> known = JobStateFromProto(state);
  return known.has_value() ? std::string(tessel::JobStateName(*known)) : "unspecified";
}

std::string TrialStatusName(tessel::v1::TrialStatus status) {
  const std::optional<TrialStatus> known = TrialStatusFromProto(status);
  return known.has_value() ? std::string(tessel::TrialStatusName(*known)) : "UNSPECIFIED";
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ClientOptions& options) {
  if (address.empty())
    return absl::InvalidArgumentError("empty server address; expected HOST:PORT");
  TESSEL_RETURN_IF_ERROR(CheckGrpcAddress(address, "server address"));
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                          ChannelCredentials({.ca_file = options.tls_ca_file,
                                              .cert_file = options.tls_cert_file,
                                              .key_file = options.tls_key_file}));
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(address, credentials);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(StrCat("cannot create a channel to '", address, "'"));
  }
  if (!channel->WaitForConnected(DeadlineAfter(options.connect_timeout_ms))) {
    // A refused TLS handshake looks the same from here as a server that is not there: name what
    // to check for both.
    const std::string tls_hint =
        options.tls_ca_file.empty()
            ? "; if the server uses TLS, pass its root certificate with --tls-ca"
        : options.tls_cert_file.empty()
            ? "; or the TLS handshake failed: check --tls-ca, and pass --tls-cert/--tls-key "
              "if the server requires client certificates"
            : "; or the TLS handshake failed: check --tls-ca, and that the server's "
              "--tls-client-ca signed --tls-cert";
    return absl::UnavailableError(StrCat("cannot reach tessel server at ", address,
                                         " (is it running?): no connection within ",
                                         options.connect_timeout_ms, " ms", tls_hint));
  }
  return std::make_unique<Client>(std::move(channel), address, options);
}

Client::Client(std::shared_ptr<grpc::Channel> channel, std::string description,
               const ClientOptions& options)
    : channel_(std::move(channel)),
      stub_(tessel::v1::TesselService::NewStub(channel_)),
      admin_stub_(tessel::v1::AdminService::NewStub(channel_)),
      target_(std::move(description)),
      options_(options) {}

void Client::PrepareContext(grpc::ClientContext& context, int timeout_ms) const {
  if (timeout_ms > 0) context.set_deadline(DeadlineAfter(timeout_ms));
  context.set_wait_for_ready(false);
  AddBearer(context, options_.token);
}

template <typename Request, typename Response>
absl::StatusOr<Response> Client::Call(UnaryRpc<Request, Response> rpc, const char* name,
                                      const Request& request) {
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  Response response;
  grpc::Status status = (stub_.get()->*rpc)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, name, target_);
  return response;
}

absl::StatusOr<Job> Client::SubmitJob(const tessel::v1::SubmitJobRequest& request) {
  return Call(&Stub::SubmitJob, "SubmitJob", request);
}

absl::StatusOr<Job> Client::GetJob(int64_t job_id) {
  tessel::v1::GetJobRequest request;
  request.set_job_id(job_id);
  return Call(&Stub::GetJob, "GetJob", request);
}

absl::StatusOr<std::vector<Job>> Client::ListJobs(int limit) {
  tessel::v1::ListJobsRequest request;
  request.set_limit(limit);
  TESSEL_ASSIGN_OR_RETURN(auto response, Call(&Stub::ListJobs, "ListJobs", request));
  return std::vector<Job>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<Job> Client::CancelJob(int64_t job_id) {
  tessel::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  return Call(&Stub::CancelJob, "CancelJob", request);
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
  tessel::v1::ListTrialsRequest request;
  request.set_job_id(job_id);
  std::vector<tessel::v1::TrialResult> trials;
  do {  // every page
    TESSEL_ASSIGN_OR_RETURN(auto response, Call(&Stub::ListTrials, "ListTrials", request));
    for (tessel::v1::TrialResult& trial : *response.mutable_trials()) {
      trials.push_back(std::move(trial));
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return trials;
}

absl::StatusOr<tessel::v1::LookupResponse> Client::Lookup(const tessel::v1::Workload& workload) {
  tessel::v1::LookupRequest request;
  *request.mutable_workload() = workload;
  return Lookup(request);
}

absl::StatusOr<tessel::v1::LookupResponse> Client::Lookup(
    const tessel::v1::LookupRequest& request) {
  return Call(&Stub::Lookup, "Lookup", request);
}

absl::StatusOr<tessel::v1::ExportResponse> Client::Export(
    const tessel::v1::ExportRequest& request) {
  return Call(&Stub::Export, "Export", request);
}

absl::StatusOr<tessel::v1::ImportResponse> Client::Import(
    const tessel::v1::ImportRequest& request) {
  return Call(&Stub::Import, "Import", request);
}

absl::StatusOr<std::vector<tessel::v1::KernelInfo>> Client::ListKernels() {
  TESSEL_ASSIGN_OR_RETURN(
      auto response, Call(&Stub::ListKernels, "ListKernels", tessel::v1::ListKernelsRequest()));
  return std::vector<tessel::v1::KernelInfo>(response.kernels().begin(), response.kernels().end());
}

absl::StatusOr<std::vector<tessel::v1::TargetInfo>> Client::ListTargets() {
  TESSEL_ASSIGN_OR_RETURN(
      auto response, Call(&Stub::ListTargets, "ListTargets", tessel::v1::ListTargetsRequest()));
  return std::vector<tessel::v1::TargetInfo>(response.targets().begin(), response.targets().end());
}

absl::StatusOr<std::vector<tessel::v1::WorkerInfo>> Client::ListWorkers() {
  TESSEL_ASSIGN_OR_RETURN(
      auto response, Call(&Stub::ListWorkers, "ListWorkers", tessel::v1::ListWorkersRequest()));
  return std::vector<tessel::v1::WorkerInfo>(response.workers().begin(), response.workers().end());
}

}  // namespace tessel::client

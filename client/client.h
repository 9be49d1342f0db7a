// The C++ client library for TesselService: what build systems, scripts and the `tessel` CLI use to
// submit tuning jobs, watch them, and look up best configs.
//
// Links only the schema, gRPC and abseil, so a program that embeds it stays small. Every call has a
// deadline and fails fast (wait_for_ready is off): a server that is down gives an error within the
// deadline, never a hang. Errors come back as absl::Status with a message a person can act on, e.g.
// "cannot reach tessel server at 127.0.0.1:9 (is it running?)".
#ifndef TESSEL_CLIENT_CLIENT_H_
#define TESSEL_CLIENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/tessel.grpc.pb.h"
#include "schema/tessel.pb.h"

namespace tessel::client {

struct ClientOptions {
  // Deadline of each unary call.
  int call_timeout_ms = 10000;
  // Connect(): how long to wait for the first connection before giving up.
  int connect_timeout_ms = 3000;
  // Deadline of a whole WatchJob stream; 0 = none (a watch lasts as long as the job).
  int watch_timeout_ms = 0;
  // Sent as `authorization: Bearer TOKEN` with every call when set (schema/credentials.h).
  std::optional<std::string> token;
  // Connect(): a PEM file of root certificates to verify the server's TLS certificate; empty
  // connects in plaintext.
  std::string tls_ca_file;
  // Connect() with tls_ca_file: a PEM certificate chain and its private key presented to a server
  // that requires client certificates (mutual TLS). Both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Converts a failed gRPC status of the call `rpc` to server `target` into an absl::Status of the
// same code whose message says what to do: transport failures (UNAVAILABLE, DEADLINE_EXCEEDED)
// name the address; errors the server produced keep the server's message. OK maps to OK.
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& rpc,
                            const std::string& target);

// A TesselService client. Thread-safe: calls may be made from several threads at once.
class Client {
 public:
  // Creates a channel to `address` (HOST:PORT) and waits up to options.connect_timeout_ms for it to
  // connect. Unavailable "cannot reach tessel server at ADDRESS (is it running?)" when it does not.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                                         const ClientOptions& options = {});
  // Wraps an existing channel (e.g. a server's in-process channel); does not contact the server.
  // `description` names the server in error messages.
  Client(std::shared_ptr<grpc::Channel> channel, std::string description,
         const ClientOptions& options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Submits a tuning job; returns it as queued. InvalidArgument (from the server) for an unknown
  // kernel, target or strategy, or bad dims.
  absl::StatusOr<tessel::v1::Job> SubmitJob(const tessel::v1::SubmitJobRequest& request);
  // NotFound for an unknown id.
  absl::StatusOr<tessel::v1::Job> GetJob(int64_t job_id);
  // Most recent first; `limit` 0 means the server's default.
  absl::StatusOr<std::vector<tessel::v1::Job>> ListJobs(int limit = 0);
  // Cancels a queued or running job; returns its new state.
  absl::StatusOr<tessel::v1::Job> CancelJob(int64_t job_id);

  // Called for every event of a watch; return false to stop watching.
  using JobEventCallback = std::function<bool(const tessel::v1::JobEvent&)>;
  // Streams the job's events to `on_event` (on the calling thread) until the job reaches a final
  // state, the callback returns false, or the stream fails. Returns the last job seen. Cancelled
  // when on_event stopped the watch before a final state.
  absl::StatusOr<tessel::v1::Job> WatchJob(int64_t job_id, const JobEventCallback& on_event);

  // Every trial of the job, by id, fetched a page at a time.
  absl::StatusOr<std::vector<tessel::v1::TrialResult>> ListTrials(int64_t job_id);
  absl::StatusOr<tessel::v1::LookupResponse> Lookup(const tessel::v1::Workload& workload);
  // As above with every request field (e.g. a pinned snapshot_id).
  absl::StatusOr<tessel::v1::LookupResponse> Lookup(const tessel::v1::LookupRequest& request);
  // Published best configs with versions and defaults (see ExportRequest).
  absl::StatusOr<tessel::v1::ExportResponse> Export(const tessel::v1::ExportRequest& request);
  // Publishes records; idempotent (see ImportResponse).
  absl::StatusOr<tessel::v1::ImportResponse> Import(const tessel::v1::ImportRequest& request);
  absl::StatusOr<std::vector<tessel::v1::KernelInfo>> ListKernels();
  absl::StatusOr<std::vector<tessel::v1::TargetInfo>> ListTargets();
  absl::StatusOr<std::vector<tessel::v1::WorkerInfo>> ListWorkers();

  // The standard gRPC health service's answer (grpc.health.v1.Health/Check; no token needed) for
  // `service` ("" = the server as a whole): "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or
  // "UNKNOWN". Errors when the server cannot be asked (client/admin.cc).
  absl::StatusOr<std::string> Health(const std::string& service = "");

  // ---- AdminService (the tuner role; client/admin.cc) ----
  // Streams a consistent backup of the server's database into the file `out_path` (written as
  // `out_path`.partial and renamed when complete). Returns the backup's summary.
  absl::StatusOr<tessel::v1::BackupChunk> Backup(const std::string& out_path);
  absl::StatusOr<tessel::v1::CheckDatabaseResponse> CheckDatabase();
  absl::StatusOr<tessel::v1::VacuumResponse> Vacuum(const tessel::v1::VacuumRequest& request);
  // Uploads the backup file at `backup_path`; the server stages it for its next start.
  absl::StatusOr<tessel::v1::RestoreResponse> Restore(const std::string& backup_path);

  // The address or description given at construction.
  const std::string& target() const { return target_; }

 private:
  using Stub = tessel::v1::TesselService::Stub;
  template <typename Request, typename Response>
  using UnaryRpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

  // Prepares `context` with the unary deadline and fail-fast behaviour.
  void PrepareContext(grpc::ClientContext& context, int timeout_ms) const;
  // One unary call `name` with the call deadline; a failure becomes FromGrpcStatus's status.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(UnaryRpc<Request, Response> rpc, const char* name,
                                const Request& request);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tessel::v1::TesselService::Stub> stub_;
  std::unique_ptr<tessel::v1::AdminService::Stub> admin_stub_;
  std::string target_;
  ClientOptions options_;
};

// True for job states after which nothing changes: completed, cancelled, failed.
bool IsFinalState(tessel::v1::JobState state);
// "queued", "running", "completed", "cancelled", "failed" (the CLI contract's names).
std::string JobStateName(tessel::v1::JobState state);
// "OK", "INVALID_CONFIG", ... as stored.
std::string TrialStatusName(tessel::v1::TrialStatus status);

}  // namespace tessel::client

#endif  // TESSEL_CLIENT_CLIENT_H_

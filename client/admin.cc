// Client's AdminService calls (client.h): backup, integrity check, vacuum and restore.
#include <grpcpp/generic/generic_stub.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "client/client.h"
#include "fmt/format.h"

namespace tessel::client {
namespace {

namespace v1 = tessel::v1;

// Admin calls move whole databases or rewrite them (VACUUM): they get an hour, not the unary
// deadline.
constexpr int kAdminTimeoutMs = 3'600'000;
constexpr size_t kUploadChunkBytes = size_t{1} << 20;

// grpc.health.v1 is not among the headers Debian ships, and its two messages are one field each,
// so they are written and read here by hand (protobuf wire format): HealthCheckRequest
// {string service = 1}, HealthCheckResponse {ServingStatus status = 1}.
std::string EncodeHealthRequest(const std::string& service) {
  std::string bytes;
  if (service.empty()) return bytes;
  bytes.push_back(0x0a);  // field 1, length-delimited
  for (size_t n = service.size();; n >>= 7) {
    if (n < 0x80) {
      bytes.push_back(static_cast<char>(n));
      break;
    }
    bytes.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  return bytes + service;
}

// The status field of a HealthCheckResponse; -1 when the bytes are not one.
int DecodeHealthStatus(const std::string& bytes) {
  int status = 0;  // absent = UNKNOWN (0)
  size_t i = 0;
  while (i < bytes.size()) {
    const auto tag = static_cast<unsigned char>(bytes[i++]);
    if (tag != 0x08) return -1;  // only field 1 (varint) is expected
    int value = 0;
    int shift = 0;
    while (i < bytes.size() && shift < 28) {
      const auto byte = static_cast<unsigned char>(bytes[i++]);
      value |= (byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) break;
    }
    status = value;
  }
  return status;
}

}  // namespace

absl::StatusOr<std::string> Client::Health(const std::string& service) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  PrepareContext(context, options_.call_timeout_ms);
  const std::string request_bytes = EncodeHealthRequest(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::string("SERVICE_UNKNOWN");
  if (!status.ok()) return FromGrpcStatus(status, "grpc.health.v1.Health/Check", target_);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  switch (DecodeHealthStatus(bytes)) {
    case 0:
      return std::string("UNKNOWN");
    case 1:
      return std::string("SERVING");
    case 2:
      return std::string("NOT_SERVING");
    case 3:
      return std::string("SERVICE_UNKNOWN");
    default:
      return absl::DataLossError(
          fmt::format("{} answered the health check with an unreadable message", target_));
  }
}

absl::StatusOr<v1::BackupChunk> Client::Backup(const std::string& out_path) {
  const std::string partial = out_path + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(fmt::format("--out: cannot write {}", partial));
  grpc::ClientContext context;
  PrepareContext(context, kAdminTimeoutMs);
  std::unique_ptr<grpc::ClientReader<v1::BackupChunk>> reader =
      admin_stub_->Backup(&context, v1::BackupRequest());
  v1::BackupChunk chunk;
  v1::BackupChunk summary;
  bool first = true;
  int64_t received = 0;
  while (reader->Read(&chunk)) {
    if (first) {
      summary = chunk;
      summary.clear_data();
      first = false;
    }
    received += static_cast<int64_t>(chunk.data().size());
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
  }
  grpc::Status status = reader->Finish();
  out.close();
  std::error_code ignored;
  if (!status.ok()) {
    std::filesystem::remove(partial, ignored);
    return FromGrpcStatus(status, "Backup", target_);
  }
  if (!out || first || received != summary.total_bytes()) {
    std::filesystem::remove(partial, ignored);
    return absl::DataLossError(fmt::format("the backup from {} arrived incomplete ({} of {} bytes)",
                                           target_, received, summary.total_bytes()));
  }
  std::filesystem::rename(partial, out_path, ignored);
  if (ignored) {
    return absl::InvalidArgumentError(
        fmt::format("--out: cannot rename {} to {}: {}", partial, out_path, ignored.message()));
  }
  return summary;
}

absl::StatusOr<v1::CheckDatabaseResponse> Client::CheckDatabase() {
  grpc::ClientContext context;
  PrepareContext(context, kAdminTimeoutMs);
  v1::CheckDatabaseResponse response;
  grpc::Status status = admin_stub_->CheckDatabase(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status, "CheckDatabase", target_);
  return response;
}

absl::StatusOr<v1::VacuumResponse> Client::Vacuum(const v1::VacuumRequest& request) {
  grpc::ClientContext context;
  PrepareContext(context, kAdminTimeoutMs);
  v1::VacuumResponse response;
  grpc::Status status = admin_stub_->Vacuum(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Vacuum", target_);
  return response;
}

absl::StatusOr<v1::RestoreResponse> Client::Restore(const std::string& backup_path) {
  std::ifstream in(backup_path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("--from: cannot read {}", backup_path));
  grpc::ClientContext context;
  PrepareContext(context, kAdminTimeoutMs);
  v1::RestoreResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::RestoreChunk>> writer =
      admin_stub_->Restore(&context, &response);
  std::vector<char> buffer(kUploadChunkBytes);
  v1::RestoreChunk chunk;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    chunk.set_data(buffer.data(), n);
    if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status, "Restore", target_);
  return response;
}

}  // namespace tessel::client

#include "server/request_check.h"

#include <charconv>
#include <cmath>

#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::server {
namespace {

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

absl::Status CheckCount(std::string_view field, int count, int max) {
  if (count <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(field, " has ", count, " entries; at most ", max));
}

// The one rule for a reported trial's shape (its plausibility is report_check.h's).
absl::Status CheckResult(int index, const v1::TrialResult& r) {
  const std::string at = StrCat("results[", index, "].");
  TESSEL_RETURN_IF_ERROR(CheckId(at + "trial_id", r.trial_id()));
  if (!v1::TrialStatus_IsValid(r.status()) || r.status() == v1::TRIAL_STATUS_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        StrCat(at, "status ", int(r.status()), " is not a trial status"));
  }
  if (!std::isfinite(r.time_ns()) || r.time_ns() < 0) {
    return absl::InvalidArgumentError(StrCat(at, "time_ns must be a finite number >= 0"));
  }
  TESSEL_RETURN_IF_ERROR(CheckCount(at + "samples_ns", r.samples_ns_size(), kMaxSamplesPerResult));
  for (double sample : r.samples_ns()) {
    if (!std::isfinite(sample)) {
      return absl::InvalidArgumentError(StrCat(at, "samples_ns holds a non-finite sample"));
    }
  }
  TESSEL_RETURN_IF_ERROR(CheckString(at + "message", r.message(), kMaxResultMessage));
  TESSEL_RETURN_IF_ERROR(CheckString(at + "bound", r.bound(), kMaxShortString));
  TESSEL_RETURN_IF_ERROR(CheckString(at + "stats_json", r.stats_json(), kMaxStatsJson));
  TESSEL_RETURN_IF_ERROR(CheckString(at + "config", r.config(), kMaxConfigBytes));
  return CheckString(at + "worker_id", r.worker_id(), kMaxShortString);
}

}  // namespace

absl::Status CheckString(std::string_view field, std::string_view value, size_t max_bytes,
                         bool required, bool printable) {
  if (required && value.empty()) return absl::InvalidArgumentError(StrCat(field, " is required"));
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        StrCat(field, " is ", value.size(), " bytes; at most ", max_bytes));
  }
  if (printable && !Printable(value)) {
    return absl::InvalidArgumentError(StrCat(field, " must be printable ASCII"));
  }
  return absl::OkStatus();
}

absl::Status CheckId(std::string_view field, int64_t id) {
  if (id > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(field, " must be positive"));
}

std::string PageToken(char kind, int64_t id) { return StrCat(std::string(1, kind), id); }

absl::StatusOr<int64_t> PageTokenId(std::string_view token, char kind) {
  if (token.empty()) return 0;
  int64_t id = 0;
  const char* end = token.data() + token.size();
  if (token.size() <= 21 && token.front() == kind &&
      std::from_chars(token.data() + 1, end, id).ptr == end && id > 0) {
    return id;
  }
  return absl::InvalidArgumentError("page_token is not one this server issued");
}

absl::Status CheckRequest(const v1::SubmitJobRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckString("strategy", request.strategy(), kMaxShortString));
  TESSEL_RETURN_IF_ERROR(CheckString("effort", request.effort(), kMaxShortString));
  TESSEL_RETURN_IF_ERROR(CheckString("model", request.model(), kMaxModelLabel, false, true));
  if (request.priority() < -kMaxPriority || request.priority() > kMaxPriority) {
    return absl::InvalidArgumentError(StrCat("priority must be between ", -kMaxPriority, " and ",
                                             kMaxPriority, ", got ", request.priority()));
  }
  TESSEL_RETURN_IF_ERROR(CheckCount("seed_configs", request.seed_configs_size(), kMaxSeedConfigs));
  for (const std::string& config : request.seed_configs()) {
    TESSEL_RETURN_IF_ERROR(CheckString("seed_configs", config, kMaxConfigBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::ExportRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckCount("kernels", request.kernels_size(), kMaxExportKernels));
  for (const std::string& kernel : request.kernels()) {
    TESSEL_RETURN_IF_ERROR(CheckString("kernels", kernel, kMaxShortString));
  }
  if (request.snapshot_id() < 0) return absl::InvalidArgumentError("snapshot_id must be >= 0");
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::RegisterRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckString("name", request.name(), kMaxWorkerName, false, true));
  if (request.slots() < 0 || request.slots() > kMaxWorkerSlots) {
    return absl::InvalidArgumentError(
        StrCat("slots must be between 0 (one) and ", kMaxWorkerSlots, ", got ", request.slots()));
  }
  TESSEL_RETURN_IF_ERROR(CheckCount("targets", request.targets_size(), kMaxWorkerTargets));
  for (const std::string& target : request.targets()) {
    TESSEL_RETURN_IF_ERROR(CheckString("targets", target, kMaxShortString, true));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::LeaseRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckString("worker_id", request.worker_id(), kMaxShortString, true));
  if (request.wait_ms() < 0) return absl::InvalidArgumentError("wait_ms must be >= 0");
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::ReportRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckString("worker_id", request.worker_id(), kMaxShortString, true));
  TESSEL_RETURN_IF_ERROR(CheckCount("results", request.results_size(), kMaxResultsPerReport));
  for (int i = 0; i < request.results_size(); ++i) {
    TESSEL_RETURN_IF_ERROR(CheckResult(i, request.results(i)));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::HeartbeatRequest& request) {
  TESSEL_RETURN_IF_ERROR(CheckString("worker_id", request.worker_id(), kMaxShortString, true));
  return CheckCount("running_trial_ids", request.running_trial_ids_size(), kMaxHeartbeatTrials);
}

}  // namespace tessel::server

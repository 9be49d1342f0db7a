// The shape of every request a client or worker may send, checked before the scheduler sees it
// (issue 17): lengths, counts and ranges, each violation InvalidArgument with a short message that
// names the field (as the proto spells it) and the limit, never the echoed input. What the
// request means (an unknown kernel, a missing job) is checked where it is known: kernels/workload.h
// for workloads, the scheduler for jobs and workers. docs/api.md lists the limits.
#ifndef TESSEL_SERVER_REQUEST_CHECK_H_
#define TESSEL_SERVER_REQUEST_CHECK_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"

namespace tessel::server {

// Limits (docs/api.md, "Limits").
inline constexpr size_t kMaxShortString = 64;        // names, ids, strategy, effort
inline constexpr size_t kMaxWorkerName = 128;        // printable ASCII
inline constexpr size_t kMaxModelLabel = 128;        // a job's model; printable ASCII
inline constexpr size_t kMaxConfigBytes = 4096;      // one "name=value,..." config
inline constexpr int kMaxSeedConfigs = 1000;         // per SubmitJob
inline constexpr int kMaxWorkerSlots = 1024;         // trials one worker runs at once
inline constexpr int kMaxWorkerTargets = 16;         // per Register
inline constexpr int kMaxExportKernels = 64;         // per Export
inline constexpr int kMaxResultsPerReport = 1024;    // per Report
inline constexpr int kMaxSamplesPerResult = 10'000;  // per reported trial
inline constexpr size_t kMaxResultMessage = 4096;    // a trial's reason
inline constexpr size_t kMaxStatsJson = 64 * 1024;   // a trial's simulator statistics
inline constexpr int kMaxHeartbeatTrials = 4096;     // running trial ids per Heartbeat
inline constexpr int kMaxPriority = 1000;            // |SubmitJobRequest.priority|

// InvalidArgument "`field` is required" / "`field` is N bytes; at most M" / "... must be
// printable".
absl::Status CheckString(std::string_view field, std::string_view value, size_t max_bytes,
                         bool required = false, bool printable = false);
// InvalidArgument "`field` must be positive" unless `id` > 0.
absl::Status CheckId(std::string_view field, int64_t id);

// Page tokens: `kind` ('j' jobs, 't' trials) and the id the next page starts after. Opaque to
// clients; PageTokenId is 0 for an empty token and InvalidArgument for one this server did not
// issue.
std::string PageToken(char kind, int64_t id);
absl::StatusOr<int64_t> PageTokenId(std::string_view token, char kind);

absl::Status CheckRequest(const v1::SubmitJobRequest& request);
absl::Status CheckRequest(const v1::ExportRequest& request);
absl::Status CheckRequest(const v1::RegisterRequest& request);
absl::Status CheckRequest(const v1::LeaseRequest& request);
absl::Status CheckRequest(const v1::ReportRequest& request);
absl::Status CheckRequest(const v1::HeartbeatRequest& request);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_REQUEST_CHECK_H_

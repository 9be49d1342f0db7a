// The shared vocabulary of tessel: job states, trial statuses, lookup match levels and the
// defaults a workload gets when a field is left empty.
//
// Inside the code these are enums. The store (schema/sql), the wire (schema/tessel.proto) and the
// CLI's JSON keep their string or proto forms; convert at that boundary with the functions below,
// which are the only place those forms are spelled.
#ifndef TESSEL_SCHEMA_VOCAB_H_
#define TESSEL_SCHEMA_VOCAB_H_

#include <optional>
#include <string_view>

#include "schema/tessel.pb.h"

namespace tessel {

// Defaults for empty workload and job fields, on the server, the worker and the CLI alike.
inline constexpr char kDefaultTarget[] = "snc2";
inline constexpr char kDefaultDtype[] = "bf16";
inline constexpr char kDefaultStrategy[] = "auto";

// Most trials a worker holds per slot it registered: one running, the rest ready behind it so the
// slot never waits for a Lease round trip. Workers lease ahead as far as their trials are short
// (worker/agent.cc, LeaseDepthPerSlot); the server gives no more than this.
inline constexpr int kMaxLeaseDepthPerSlot = 16;
// Most trials one Lease call may ask for (LeaseRequest.max_trials).
inline constexpr int kMaxTrialsPerLease = 256;

// A job's life: queued -> running -> one of the three final states.
enum class JobState { kQueued, kRunning, kCompleted, kCancelled, kFailed };

// A trial's outcome. The first five are caused by the config; kWorkerLost and kCancelled are not
// (the trial is retried elsewhere or dropped, and not charged to the budget).
enum class TrialStatus {
  kOk,
  kInvalidConfig,
  kWrongAnswer,
  kRuntimeError,
  kTimeout,
  kWorkerLost,
  kCancelled,
};

// How a lookup's answer relates to the workload asked for, best first (see graded_match.h).
enum class MatchLevel {
  kExact,        // tuned for this kernel, dims, dtype and target
  kNearest,      // tuned for the nearest dims of the same kernel, dtype and target
  kOtherTarget,  // tuned for these dims and dtype on another target
  kDefault,      // nothing tuned applies: the kernel's default config
};

// ---- String forms: the store's columns, the CLI contract's JSON, the wire's match field ----

// "queued", "running", "completed", "cancelled", "failed".
std::string_view JobStateName(JobState state);
// "OK", "INVALID_CONFIG", "WRONG_ANSWER", "RUNTIME_ERROR", "TIMEOUT", "WORKER_LOST", "CANCELLED".
std::string_view TrialStatusName(TrialStatus status);
// "exact", "nearest", "other_target", "default".
std::string_view MatchLevelName(MatchLevel level);

// The inverses of the three above: nullopt for any other string (names are case-sensitive).
std::optional<JobState> ParseJobState(std::string_view name);
std::optional<TrialStatus> ParseTrialStatus(std::string_view name);
std::optional<MatchLevel> ParseMatchLevel(std::string_view name);

// ---- Proto forms (schema/tessel.proto) ----

v1::JobState ToProto(JobState state);
v1::TrialStatus ToProto(TrialStatus status);
// nullopt for JOB_STATE_UNSPECIFIED / TRIAL_STATUS_UNSPECIFIED and values this build does not
// know.
std::optional<JobState> JobStateFromProto(v1::JobState state);
std::optional<TrialStatus> TrialStatusFromProto(v1::TrialStatus status);

// ---- Rules, written once ----

// True for completed, cancelled and failed: nothing changes after them.
bool IsFinal(JobState state);
// The budget rule: false for kWorkerLost and kCancelled (not the config's fault), true otherwise.
bool IsChargedToBudget(TrialStatus status);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_VOCAB_H_

#include "schema/vocab.h"

#include <array>

namespace tessel {
namespace {

// One row per enum value: the enum, its string form and its proto form. Each table lists every
// value once, in enum order.
template <typename Enum, typename Proto>
struct Spelling {
  Enum value;
  std::string_view name;
  Proto proto;
};

constexpr std::array<Spelling<JobState, v1::JobState>, 5> kJobStates = {{
    {JobState::kQueued, "queued", v1::JOB_QUEUED},
    {JobState::kRunning, "running", v1::JOB_RUNNING},
    {JobState::kCompleted, "completed", v1::JOB_COMPLETED},
    {JobState::kCancelled, "cancelled", v1::JOB_CANCELLED},
    {JobState::kFailed, "failed", v1::JOB_FAILED},
}};

constexpr std::array<Spelling<TrialStatus, v1::TrialStatus>, 7> kTrialStatuses = {{
    {TrialStatus::kOk, "OK", v1::TRIAL_OK},
    {TrialStatus::kInvalidConfig, "INVALID_CONFIG", v1::TRIAL_INVALID_CONFIG},
    {TrialStatus::kWrongAnswer, "WRONG_ANSWER", v1::TRIAL_WRONG_ANSWER},
    {TrialStatus::kRuntimeError, "RUNTIME_ERROR", v1::TRIAL_RUNTIME_ERROR},
    {TrialStatus::kTimeout, "TIMEOUT", v1::TRIAL_TIMEOUT},
    {TrialStatus::kWorkerLost, "WORKER_LOST", v1::TRIAL_WORKER_LOST},
    {TrialStatus::kCancelled, "CANCELLED", v1::TRIAL_CANCELLED},
}};

// Match levels have no proto enum (the wire carries the name); the int is unused.
constexpr std::array<Spelling<MatchLevel, int>, 4> kMatchLevels = {{
    {MatchLevel::kExact, "exact", 0},
    {MatchLevel::kNearest, "nearest", 0},
    {MatchLevel::kOtherTarget, "other_target", 0},
    {MatchLevel::kDefault, "default", 0},
}};

template <typename Table, typename Enum>
const auto& RowOf(const Table& table, Enum value) {
  return table[static_cast<size_t>(value)];  // tables are in enum order
}

template <typename Table>
auto FindByName(const Table& table, std::string_view name)
    -> std::optional<decltype(table[0].value)> {
  for (const auto& row : table) {
    if (row.name == name) return row.value;
  }
  return std::nullopt;
}

template <typename Table, typename Proto>
auto FindByProto(const Table& table, Proto proto) -> std::optional<decltype(table[0].value)> {
  for (const auto& row : table) {
    if (row.proto == proto) return row.value;
  }
  return std::nullopt;
}

}  // namespace

std::string_view JobStateName(JobState state) { return RowOf(kJobStates, state).name; }
std::string_view TrialStatusName(TrialStatus status) { return RowOf(kTrialStatuses, status).name; }
std::string_view MatchLevelName(MatchLevel level) { return RowOf(kMatchLevels, level).name; }

std::optional<JobState> ParseJobState(std::string_view name) {
  return FindByName(kJobStates, name);
}
std::optional<TrialStatus> ParseTrialStatus(std::string_view name) {
  return FindByName(kTrialStatuses, name);
}
std::optional<MatchLevel> ParseMatchLevel(std::string_view name) {
  return FindByName(kMatchLevels, name);
}

v1::JobState ToProto(JobState state) { return RowOf(kJobStates, state).proto; }
v1::TrialStatus ToProto(TrialStatus status) { return RowOf(kTrialStatuses, status).proto; }

std::optional<JobState> JobStateFromProto(v1::JobState state) {
  return FindByProto(kJobStates, state);
}
std::optional<TrialStatus> TrialStatusFromProto(v1::TrialStatus status) {
  return FindByProto(kTrialStatuses, status);
}

bool IsFinal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kCancelled ||
         state == JobState::kFailed;
}
bool IsChargedToBudget(TrialStatus status) {
  return status != TrialStatus::kWorkerLost && status != TrialStatus::kCancelled;
}

}  // namespace tessel

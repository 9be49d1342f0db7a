#include "search/stopping.h"

#include "sim/enum_names.h"

namespace tessel::search {

constexpr sim::EnumName<StopReason> kStopReasonNames[] = {
    {StopReason::kNone, "none"},
    {StopReason::kBudget, "budget"},
    {StopReason::kTimeLimit, "time_limit"},
    {StopReason::kNoImprovement, "no_improvement"},
    {StopReason::kTargetReached, "target_reached"},
    {StopReason::kExhausted, "exhausted"}};

std::string_view StopReasonName(StopReason reason) {
  return sim::NameIn(kStopReasonNames, reason, "unknown");
}

StopTracker::StopTracker(StopRule rule, Clock::time_point start) : rule_(rule), start_(start) {}

void StopTracker::Record(bool ok, double time_ns) {
  ++evaluations_;
  if (ok && time_ns < best_) {
    best_ = time_ns;
    since_improvement_ = 0;
  } else {
    ++since_improvement_;
  }
}

StopReason StopTracker::Check(Clock::time_point now) const {
  if (rule_.target_time_ns > 0 && best_ <= rule_.target_time_ns) return StopReason::kTargetReached;
  if (rule_.max_evaluations > 0 && evaluations_ >= rule_.max_evaluations) {
    return StopReason::kBudget;
  }
  if (rule_.no_improvement > 0 && since_improvement_ >= rule_.no_improvement) {
    return StopReason::kNoImprovement;
  }
  if (rule_.time_limit.count() > 0 && now - start_ >= rule_.time_limit) {
    return StopReason::kTimeLimit;
  }
  return StopReason::kNone;
}

const EffortPreset* FindEffortPreset(std::string_view name) {
  for (const EffortPreset& preset : kEffortPresets) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

std::string EffortPresetNames() {
  std::string names;
  for (const EffortPreset& preset : kEffortPresets) {
    if (!names.empty()) names += ", ";
    names += preset.name;
  }
  return names;
}

}  // namespace tessel::search

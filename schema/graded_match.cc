#include "schema/graded_match.h"

namespace tessel {

GradedMatcher::GradedMatcher(const Dims& dims, std::string_view dtype, std::string_view target)
    : canonical_(dims.Canonical()), dtype_(dtype), target_(target), logs_(dims) {}

bool GradedMatcher::Offer(size_t id, std::string_view canonical_dims, std::string_view dtype,
                          std::string_view target, const DimsLogs& logs) {
  if (dtype != dtype_) return false;
  if (target != target_) {
    if (!other_target_ && canonical_dims == canonical_) other_target_ = id;
    return false;
  }
  if (canonical_dims == canonical_) {
    if (!exact_) exact_ = id;
    return true;
  }
  const double distance = logs_.DistanceTo(logs);  // infinite for other dim names
  if (distance < nearest_distance_) {
    nearest_distance_ = distance;
    nearest_ = id;
  }
  return false;
}

bool GradedMatcher::Offer(size_t id, const Dims& dims, std::string_view dtype,
                          std::string_view target) {
  return Offer(id, dims.Canonical(), dtype, target, DimsLogs(dims));
}

GradedMatch GradedMatcher::Result() const {
  if (exact_) return {MatchLevel::kExact, exact_};
  if (nearest_) return {MatchLevel::kNearest, nearest_};
  if (other_target_) return {MatchLevel::kOtherTarget, other_target_};
  return {MatchLevel::kDefault, std::nullopt};
}

}  // namespace tessel

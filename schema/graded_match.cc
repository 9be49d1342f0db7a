#include "schema/graded_match.h"

#include <algorithm>
#include <limits>

namespace tessel {

GradedMatcher::GradedMatcher(const Dims& dims, std::string_view dtype, std::string_view target)
    : canonical_(dims.Canonical()), dtype_(dtype), target_(target), logs_(dims) {}

bool GradedMatcher::Offer(size_t id, std::string_view canonical_dims, std::string_view dtype,
                          std::string_view target, const DimsLogs& logs) {
  if (dtype != dtype_) return false;
  if (target != target_) {
    if (canonical_dims == canonical_) {
      if (!other_target_) other_target_ = id;
      matched_.push_back({MatchLevel::kOtherTarget, 0, id});
    }
    return false;
  }
  if (canonical_dims == canonical_) {
    if (!exact_) exact_ = id;
    matched_.push_back({MatchLevel::kExact, 0, id});
    return true;
  }
  const double distance = logs_.DistanceTo(logs);  // infinite for other dim names
  if (distance < nearest_distance_) {
    nearest_distance_ = distance;
    nearest_ = id;
  }
  if (distance < std::numeric_limits<double>::infinity()) {
    matched_.push_back({MatchLevel::kNearest, distance, id});
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

std::vector<GradedMatch> GradedMatcher::Ranked() const {
  std::vector<Matched> ranked = matched_;
  std::stable_sort(ranked.begin(), ranked.end(), [](const Matched& a, const Matched& b) {
    return a.level != b.level ? a.level < b.level : a.distance < b.distance;
  });
  std::vector<GradedMatch> out;
  out.reserve(ranked.size());
  for (const Matched& m : ranked) out.push_back({m.level, m.id});
  return out;
}

}  // namespace tessel

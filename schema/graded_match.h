// The graded-lookup rule, written once for the server's Lookup and libtessel's snapshot reader:
// given the workload asked for and the stored bests of its kernel, choose
//   exact        - same dims, dtype and target;
//   nearest      - same dtype and target and the same dim names, smallest DimsDistance (the sum
//                  over dims of |log2(tuned / wanted)|); the first offered wins a tie;
//   other_target - same dims and dtype on another target; the first offered wins;
//   default      - none of the above: the caller answers with the kernel's default config.
// Candidates of another dtype never match. Candidates are offered one at a time, so callers keep
// their own storage (store rows, snapshot entries) and precompute what they can (DimsLogs, in
// schema/key.h).
#ifndef TESSEL_SCHEMA_GRADED_MATCH_H_
#define TESSEL_SCHEMA_GRADED_MATCH_H_

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/key.h"
#include "schema/vocab.h"

namespace tessel {

// The result of a graded match: the level and, unless it is kDefault, the id the caller gave the
// chosen candidate in Offer.
struct GradedMatch {
  MatchLevel level = MatchLevel::kDefault;
  std::optional<size_t> candidate;
};

// Accumulates candidates for one query. Not thread-safe; cheap to create per lookup.
class GradedMatcher {
 public:
  // The query: the workload asked for (of the kernel whose bests will be offered).
  GradedMatcher(const Dims& dims, std::string_view dtype, std::string_view target);

  // Offers the stored best `id` (any number the caller can map back, e.g. an index), tuned for
  // `canonical_dims` (Dims::Canonical form), `dtype` and `target`, with `logs` built from those
  // dims. Returns true when it is an exact match (callers may stop offering then).
  bool Offer(size_t id, std::string_view canonical_dims, std::string_view dtype,
             std::string_view target, const DimsLogs& logs);
  // The same, building the logs from `dims`.
  bool Offer(size_t id, const Dims& dims, std::string_view dtype, std::string_view target);

  // The best match among the candidates offered so far.
  GradedMatch Result() const;
  // Every candidate offered so far that matches at some level, best first: the exact ones, the
  // nearest by distance, then other_target; ties in the order offered. Result() is the first
  // (kDefault with no candidate when this is empty). For callers that must skip candidates
  // they cannot use, in one pass.
  std::vector<GradedMatch> Ranked() const;

 private:
  std::string canonical_;
  std::string dtype_;
  std::string target_;
  DimsLogs logs_;
  std::optional<size_t> exact_;
  std::optional<size_t> nearest_;
  double nearest_distance_ = std::numeric_limits<double>::infinity();
  std::optional<size_t> other_target_;
  struct Matched {
    MatchLevel level;
    double distance;  // 0 unless nearest
    size_t id;
  };
  std::vector<Matched> matched_;  // in offer order
};

}  // namespace tessel

#endif  // TESSEL_SCHEMA_GRADED_MATCH_H_

// Spaces as the search sees them: a kernels::Space read as a product of typed parameters.
//
// Every strategy runs over a kernels::Space (a kernel's schedule space or a replayed recording).
// SearchSpace adds what a search needs on top: points addressed by one index (the same mixed radix
// as kernels::Space::Decode), parameter kinds inferred from the values (integer, power of two,
// categorical, permutation), numeric features for cost models, a memoised validity check, and
// neighbourhoods that only move between valid points.
#ifndef TESSEL_SEARCH_SPACE_H_
#define TESSEL_SEARCH_SPACE_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kernels/kernel.h"

namespace tessel::search {

enum class ParamKind {
  kInteger,      // numeric values; neighbours are the next smaller and larger value
  kPowerOfTwo,   // positive powers of two; as kInteger, features on a log2 scale
  kCategorical,  // unordered; every other value is a neighbour
  kPermutation,  // orderings of the same letters ("mnk", "nmk"); neighbours differ by one swap
};

// The kind `values` look like (see ParamKind); a single value is kInteger when numeric.
ParamKind InferKind(const std::vector<std::string>& values);

// Read-only view of a kernels::Space for strategies. Not thread-safe (the validity memo is
// mutable); one per strategy. `space` must outlive it.
class SearchSpace {
 public:
  explicit SearchSpace(const kernels::Space& space);
  SearchSpace(const SearchSpace&) = delete;
  SearchSpace& operator=(const SearchSpace&) = delete;

  const kernels::Space& space() const { return space_; }
  uint64_t size() const { return size_; }
  int num_params() const { return static_cast<int>(radix_.size()); }
  int radix(int param) const { return radix_[param]; }
  ParamKind kind(int param) const { return kinds_[param]; }

  // Value index of `param` in the point at `index`.
  int ValueAt(uint64_t index, int param) const {
    return static_cast<int>((index / stride_[param]) % radix_[param]);
  }
  // `index` with `param` set to value index `value`.
  uint64_t WithValue(uint64_t index, int param, int value) const {
    return index + (static_cast<int64_t>(value) - ValueAt(index, param)) *
                       static_cast<int64_t>(stride_[param]);
  }
  Config ToConfig(uint64_t index) const { return space_.Decode(index); }
  // nullopt when `config` names an unknown param or value.
  std::optional<uint64_t> IndexOf(const Config& config) const { return space_.Encode(config); }

  // Whether the point passes the space's check. Memoised.
  bool Valid(uint64_t index) const;
  // Numeric feature of value `value` of `param`: the number for integers, log2 for powers of two,
  // the value's position otherwise.
  double Feature(int param, int value) const { return features_[param][value]; }
  // Appends the features of the point at `index` to `out`: one per param, and last the log of
  // the kernel's analytic estimate when the space has one (num_features() in all).
  void Features(uint64_t index, std::vector<float>& out) const;
  int num_features() const { return num_params() + (has_estimate() ? 1 : 0); }

  // Whether the kernel gives an analytic time estimate (kernels::Space::Estimate).
  bool has_estimate() const { return space_.has_estimate(); }
  // The estimate of the point at `index` in ns; +inf without one or when the kernel cannot judge
  // the point. Memoised.
  double EstimateAt(uint64_t index) const;
  // Number of params whose values differ.
  int Distance(uint64_t a, uint64_t b) const;

  // Valid points one move from `index`: one param changed to a neighbouring value (see
  // ParamKind). With `radius` 2 also two params changed at once (constraints often tie params
  // together, so single moves can all be invalid). Deterministic order.
  std::vector<uint64_t> Neighbours(uint64_t index, int radius = 1) const;
  // Valid points that differ from `index` in 1 to `radius` params (at most 2), each changed to any
  // other of its values: a wider neighbourhood than Neighbours, for jumps that single moves cannot
  // make (a value several steps away whose intermediate points are invalid or worse).
  // Deterministic order.
  std::vector<uint64_t> Ball(uint64_t index, int radius) const;
  // A point one random valid move from `index` for which `accept` holds, trying single moves
  // then pairs; nullopt when there is none.
  template <typename Rng, typename Accept>
  std::optional<uint64_t> RandomNeighbour(uint64_t index, Rng& rng, Accept accept) const {
    for (int radius = 1; radius <= 2; ++radius) {
      std::vector<uint64_t> around = Neighbours(index, radius);
      std::shuffle(around.begin(), around.end(), rng);
      for (uint64_t n : around) {
        if (accept(n)) return n;
      }
    }
    return std::nullopt;
  }

  // Value indices that are one move from `value` of `param`.
  const std::vector<int>& MovesFrom(int param, int value) const { return moves_[param][value]; }

 private:
  const kernels::Space& space_;
  uint64_t size_ = 1;
  std::vector<int> radix_;
  std::vector<uint64_t> stride_;
  std::vector<ParamKind> kinds_;
  std::vector<std::vector<double>> features_;
  std::vector<std::vector<std::vector<int>>> moves_;
  mutable absl::flat_hash_map<uint64_t, bool> valid_memo_;
  mutable absl::flat_hash_map<uint64_t, double> estimate_memo_;
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_SPACE_H_

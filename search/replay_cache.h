// A Kernel Tuner cache file, read and parsed (search/replay.h replays searches on it). Apart
// from the search code, so the reader (untrusted input) can be fuzzed on its own (fuzz/).
#ifndef TESSEL_SEARCH_REPLAY_CACHE_H_
#define TESSEL_SEARCH_REPLAY_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/key.h"

namespace tessel::search {

// A Kernel Tuner cache file: the tunable parameters and every recorded configuration. A
// configuration that failed (time "CompilationFailedConfig", "RuntimeFailedConfig",
// "InvalidConfig" or any other string, a number >= 1e20, or no time) is a failed entry; a
// configuration absent from the cache is outside the space. Immutable after loading, so one
// cache can serve runs on several threads.
class ReplayCache {
 public:
  struct Entry {
    bool ok = false;
    double time = 0;           // recorded mean (ms in Kernel Tuner files), when ok
    std::vector<double> runs;  // the individual recorded runs, when present
  };

  // Reads a .json or gzipped .json(.gz) cache file (gzip is detected from the content).
  // NotFound when the file is missing; InvalidArgument naming the problem for a malformed one.
  static absl::StatusOr<ReplayCache> Load(const std::string& path);
  // Parses cache JSON text; `origin` names it in errors.
  static absl::StatusOr<ReplayCache> Parse(std::string_view text, std::string_view origin);

  // Parameters in tune_params_keys order, values as written in the cache keys.
  const std::vector<kernels::Param>& params() const { return params_; }
  // Points in the Cartesian product of the parameter values.
  uint64_t product_size() const { return product_size_; }
  // Recorded configurations (failed ones included) and those that ran.
  size_t entries() const { return entries_.size(); }
  size_t ok_entries() const { return ok_entries_; }
  // Fastest recorded mean.
  double best_time() const { return best_time_; }
  std::string_view kernel_name() const { return kernel_name_; }
  std::string_view device_name() const { return device_name_; }

  // Product index of `config` (first param varying fastest, as kernels::Space), or nullopt when
  // it names an unknown param or value.
  std::optional<uint64_t> IndexOf(const Config& config) const;
  // The entry at product index `index`, or nullptr when it was not recorded.
  const Entry* Find(uint64_t index) const;

  // Robustness variants: the same measurements, seen as another landscape could show them.
  // Each parameter's values relabelled by a seeded random permutation (the entry recorded with
  // value i of a parameter now sits at value perm(i)): the same landscape, but the order in which
  // the values are listed (and their numbers) says nothing about it any more.
  ReplayCache WithShuffledValues(uint64_t seed) const;
  // A seeded random `fraction` (in [0, 1)) of the successful entries marked failed, as if they
  // had crashed; at least one entry stays successful. best_time() is recomputed over the rest.
  ReplayCache WithFailedEntries(double fraction, uint64_t seed) const;

 private:
  std::vector<kernels::Param> params_;
  uint64_t product_size_ = 1;
  absl::flat_hash_map<uint64_t, Entry> entries_;
  size_t ok_entries_ = 0;
  double best_time_ = 0;
  std::string kernel_name_, device_name_;
};

// A seed for stream `salt` of `seed` (splitmix64), for the seeded variants and replay runs.
inline uint64_t MixSeed(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_REPLAY_CACHE_H_

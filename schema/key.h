// Value types shared by every tessel module: named dims and configs.
//
// These are the vocabulary of the storage format and the CLI, so their canonical string forms are
// stable: changing one is a key-version bump (see kKeyVersion).
#ifndef TESSEL_SCHEMA_KEY_H_
#define TESSEL_SCHEMA_KEY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tessel {

// Version of the canonical key forms (Dims::Canonical, Config::ToString and WorkloadKey in
// schema/workload_key.h). Bump when one of them changes shape.
// 1: initial form.
inline constexpr int kKeyVersion = 1;

// Named problem dimensions, e.g. M=4096,N=4096,K=4096. Order is kept as given; equality and the
// canonical form ignore order (dims are sorted by name there).
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<std::pair<std::string, int64_t>> dims);

  // Parses "M=4096,N=4096,K=4096". Returns InvalidArgument naming the bad piece on a malformed
  // string, a repeated name, or a value that is not a positive integer.
  static absl::StatusOr<Dims> Parse(std::string_view text);

  // Sets (or replaces) one dim.
  void Set(std::string_view name, int64_t value);
  // Returns the value of `name`, or nullopt when absent.
  std::optional<int64_t> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name).has_value(); }

  const std::vector<std::pair<std::string, int64_t>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

  // "M=4096,N=4096,K=4096" in the order the dims were given.
  std::string ToString() const;
  // Same, sorted by name: the storage form used in keys.
  std::string Canonical() const;

  friend bool operator==(const Dims& a, const Dims& b) { return a.Canonical() == b.Canonical(); }

 private:
  std::vector<std::pair<std::string, int64_t>> items_;
};

// A point in a kernel's schedule space: named parameter values as strings ("tile_m=128",
// "loop_order=mnk"). Order is the kernel's parameter order; ToString is the storage form.
class Config {
 public:
  Config() = default;
  Config(std::initializer_list<std::pair<std::string, std::string>> items);

  // Parses "tile_m=128,loop_order=mnk". Returns InvalidArgument on a malformed string or a
  // repeated name. Values are not checked here (the kernel does that).
  static absl::StatusOr<Config> Parse(std::string_view text);

  // The config of `items` as they are, in their order. REQUIRES: distinct names (as a kernel
  // space's params are); no search, unlike Set.
  static Config FromItems(std::vector<std::pair<std::string, std::string>> items) {
    Config config;
    config.items_ = std::move(items);
    return config;
  }

  void Set(std::string_view name, std::string value);
  void SetInt(std::string_view name, int64_t value) { Set(name, std::to_string(value)); }
  // Returns the value of `name`, or nullopt when absent.
  std::optional<std::string_view> Get(std::string_view name) const;
  // Returns the integer value of `name`; InvalidArgument when absent or not an integer.
  absl::StatusOr<int64_t> GetInt(std::string_view name) const;

  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }

  // "tile_m=128,tile_n=512" in parameter order. Empty config gives "".
  std::string ToString() const;

  friend bool operator==(const Config& a, const Config& b) { return a.items_ == b.items_; }
  template <typename H>
  friend H AbslHashValue(H h, const Config& c) {
    return H::combine(std::move(h), c.items_);
  }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// How far apart two problems of one kernel are: the sum over dims of |log2(a) - log2(b)|, so
// doubling one dim costs 1 wherever it starts. Infinity when the two do not name the same dims.
// This is the "nearest" of graded lookups (schema/graded_match.h). Equal to
// DimsLogs(a).DistanceTo(DimsLogs(b)), bit for bit.
double DimsDistance(const Dims& a, const Dims& b);

// Dims prepared for many distance computations: the names sorted and joined, and log2 of each
// value in that order. Build once per stored entry and once per query.
class DimsLogs {
 public:
  DimsLogs() = default;
  explicit DimsLogs(const Dims& dims);

  // DimsDistance of the two dims these were built from: infinity unless both name the same dims.
  double DistanceTo(const DimsLogs& other) const;

 private:
  std::string names_;  // e.g. "K,M,N,"
  std::vector<double> logs_;
};

// Splits "a=1,b=2" into pairs. Shared by Dims::Parse and Config::Parse.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValues(
    std::string_view text, std::string_view what);

}  // namespace tessel

#endif  // TESSEL_SCHEMA_KEY_H_

#include "worker/measure.h"

#include <algorithm>
#include <string>

#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "sim/result_json.h"

namespace tessel::worker {
namespace {

// SplitMix64 finaliser: a cheap, well-mixed 64-bit hash.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t RunSeed(uint64_t trial_seed, int run_index) {
  return Mix(Mix(trial_seed) ^ static_cast<uint64_t>(run_index));
}

absl::StatusOr<bool> ShouldVerify(std::string_view policy, int64_t trial_id, uint64_t seed) {
  if (policy == "always") return true;
  if (policy == "never" || policy.empty()) return false;
  constexpr std::string_view kSample = "sample:";
  if (policy.substr(0, kSample.size()) == kSample) {
    std::string text(policy.substr(kSample.size()));
    double fraction = -1;
    size_t used = 0;
    try {
      fraction = std::stod(text, &used);
    } catch (...) {
      used = 0;
    }
    if (used == text.size() && used > 0 && fraction >= 0 && fraction <= 1) {
      uint64_t h = Mix(Mix(static_cast<uint64_t>(trial_id)) ^ seed);
      // Top 53 bits as a uniform double in [0, 1).
      double u = static_cast<double>(h >> 11) * 0x1.0p-53;
      return u < fraction;
    }
  }
  return absl::InvalidArgumentError(StrCat("unknown verify policy '", policy,
                                           "'; expected always, never or sample:P with 0<=P<=1"));
}

std::string StatsJson(const sim::SimResult& result) { return sim::ResultJson(result).dump(); }

}  // namespace tessel::worker

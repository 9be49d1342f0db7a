#include "kernels/adapt.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::kernels {
namespace {

// Searching more combinations than this is not worth a lookup's time.
constexpr size_t kMaxCombinations = 100'000;

std::optional<int64_t> AsInt(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// One shrinkable param of the config: its values no larger than the config's, largest first.
struct Shrinkable {
  std::string name;
  int64_t original = 0;
  std::vector<int64_t> values;
};

}  // namespace

bool IsShrinkableParam(const std::string& name) {
  return name.rfind("block", 0) == 0 || name == "shards";
}

absl::StatusOr<AdaptedConfig> AdaptConfig(const Space& space, const Config& config) {
  const absl::Status valid = space.Validate(config);
  if (valid.ok()) return AdaptedConfig{config, {}};
  std::vector<Shrinkable> shrinkable;
  size_t combinations = 1;
  for (const Param& param : space.params()) {
    if (!IsShrinkableParam(param.name)) continue;
    const std::optional<std::string_view> text = config.Get(param.name);
    const std::optional<int64_t> original = text ? AsInt(*text) : std::nullopt;
    if (!original) continue;
    Shrinkable s{param.name, *original, {}};
    for (const std::string& value : param.values) {
      if (std::optional<int64_t> v = AsInt(value); v && *v <= *original) s.values.push_back(*v);
    }
    std::sort(s.values.rbegin(), s.values.rend());
    if (s.values.size() < 2) continue;
    combinations *= s.values.size();
    shrinkable.push_back(std::move(s));
  }
  if (shrinkable.empty() || combinations > kMaxCombinations) return valid;

  // Every combination, in order (first param slowest, largest values first), keeping the
  // closest valid one: strict improvement only, so ties go to the earlier, larger choice.
  std::optional<Config> best;
  double best_distance = std::numeric_limits<double>::infinity();
  std::vector<size_t> at(shrinkable.size(), 0);
  for (size_t n = 0; n < combinations; ++n) {
    Config candidate = config;
    double distance = 0;
    for (size_t i = 0; i < shrinkable.size(); ++i) {
      const int64_t value = shrinkable[i].values[at[i]];
      candidate.SetInt(shrinkable[i].name, value);
      distance += std::log2(static_cast<double>(shrinkable[i].original) / value);
    }
    if (distance < best_distance && space.Validate(candidate).ok()) {
      best = std::move(candidate);
      best_distance = distance;
    }
    for (size_t i = shrinkable.size(); i-- > 0;) {  // next combination, last param fastest
      if (++at[i] < shrinkable[i].values.size()) break;
      at[i] = 0;
    }
  }
  if (!best) return valid;
  AdaptedConfig adapted{*best, {}};
  for (const Shrinkable& s : shrinkable) {
    const std::string now(*best->Get(s.name));
    if (now != std::to_string(s.original)) {
      adapted.changes.push_back(StrCat(s.name, " ", s.original, "->", now));
    }
  }
  return adapted;
}

absl::StatusOr<ServedConfig> ServeGraded(const ResolvedWorkload& asked,
                                         const GradedCandidates& candidates) {
  TESSEL_ASSIGN_OR_RETURN(const Space space, asked.kernel->SpaceFor(asked.problem, asked.target));
  GradedMatcher matcher(asked.problem.dims, asked.problem.dtype, asked.target.name);
  for (size_t i = 0; i < candidates.count; ++i) candidates.offer(matcher, i);
  // Candidates often share configs: each distinct config is checked once.
  std::map<std::string_view, std::optional<AdaptedConfig>> checked;
  // The graded best is usually usable: the full ranking is only sorted when it is not.
  const GradedMatch first = matcher.Result();
  std::vector<GradedMatch> ranked;
  if (first.candidate) ranked.push_back(first);
  for (size_t next = 0; next < ranked.size(); ++next) {
    const GradedMatch& match = ranked[next];
    const std::string_view text = candidates.config(*match.candidate);
    auto [it, inserted] = checked.try_emplace(text);
    if (inserted) {
      if (absl::StatusOr<Config> config = Config::Parse(text); config.ok()) {
        if (absl::StatusOr<AdaptedConfig> usable = AdaptConfig(space, *config); usable.ok()) {
          it->second = *std::move(usable);
        }
      }
    }
    if (it->second) return ServedConfig{match.candidate, match.level, *it->second};
    if (next == 0) ranked = matcher.Ranked();  // starts with `first` again
  }
  return ServedConfig{std::nullopt, MatchLevel::kDefault,
                      AdaptedConfig{asked.kernel->Default(asked.problem, asked.target), {}}};
}

}  // namespace tessel::kernels

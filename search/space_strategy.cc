#include "search/space_strategy.h"

#include <algorithm>

namespace tessel::search {
namespace {

// Random draws before RandomUnseen falls back to scanning; keeps sparse valid spaces cheap.
constexpr int kMaxRandomDraws = 64;

}  // namespace

SpaceStrategy::SpaceStrategy(const kernels::Space& space, uint64_t seed)
    : space_(space), rng_(seed) {}

void SpaceStrategy::AddPriorStarts(std::span<const Result> prior, int per_group) {
  std::vector<Result> ok;
  for (const Result& r : prior) {
    if (r.ok) ok.push_back(r);
  }
  std::sort(ok.begin(), ok.end(), [](const Result& a, const Result& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.index < b.index);
  });
  std::vector<uint64_t> starts;  // best last, so pop_back takes the best
  for (int i = std::min<int>(per_group, ok.size()) - 1; i >= 0; --i) starts.push_back(ok[i].index);
  prior_starts_.insert(prior_starts_.begin(), starts.begin(), starts.end());
}

std::optional<uint64_t> SpaceStrategy::PopPriorStart() {
  if (prior_starts_.empty()) return std::nullopt;
  const uint64_t index = prior_starts_.back();
  prior_starts_.pop_back();
  return index;
}

bool SpaceStrategy::TakePriorStart(std::vector<uint64_t>& out) {
  std::optional<uint64_t> start = PopPriorStart();
  if (start && Claim(*start)) out.push_back(*start);
  return start.has_value();
}

bool SpaceStrategy::Claim(uint64_t index) {
  if (seen_.contains(index) || !space_.Valid(index)) return false;
  seen_.insert(index);
  pending_.insert(index);
  return true;
}

std::optional<uint64_t> SpaceStrategy::RandomUnseen() {
  const uint64_t size = space_.size();
  if (seen_.size() >= size) return std::nullopt;
  if (seen_.size() * 2 < size) {
    std::uniform_int_distribution<uint64_t> pick(0, size - 1);
    for (int draw = 0; draw < kMaxRandomDraws; ++draw) {
      uint64_t index = pick(rng_);
      if (Claim(index)) return index;
    }
  }
  // Scan from a cursor; every point behind it is seen or invalid, so this ends.
  while (scan_cursor_ < size) {
    uint64_t index = scan_cursor_++;
    if (Claim(index)) return index;
  }
  return std::nullopt;
}

std::vector<uint64_t> SpaceStrategy::ProposeIndex(int max_n) {
  std::vector<uint64_t> out;
  if (max_n <= 0) return out;
  ProposeIndices(max_n, out);
  if (static_cast<int>(out.size()) > max_n) out.resize(max_n);
  while (static_cast<int>(out.size()) < max_n) {
    std::optional<uint64_t> index = RandomUnseen();
    if (!index) break;
    out.push_back(*index);
  }
  return out;
}

std::vector<Config> SpaceStrategy::Propose(int max_n) {
  std::vector<Config> out;
  for (uint64_t index : ProposeIndex(max_n)) out.push_back(space_.ToConfig(index));
  return out;
}

std::optional<double> SpaceStrategy::TimeOf(uint64_t index) const {
  auto it = times_.find(index);
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

void SpaceStrategy::ObserveIndex(const Result& result) {
  seen_.insert(result.index);
  bool mine = pending_.erase(result.index) > 0;
  if (times_.contains(result.index) || failed_.contains(result.index)) return;  // repeat report
  if (result.ok) {
    times_[result.index] = result.time_ns;
    if (result.time_ns < best_time_) {
      best_time_ = result.time_ns;
      best_index_ = result.index;
    }
  } else {
    failed_.insert(result.index);
  }
  history_.push_back(result);
  OnResult(result, mine);
}

void SpaceStrategy::Observe(std::span<const Observation> results) {
  for (const Observation& observation : results) {
    std::optional<uint64_t> index = space_.IndexOf(observation.config);
    if (!index) continue;  // not a point of this space: nothing to learn
    ObserveIndex(Result{*index, observation.ok, observation.time_ns});
  }
}

void SpaceStrategy::ObservePrior(std::span<const Observation> results) {
  std::vector<Result> prior;
  for (const Observation& observation : results) {
    std::optional<uint64_t> index = space_.IndexOf(observation.config);
    if (!index || !space_.Valid(*index)) continue;
    prior.push_back(Result{*index, observation.ok, observation.time_ns});
  }
  if (!prior.empty()) OnPrior(prior);
}

}  // namespace tessel::search

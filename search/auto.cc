// auto: a bandit over the other strategies.
#include <algorithm>
#include <cmath>
#include <limits>

#include "search/design.h"
#include "search/strategies.h"

namespace tessel::search {
namespace {

// Points of the initial design (search/design.h) before the bandit starts: a spread-out sample
// every arm (and the model) learns from. A Latin hypercube of 16 points puts every value of a
// parameter with up to 16 values into the sample once (tile sizes and block sizes often have
// 8-32 values), and spreads the rest.
constexpr int kInitialDesign = 16;
// The explore arm proposes the unseen valid point farthest (DesignMetric) from everything
// observed among this many random ones: a mild push towards regions nobody has looked at.
constexpr int kExploreCandidates = 4;
// Per-result discount of the arms' records: an arm's old successes fade over ~50 results.
constexpr double kDiscount = 0.98;
// Reward for a result that does not improve the best but lands among the best tenth so far.
constexpr double kNearBestReward = 0.25;
constexpr double kNearBestQuantile = 0.1;

uint64_t Mix(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SampleBeta(std::mt19937_64& rng, double a, double b) {
  double x = std::gamma_distribution<double>(a, 1.0)(rng);
  double y = std::gamma_distribution<double>(b, 1.0)(rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace

AutoStrategy::AutoStrategy(const kernels::Space& space, uint64_t seed)
    : SpaceStrategy(space, seed), metric_(space_), initial_design_(kInitialDesign) {
  ModelStrategy::Options model_options;
  model_options.initial_random = 0;  // auto's own random start feeds it
  model_options.explore = 0.0;       // the other arms explore
  // At a certified local optimum the model looks at points two params away, any values.
  model_options.widen_at_local_optimum = true;
  arms_.push_back({std::make_unique<ModelStrategy>(space, Mix(seed, 1), model_options), "model"});
  arms_.push_back({std::make_unique<IlsStrategy>(space, Mix(seed, 2)), "ils"});
  arms_.push_back({std::make_unique<GeneticStrategy>(space, Mix(seed, 3)), "genetic"});
  arms_.push_back({std::make_unique<AnnealStrategy>(space, Mix(seed, 4)), "anneal"});
  arms_.push_back({nullptr, "explore"});
}

std::vector<std::pair<std::string, int>> AutoStrategy::ArmUsage() const {
  std::vector<std::pair<std::string, int>> usage;
  for (const Arm& arm : arms_) usage.emplace_back(arm.name, arm.proposed);
  return usage;
}

std::optional<uint64_t> AutoStrategy::ExploreUnseen() {
  std::uniform_int_distribution<uint64_t> pick(0, space_.size() - 1);
  std::optional<uint64_t> chosen;
  double farthest = -1;
  // Bounded draws: in a sparse valid space fall back to RandomUnseen (which scans).
  for (int draw = 0, found = 0; draw < 16 * kExploreCandidates && found < kExploreCandidates;
       ++draw) {
    uint64_t index = pick(rng_);
    if (Seen(index) || !space_.Valid(index)) continue;
    ++found;
    double closest = std::numeric_limits<double>::infinity();
    for (const Result& r : history()) closest = std::min(closest, metric_(index, r.index));
    if (closest > farthest) {
      farthest = closest;
      chosen = index;
    }
  }
  if (chosen && Claim(*chosen)) return chosen;
  return RandomUnseen();
}

int AutoStrategy::PickArm() {
  int best = 0;
  double best_draw = -1;
  for (int a = 0; a < static_cast<int>(arms_.size()); ++a) {
    const Arm& arm = arms_[a];
    double draw = SampleBeta(rng_, 1.0 + arm.wins, 1.0 + std::max(0.0, arm.plays - arm.wins));
    if (draw > best_draw) {
      best_draw = draw;
      best = a;
    }
  }
  return best;
}

void AutoStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  int attempts = 0;
  while (static_cast<int>(out.size()) < max_n && attempts++ < 8 * max_n + 8) {
    if (!prior_starts_.empty()) {
      uint64_t index = prior_starts_.back();
      prior_starts_.pop_back();
      if (Claim(index)) out.push_back(index);
      continue;
    }
    if (!design_built_) {
      design_built_ = true;
      int n = initial_design_ - static_cast<int>(history().size()) - pending();
      design_ = SpaceFillingDesign(space_, n, rng_, [this](uint64_t i) { return !Seen(i); });
      std::reverse(design_.begin(), design_.end());  // next at the back
    }
    if (!design_.empty()) {
      uint64_t index = design_.back();
      design_.pop_back();
      if (!Claim(index)) continue;
      for (Arm& arm : arms_) {
        if (arm.strategy != nullptr) arm.strategy->MarkSeen(index);
      }
      out.push_back(index);
      continue;
    }
    int a = PickArm();
    Arm& arm = arms_[a];
    std::optional<uint64_t> index;
    if (arm.strategy == nullptr) {
      index = ExploreUnseen();
    } else {
      std::vector<uint64_t> proposal = arm.strategy->ProposeIndex(1);
      if (!proposal.empty() && Claim(proposal[0])) index = proposal[0];
    }
    if (!index) continue;
    owner_[*index] = a;
    ++arm.proposed;
    for (Arm& other : arms_) {
      if (&other != &arm && other.strategy != nullptr) other.strategy->MarkSeen(*index);
    }
    out.push_back(*index);
  }
}

void AutoStrategy::OnResult(const Result& result, bool mine) {
  (void)mine;
  // Reward against what was known before this result.
  double best_before = sorted_times_.empty() ? INFINITY : sorted_times_.front();
  double near_best =
      sorted_times_.empty()
          ? INFINITY
          : sorted_times_[static_cast<size_t>(kNearBestQuantile * (sorted_times_.size() - 1))];
  double reward = 0;
  if (result.ok && result.time_ns < best_before)
    reward = 1;
  else if (result.ok && result.time_ns <= near_best)
    reward = kNearBestReward;
  if (result.ok) {
    sorted_times_.insert(
        std::upper_bound(sorted_times_.begin(), sorted_times_.end(), result.time_ns),
        result.time_ns);
  }
  if (auto it = owner_.find(result.index); it != owner_.end()) {
    for (Arm& arm : arms_) {
      arm.wins *= kDiscount;
      arm.plays *= kDiscount;
    }
    Arm& arm = arms_[it->second];
    arm.plays += 1;
    arm.wins += reward;
    owner_.erase(it);
  }
  for (Arm& arm : arms_) {
    if (arm.strategy != nullptr) arm.strategy->ObserveIndex(result);
  }
}

void AutoStrategy::OnPrior(std::span<const Result> prior) {
  for (Arm& arm : arms_) {
    if (arm.strategy != nullptr) arm.strategy->ObservePriorIndex(prior);
  }
  // The prior's best few points go first; fewer random points are needed after them.
  std::vector<Result> ok;
  for (const Result& r : prior) {
    if (r.ok) ok.push_back(r);
  }
  std::sort(ok.begin(), ok.end(), [](const Result& a, const Result& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.index < b.index);
  });
  std::vector<uint64_t> starts;  // best last
  for (int i = std::min<int>(3, ok.size()) - 1; i >= 0; --i) starts.push_back(ok[i].index);
  prior_starts_.insert(prior_starts_.begin(), starts.begin(), starts.end());
  initial_design_ = 0;
}

}  // namespace tessel::search

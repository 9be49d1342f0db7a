// auto: a bandit over the other strategies.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "search/design.h"
#include "search/strategies.h"

namespace tessel::search {
namespace {

// The explore arm proposes the unseen valid point farthest (DesignMetric) from everything
// observed among this many random ones: a mild push towards regions nobody has looked at.
constexpr int kExploreCandidates = 4;
// Reward for a result that does not improve the best but lands among the best tenth so far.
constexpr double kNearBestReward = 0.25;
constexpr double kNearBestQuantile = 0.1;
// With a kernel's analytic estimate: valid points sampled and ranked by it (the whole space when
// it is small), the initial design's first kPriorDesign points are the best ranked ones (no two
// within one param of each other), and a "prior" arm keeps proposing in that order.
constexpr int kPriorPool = 16384;
constexpr int kPriorDesign = 8;
// Wall-clock cap on ranking the sample: a safety net that no kernel reaches today, because a
// sample cut by time depends on the machine's speed and load, and the search with it. With a
// 500 ms cap, attention's estimate (~0.1 ms a call) ranked part of its sample, and one seed of a
// Llama prefill tune ended at 1.862 ms alone and at 1.876 ms beside another run; ranked whole,
// `tessel tune attention` of the 4096-token example still takes 2.0 s at budget 2.
constexpr std::chrono::milliseconds kPriorRankingTime{10000};
// The sample holds about the estimate's best percent of a million-config space, and the estimate's
// best points lie a few params from the sample's. So the sample's best kPriorClimbs each descend
// the estimate (the best change of one param to any value, while it improves), in at most
// kPriorClimbCalls more estimates in all (a quarter of the sample's), and where they end joins
// the ranking. Only the ends: the points on the way, all near them, would fill the prior design
// and the prior arm with one basin of the estimate, and where the estimate errs (it flatters a
// region) the search has nothing else to measure early.
constexpr int kPriorClimbs = 8;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kPriorClimbCalls = kPriorPool / 4;

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
    : AutoStrategy(space, seed, Options{}) {}

AutoStrategy::AutoStrategy(const kernels::Space& space, uint64_t seed, Options options)
    : SpaceStrategy(space, seed),
      options_(std::move(options)),
      metric_(space_),
      initial_design_(options_.design) {
  for (const std::string& name : options_.arms) {
    if (name == "model") {
      ModelStrategy::Options model_options;
      model_options.initial_random = 0;  // auto's own random start feeds it
      model_options.explore = 0.0;       // the other arms explore
      // At a certified local optimum the model looks at points two params away, any values.
      model_options.widen_at_local_optimum = true;
      model_options.any_value_moves = options_.any_value_moves;
      model_options.one_hot = options_.one_hot;
      model_options.one_hot_min_values = options_.one_hot_min_values;
      model_options.rounds = options_.rounds;
      model_options.refit_growth = options_.refit_growth;
      model_options.train_limit = options_.train_limit;
      model_options.tree_method = options_.tree_method;
      arms_.push_back(
          {std::make_unique<ModelStrategy>(space, Mix(seed, 1), model_options), "model"});
    } else if (name == "ils") {
      arms_.push_back({std::make_unique<IlsStrategy>(space, Mix(seed, 2)), "ils"});
    } else if (name == "genetic") {
      arms_.push_back({std::make_unique<GeneticStrategy>(space, Mix(seed, 3)), "genetic"});
    } else if (name == "anneal") {
      arms_.push_back({std::make_unique<AnnealStrategy>(space, Mix(seed, 4)), "anneal"});
    } else if (name == "ga") {
      arms_.push_back({std::make_unique<StandardGaStrategy>(space, Mix(seed, 5)), "ga"});
    } else if (name == "explore" || name == "random") {
      arms_.push_back({nullptr, name});
    }
  }
  if (space_.has_estimate()) arms_.push_back({nullptr, "prior"});
}

absl::StatusOr<AutoStrategy::Options> AutoStrategy::ParseOptions(std::string_view text) {
  Options options;
  for (std::string_view item : StrSplit(text, ',')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat("auto option '", item, "' is not name=value (e.g. auto:design=16,floor=0.1)"));
    }
    std::string name(item.substr(0, eq)), value(item.substr(eq + 1));
    // Stores the value, a number in [low, high], in `*field` (an int field takes its whole part).
    auto number = [&](double low, double high, auto* field) -> absl::Status {
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(v >= low && v <= high)) {
        return absl::InvalidArgumentError(StrCat("auto option ", name, "=", value,
                                                 ": expected a number in [", low, ", ", high, "]"));
      }
      *field = static_cast<std::remove_pointer_t<decltype(field)>>(v);
      return absl::OkStatus();
    };
    // OK when the value is `a` or `b`.
    auto one_of = [&](const char* a, const char* b) -> absl::Status {
      if (value != a && value != b) {
        return absl::InvalidArgumentError(
            StrCat("auto option ", name, "=", value, ": expected ", a, " or ", b));
      }
      return absl::OkStatus();
    };
    if (name == "design") {
      TESSEL_RETURN_IF_ERROR(number(0, 1000, &options.design));
    } else if (name == "floor") {
      TESSEL_RETURN_IF_ERROR(number(0, 1, &options.floor));
    } else if (name == "discount") {
      TESSEL_RETURN_IF_ERROR(number(0.5, 1, &options.discount));
    } else if (name == "moves") {
      TESSEL_RETURN_IF_ERROR(one_of("adjacent", "any"));
      options.any_value_moves = value == "any";
    } else if (name == "features") {
      TESSEL_RETURN_IF_ERROR(one_of("numeric", "onehot"));
      options.one_hot = value == "onehot";
    } else if (name == "onehot_min") {
      TESSEL_RETURN_IF_ERROR(number(3, 33, &options.one_hot_min_values));
    } else if (name == "rounds") {
      TESSEL_RETURN_IF_ERROR(number(1, 1000, &options.rounds));
    } else if (name == "refit") {
      TESSEL_RETURN_IF_ERROR(number(0, 10, &options.refit_growth));
    } else if (name == "train") {
      TESSEL_RETURN_IF_ERROR(number(0, 1000000, &options.train_limit));
    } else if (name == "tree") {
      TESSEL_RETURN_IF_ERROR(one_of("exact", "hist"));
      options.tree_method = value;
    } else if (name == "arms") {
      options.arms.clear();
      for (std::string_view arm : StrSplit(value, '+')) {
        static const char* const kArms[] = {"model", "ils",     "genetic", "anneal",
                                            "ga",    "explore", "random"};
        if (std::find(std::begin(kArms), std::end(kArms), arm) == std::end(kArms)) {
          return absl::InvalidArgumentError(
              StrCat("auto option arms: unknown arm '", arm,
                     "' (known: model, ils, genetic, anneal, ga, explore, random)"));
        }
        options.arms.emplace_back(arm);
      }
      if (options.arms.empty()) return absl::InvalidArgumentError("auto option arms: no arm");
    } else {
      return absl::InvalidArgumentError(
          StrCat("unknown auto option '", name,
                 "' (known: design, floor, discount, moves, "
                 "features, onehot_min, rounds, refit, train, tree, arms)"));
    }
  }
  return options;
}

void AutoStrategy::Prepare() {
  if (space_.has_estimate() && !prior_built_) BuildPriorRanking();
}

// Prior rankings by space identity (kernels::Space::identity), shared by the searches of one
// workload in this process: the rounds of `tessel tune-model` are jobs of their own, and ranking
// anew took ~0.7 s of each 16-trial round (half a model tune's CPU). The most recent
// kSharedRankings are kept.
class SharedRankings {
 public:
  static SharedRankings& Get() {
    static SharedRankings* rankings = new SharedRankings;
    return *rankings;
  }
  std::shared_ptr<const std::vector<uint64_t>> Find(const std::string& identity) {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, ranking] : entries_) {
      if (key == identity) return ranking;
    }
    return nullptr;
  }
  void Put(const std::string& identity, std::vector<uint64_t> ranking) {
    absl::MutexLock lock(&mu_);
    std::erase_if(entries_, [&](const auto& entry) { return entry.first == identity; });
    entries_.emplace_back(identity,
                          std::make_shared<const std::vector<uint64_t>>(std::move(ranking)));
    if (entries_.size() > kSharedRankings) entries_.pop_front();
  }

 private:
  static constexpr size_t kSharedRankings = 64;  // 128 KiB each at most
  absl::Mutex mu_;
  std::deque<std::pair<std::string, std::shared_ptr<const std::vector<uint64_t>>>> entries_
      ABSL_GUARDED_BY(mu_);
};

void AutoStrategy::BuildPriorRanking() {
  prior_built_ = true;
  // A space with an identity: the ranking is the workload's, shared, and its sample is drawn
  // with a seed of its own (the same whichever job ranks first), so a job's proposals still
  // depend only on its seed.
  const std::string& identity = space_.space().identity();
  if (!identity.empty()) {
    if (auto shared = SharedRankings::Get().Find(identity)) {
      prior_ranked_ = *shared;
      return;
    }
  }
  std::mt19937_64 own_rng(std::hash<std::string>{}(identity));
  std::mt19937_64& rng = identity.empty() ? rng_ : own_rng;
  std::vector<uint64_t> pool;
  if (space_.size() <= 4 * static_cast<uint64_t>(kPriorPool)) {
    for (uint64_t i = 0; i < space_.size(); ++i) {
      if (space_.Valid(i)) pool.push_back(i);
    }
  } else {
    absl::flat_hash_set<uint64_t> drawn;
    std::uniform_int_distribution<uint64_t> pick(0, space_.size() - 1);
    for (int draw = 0; draw < 64 * kPriorPool && static_cast<int>(pool.size()) < kPriorPool;
         ++draw) {
      uint64_t i = pick(rng);
      if (drawn.insert(i).second && space_.Valid(i)) pool.push_back(i);
    }
  }
  // In random order, so that a sample cut short by the time cap is still a random sample.
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<std::pair<double, uint64_t>> ranked;
  const auto start = std::chrono::steady_clock::now();
  for (size_t k = 0; k < pool.size(); ++k) {
    // A slow estimate (attention: ~0.2 ms a call) ranks fewer points rather than stall the job
    // (the server runs this in Prepare, outside its locks; replay in the first Propose). Checked
    // every 64 calls.
    if (k % 64 == 63 && std::chrono::steady_clock::now() - start > kPriorRankingTime) break;
    double estimate = space_.EstimateAt(pool[k]);
    if (std::isfinite(estimate)) ranked.emplace_back(estimate, pool[k]);
  }
  std::sort(ranked.begin(), ranked.end(), std::greater<>());  // best last
  ClimbEstimate(ranked);
  prior_ranked_.clear();
  for (const auto& [estimate, i] : ranked) prior_ranked_.push_back(i);
  if (!identity.empty()) SharedRankings::Get().Put(identity, prior_ranked_);
}

void AutoStrategy::ClimbEstimate(std::vector<std::pair<double, uint64_t>>& ranked) const {
  absl::flat_hash_map<uint64_t, double> estimated;
  for (const auto& [estimate, i] : ranked) estimated.emplace(i, estimate);
  int calls = 0;
  std::vector<std::pair<double, uint64_t>> found;  // the descents' ends
  for (int climb = 0; climb < kPriorClimbs && climb < static_cast<int>(ranked.size()); ++climb) {
    auto [best, at] = ranked[ranked.size() - 1 - static_cast<size_t>(climb)];
    const uint64_t start = at;
    for (bool moved = true; moved && calls < kPriorClimbCalls;) {
      moved = false;
      const uint64_t from = at;
      for (uint64_t n : space_.Ball(from, 1)) {
        auto [it, added] = estimated.emplace(n, kInf);
        if (added) {
          if (++calls > kPriorClimbCalls) break;
          const double e = space_.EstimateAt(n);
          if (std::isfinite(e)) it->second = e;
        }
        if (it->second < best) {
          best = it->second;
          at = n;
          moved = true;
        }
      }
    }
    const bool known =
        std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.second == at; });
    if (at != start && !known) found.emplace_back(best, at);
  }
  if (found.empty()) return;
  ranked.insert(ranked.end(), found.begin(), found.end());
  std::sort(ranked.begin(), ranked.end(), std::greater<>());  // best last
}

std::optional<uint64_t> AutoStrategy::NextByEstimate() {
  if (!prior_built_) BuildPriorRanking();
  while (!prior_ranked_.empty()) {
    uint64_t index = prior_ranked_.back();
    prior_ranked_.pop_back();
    if (Claim(index)) return index;
  }
  return std::nullopt;
}

std::vector<uint64_t> AutoStrategy::PriorDesign(int n) {
  if (!prior_built_) BuildPriorRanking();
  std::vector<uint64_t> chosen;
  for (auto it = prior_ranked_.rbegin();
       it != prior_ranked_.rend() && static_cast<int>(chosen.size()) < n; ++it) {
    if (Seen(*it)) continue;
    bool close = std::any_of(chosen.begin(), chosen.end(),
                             [&](uint64_t c) { return space_.Distance(c, *it) < 2; });
    if (!close) chosen.push_back(*it);
  }
  return chosen;
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
  const size_t params = static_cast<size_t>(space_.num_params());
  for (size_t seen = history_ranks_.size() / std::max<size_t>(params, 1); seen < history().size();
       ++seen) {
    metric_.AppendRanks(history()[seen].index, history_ranks_);
  }
  std::vector<int> ranks;
  // Bounded draws: in a sparse valid space fall back to RandomUnseen (which scans).
  for (int draw = 0, found = 0; draw < 16 * kExploreCandidates && found < kExploreCandidates;
       ++draw) {
    uint64_t index = pick(rng_);
    if (Seen(index) || !space_.Valid(index)) continue;
    ++found;
    ranks.clear();
    metric_.AppendRanks(index, ranks);
    // Its distance to the nearest seen config; once that is no farther than the farthest
    // candidate's, this one cannot be chosen, and the scan stops.
    double closest = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < history().size() && closest > farthest; ++k) {
      closest =
          std::min(closest, metric_.Distance(ranks.data(), history_ranks_.data() + k * params));
    }
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
  if (options_.floor > 0 && Uniform(rng_) < options_.floor) {
    return static_cast<int>(rng_() % arms_.size());
  }
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

std::string AutoStrategy::ProposedBy(const Config& config) const {
  const std::optional<uint64_t> index = search_space().IndexOf(config);
  if (!index) return "design";
  const auto it = owner_.find(*index);
  return it == owner_.end() ? "design" : arms_[static_cast<size_t>(it->second)].name;
}

void AutoStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  int attempts = 0;
  while (static_cast<int>(out.size()) < max_n && attempts++ < 8 * max_n + 8) {
    if (TakePriorStart(out)) continue;
    if (!design_built_) {
      design_built_ = true;
      int n = initial_design_ - static_cast<int>(history().size()) - pending();
      std::vector<uint64_t> prior;
      if (space_.has_estimate() && n > 0) prior = PriorDesign(std::min(n, kPriorDesign));
      absl::flat_hash_set<uint64_t> in_prior(prior.begin(), prior.end());
      design_ = SpaceFillingDesign(space_, n - static_cast<int>(prior.size()), rng_,
                                   [&](uint64_t i) { return !Seen(i) && !in_prior.contains(i); });
      design_.insert(design_.begin(), prior.begin(), prior.end());
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
    if (arm.name == "prior") {
      index = NextByEstimate();
    } else if (arm.name == "random") {
      index = RandomUnseen();
    } else if (arm.strategy == nullptr) {
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
      arm.wins *= options_.discount;
      arm.plays *= options_.discount;
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
  AddPriorStarts(prior, 3);
  initial_design_ = 0;
}

}  // namespace tessel::search

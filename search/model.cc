// model: search ranked by a cost model (search/cost_model.h) over point features.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "search/cost_model.h"
#include "search/strategies.h"

namespace tessel::search {

namespace {

// Relevance grades for one query group: ok points 1 (slowest) to 31 (fastest) by their rank in
// time, failed points 16.
template <typename FeaturesFn>
void AppendGroup(const FeaturesFn& features, std::span<const Result> results, std::vector<float>& x,
                 std::vector<float>& labels, std::vector<unsigned>& groups) {
  std::vector<double> times;
  for (const Result& r : results) {
    if (r.ok) times.push_back(r.time_ns);
  }
  std::sort(times.begin(), times.end());
  const double span = std::max<double>(1, times.size() - 1);
  for (const Result& r : results) {
    features(r.index, x);
    if (!r.ok) {
      // Failures rank with the median result, not below everything: the fastest configs often
      // sit next to ones that fail (a resource limit just exceeded), and ranking failures last
      // would steer the search away from exactly that region.
      labels.push_back(16.0f);
      continue;
    }
    double rank = std::lower_bound(times.begin(), times.end(), r.time_ns) - times.begin();
    labels.push_back(1.0f + std::floor(30.0 * (1.0 - rank / span)));
  }
  groups.push_back(static_cast<unsigned>(results.size()));
}

// Params with at most this many values get one 0/1 feature per value with Options::one_hot.
constexpr int kMaxOneHotValues = 32;

int OneHotFeatures(const SearchSpace& space, int min_values) {
  int n = 0;
  for (int p = 0; p < space.num_params(); ++p) {
    if (space.radix(p) >= min_values && space.radix(p) <= kMaxOneHotValues) n += space.radix(p);
  }
  return n;
}

}  // namespace

ModelStrategy::ModelStrategy(const kernels::Space& space, uint64_t seed)
    : ModelStrategy(space, seed, Options{}) {}

ModelStrategy::ModelStrategy(const kernels::Space& space, uint64_t seed, Options options)
    : SpaceStrategy(space, seed),
      options_(options),
      model_(std::make_unique<CostModel>(
          space_.num_features() +
              (options.one_hot ? OneHotFeatures(space_, options.one_hot_min_values) : 0),
          seed, options.rounds, options.tree_method)) {}

void ModelStrategy::Features(uint64_t index, std::vector<float>& out) const {
  space_.Features(index, out);
  if (!options_.one_hot) return;
  for (int p = 0; p < space_.num_params(); ++p) {
    const int radix = space_.radix(p);
    if (radix < options_.one_hot_min_values || radix > kMaxOneHotValues) continue;
    const int value = space_.ValueAt(index, p);
    for (int v = 0; v < radix; ++v) out.push_back(v == value ? 1.0f : 0.0f);
  }
}

ModelStrategy::~ModelStrategy() = default;

void ModelStrategy::BuildPool() {
  pool_built_ = true;
  const uint64_t size = space_.size();
  if (size <= static_cast<uint64_t>(options_.pool_limit) * 2) {
    for (uint64_t i = 0; i < size; ++i) {
      if (space_.Valid(i)) pool_.push_back(i);
    }
    std::shuffle(pool_.begin(), pool_.end(), rng_);
    if (pool_.size() > static_cast<size_t>(options_.pool_limit)) pool_.resize(options_.pool_limit);
    return;
  }
  absl::flat_hash_set<uint64_t> in_pool;
  std::uniform_int_distribution<uint64_t> pick(0, size - 1);
  for (int draw = 0;
       draw < options_.pool_limit * 8 && static_cast<int>(pool_.size()) < options_.pool_limit;
       ++draw) {
    uint64_t i = pick(rng_);
    if (space_.Valid(i) && in_pool.insert(i).second) pool_.push_back(i);
  }
}

void ModelStrategy::Refit() {
  fitted_at_ = history().size();
  if (!pool_built_) BuildPool();

  // Candidates: the pool without seen points, refilled at random, plus the neighbourhoods of the
  // best results, where the improvements usually are.
  absl::flat_hash_set<uint64_t> candidates;
  std::vector<uint64_t> kept;
  for (uint64_t i : pool_) {
    if (!Seen(i) && candidates.insert(i).second) kept.push_back(i);
  }
  pool_ = std::move(kept);
  std::vector<Result> ok;
  for (const Result& r : history()) {
    if (r.ok) ok.push_back(r);
  }
  std::sort(ok.begin(), ok.end(), [](const Result& a, const Result& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.index < b.index);
  });
  std::vector<uint64_t> local;
  for (size_t k = 0; k < ok.size() && k < 3; ++k) {
    for (int radius = 1; radius <= 2; ++radius) {
      for (uint64_t n : space_.Neighbours(ok[k].index, radius)) {
        if (!Seen(n) && candidates.insert(n).second) local.push_back(n);
      }
    }
  }
  for (const std::vector<Result>& prior : priors_) {
    for (const Result& r : prior) {
      if (!Seen(r.index) && candidates.insert(r.index).second) local.push_back(r.index);
    }
  }

  std::vector<float> x, labels;
  std::vector<unsigned> groups;
  auto features_of = [this](uint64_t index, std::vector<float>& out) { Features(index, out); };
  if (!history().empty()) AppendGroup(features_of, TrainingSet(), x, labels, groups);
  for (const std::vector<Result>& prior : priors_)
    AppendGroup(features_of, prior, x, labels, groups);
  fitted_ = !labels.empty() && model_->Fit(x, labels, groups);
  ranked_.clear();
  local_center_.reset();
  if (!fitted_) return;

  std::vector<uint64_t> all = pool_;
  all.insert(all.end(), local.begin(), local.end());
  std::vector<float> features;
  features.reserve(all.size() * space_.num_features());  // at least
  for (uint64_t i : all) Features(i, features);
  std::vector<float> scores = model_->Predict(features);
  if (scores.size() != all.size()) {
    fitted_ = false;
    return;
  }
  std::vector<int> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  // Ascending score, the best candidate last. Trees score whole regions alike, so ties are
  // common: break them at random (seeded), not by index, which would favour the last values of
  // the last parameters.
  std::shuffle(order.begin(), order.end(), rng_);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] < scores[b]; });
  ranked_.reserve(order.size());
  for (int k : order) ranked_.push_back(all[k]);
}

std::span<const Result> ModelStrategy::TrainingSet() {
  const size_t limit = static_cast<size_t>(options_.train_limit);
  if (limit == 0 || history().size() <= limit) return history();
  // The fastest ok results (limit / 2), then the rest at random. Time ties by index, so the set
  // does not depend on the order results came in.
  std::vector<Result> all(history().begin(), history().end());
  auto faster = [](const Result& a, const Result& b) {
    if (a.ok != b.ok) return a.ok;
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.index < b.index);
  };
  const size_t fastest = limit / 2;
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(fastest), all.end(),
                    faster);
  std::shuffle(all.begin() + static_cast<std::ptrdiff_t>(fastest), all.end(), rng_);
  all.resize(limit);
  training_ = std::move(all);
  return training_;
}

bool ModelStrategy::RankByModel(std::vector<uint64_t>& points) {
  if (!fitted_) return false;
  std::vector<float> features;
  features.reserve(points.size() * space_.num_features());
  for (uint64_t i : points) Features(i, features);
  std::vector<float> scores = model_->Predict(features);
  if (scores.size() != points.size()) return false;
  std::vector<int> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng_);  // random ties, as in Refit
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] < scores[b]; });
  std::vector<uint64_t> sorted;
  sorted.reserve(points.size());
  for (int k : order) sorted.push_back(points[k]);
  points = std::move(sorted);
  return true;
}

void ModelStrategy::RankLocal() {
  // The centre is the best point whose neighbourhood is not used up: the best one, unless the
  // search has exhausted it and must move on to the runners-up. With widen_at_local_optimum, a
  // best point whose single moves have all been seen offers its whole Ball(best, 2) first.
  local_.clear();
  local_center_ = best_index();
  local_wide_ = WidenAtBest();
  if (local_wide_) {
    for (uint64_t n : space_.Ball(best_index(), 2)) {
      if (!Seen(n)) local_.push_back(n);
    }
  }
  if (local_.empty()) {
    std::vector<std::pair<double, uint64_t>> ok;
    for (const Result& r : history()) {
      if (r.ok && !exhausted_centers_.contains(r.index)) ok.emplace_back(r.time_ns, r.index);
    }
    std::sort(ok.begin(), ok.end());
    for (const auto& [time, center] : ok) {
      absl::flat_hash_set<uint64_t> unique;
      if (options_.any_value_moves) {
        for (uint64_t n : space_.Ball(center, 1)) {
          if (!Seen(n) && unique.insert(n).second) local_.push_back(n);
        }
      }
      for (int radius = 1; radius <= 2; ++radius) {
        for (uint64_t n : space_.Neighbours(center, radius)) {
          if (!Seen(n) && unique.insert(n).second) local_.push_back(n);
        }
      }
      if (!local_.empty()) break;
      exhausted_centers_.insert(center);
    }
  }
  if (!RankByModel(local_)) local_.clear();
}

bool ModelStrategy::WidenAtBest() const {
  if (!options_.widen_at_local_optimum || exhausted_centers_.contains(best_index())) return false;
  const std::vector<uint64_t> neighbours = space_.Neighbours(best_index(), 1);
  return std::ranges::all_of(neighbours, [&](uint64_t n) { return Seen(n); });
}

void ModelStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  const size_t results = history().size();
  const bool ready = results >= static_cast<size_t>(options_.initial_random) || !priors_.empty();
  if (!ready) return;  // the base proposes random points
  if (!fitted_ || results >= fitted_at_ + std::max<size_t>(1, fitted_at_ * options_.refit_growth)) {
    Refit();
  }
  std::vector<uint64_t> deferred;  // too close to a point already in this batch
  while (static_cast<int>(out.size()) < max_n && !ranked_.empty()) {
    local_credit_ += options_.local_share;
    if (local_credit_ >= 1 && has_best()) {
      local_credit_ -= 1;
      if (!local_center_ || *local_center_ != best_index() || (!local_wide_ && WidenAtBest())) {
        RankLocal();
      }
      bool taken = false;
      for (int refill = 0; refill < 2 && !taken; ++refill) {
        while (!local_.empty() && !taken) {
          uint64_t next = local_.back();
          local_.pop_back();
          taken = Claim(next);
          if (taken) out.push_back(next);
        }
        if (!taken) {  // this centre is used up: move to the next best
          exhausted_centers_.insert(*local_center_);
          RankLocal();
        }
      }
      if (taken) continue;
    }
    if (Uniform(rng_) < options_.explore) {
      if (std::optional<uint64_t> random = RandomUnseen()) out.push_back(*random);
      continue;
    }
    uint64_t next = ranked_.back();
    ranked_.pop_back();
    if (Seen(next) || !space_.Valid(next)) continue;
    bool crowded = std::any_of(out.begin(), out.end(),
                               [&](uint64_t o) { return space_.Distance(o, next) < 2; });
    if (crowded) {
      deferred.push_back(next);
      continue;
    }
    if (Claim(next)) out.push_back(next);
  }
  // Put back the crowded ones (best last) for the next batch, or use them to fill this one.
  for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) ranked_.push_back(*it);
  while (static_cast<int>(out.size()) < max_n && !ranked_.empty()) {
    uint64_t next = ranked_.back();
    ranked_.pop_back();
    if (Claim(next)) out.push_back(next);
  }
}

void ModelStrategy::OnResult(const Result& result, bool mine) {
  (void)result;
  (void)mine;
}

void ModelStrategy::OnPrior(std::span<const Result> prior) {
  priors_.emplace_back(prior.begin(), prior.end());
  fitted_ = false;  // refit with the prior before the next proposal
}

}  // namespace tessel::search

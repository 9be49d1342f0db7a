// exhaustive, ils, anneal and genetic.
#include <algorithm>
#include <cmath>

#include "search/strategies.h"

namespace tessel::search {
namespace {

// Random walk of `steps` valid moves from `index`, ending on an unseen point (claimed); nullopt
// when the walk cannot end on one.
template <typename Strategy, typename Rng, typename ClaimFn>
std::optional<uint64_t> Kick(const SearchSpace& space, uint64_t index, int steps, Rng& rng,
                             ClaimFn claim) {
  uint64_t at = index;
  for (int s = 0; s + 1 < steps; ++s) {
    auto next = space.RandomNeighbour(at, rng, [](uint64_t) { return true; });
    if (!next) break;
    at = *next;
  }
  return space.RandomNeighbour(at, rng, claim);
}

}  // namespace

// ---- exhaustive ----

void ExhaustiveStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  while (static_cast<int>(out.size()) < max_n && cursor_ < space_.size()) {
    uint64_t index = cursor_++;
    if (Claim(index)) out.push_back(index);
  }
}

// ---- ils ----

void IlsStrategy::MoveTo(uint64_t index, double time) {
  current_ = index;
  current_time_ = time;
  radius_ = 1;
  queue_ = space_.Neighbours(index, 1);
  std::shuffle(queue_.begin(), queue_.end(), rng_);
}

std::optional<uint64_t> IlsStrategy::Restart() {
  ++restarts_;
  if (std::optional<uint64_t> start = PopPriorStart(); start && Claim(*start)) return start;
  if (has_best() && restarts_ % 3 != 0) {
    int steps = 2 + static_cast<int>(rng_() % 2);
    auto claim = [this](uint64_t i) { return Claim(i); };
    if (auto kicked = Kick<IlsStrategy>(space_, best_index(), steps, rng_, claim)) return kicked;
  }
  return RandomUnseen();
}

void IlsStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  while (static_cast<int>(out.size()) < max_n) {
    if (current_) {
      while (!queue_.empty() && static_cast<int>(out.size()) < max_n) {
        uint64_t next = queue_.back();
        queue_.pop_back();
        if (Claim(next)) out.push_back(next);
      }
      if (static_cast<int>(out.size()) >= max_n) return;
      if (radius_ == 1) {
        radius_ = 2;
        queue_ = space_.Neighbours(*current_, 2);
        std::shuffle(queue_.begin(), queue_.end(), rng_);
        continue;
      }
    }
    // Local optimum (or no start yet). Results still out may move us; let the base fill in.
    if (start_ || (current_ && pending() > static_cast<int>(out.size()))) return;
    std::optional<uint64_t> start = Restart();
    if (!start) return;
    start_ = *start;
    current_.reset();
    out.push_back(*start);
  }
}

void IlsStrategy::OnResult(const Result& result, bool mine) {
  (void)mine;
  if (start_ && result.index == *start_) {
    start_.reset();
    if (result.ok) MoveTo(result.index, result.time_ns);
    return;
  }
  if (!result.ok) return;
  if (!current_ ? !start_ : result.time_ns < current_time_) MoveTo(result.index, result.time_ns);
}

void IlsStrategy::OnPrior(std::span<const Result> prior) { AddPriorStarts(prior, 2); }

// ---- anneal ----

void AnnealStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  auto claim = [this](uint64_t i) { return Claim(i); };
  while (static_cast<int>(out.size()) < max_n) {
    if (TakePriorStart(out)) continue;
    if (!current_) return;  // the base proposes random points until one succeeds
    if (auto next = space_.RandomNeighbour(*current_, rng_, claim)) {
      out.push_back(*next);
      continue;
    }
    // Dead end: restart from the best point, or a random one if the best is exhausted too.
    if (*current_ != best_index()) {
      current_ = best_index();
      current_time_ = best_time();
      continue;
    }
    auto kicked = Kick<AnnealStrategy>(space_, best_index(), 3, rng_, claim);
    if (!kicked) return;
    out.push_back(*kicked);
  }
}

void AnnealStrategy::OnResult(const Result& result, bool mine) {
  if (!result.ok) return;
  if (!current_) {
    current_ = result.index;
    current_time_ = result.time_ns;
    return;
  }
  double worse = result.time_ns / current_time_ - 1.0;
  bool accept = worse < 0;
  if (!accept && mine) accept = Uniform(rng_) < std::exp(-worse / temperature_);
  if (mine) temperature_ = std::max(kMinTemperature, temperature_ * kCooling);
  if (accept) {
    current_ = result.index;
    current_time_ = result.time_ns;
    since_accept_ = 0;
  } else if (mine && ++since_accept_ >= kReheatAfter) {
    temperature_ = kInitialTemperature / 2;
    current_ = best_index();
    current_time_ = best_time();
    since_accept_ = 0;
  }
}

void AnnealStrategy::OnPrior(std::span<const Result> prior) { AddPriorStarts(prior, 1); }

// ---- genetic ----

uint64_t GeneticStrategy::Tournament() {
  std::uniform_int_distribution<size_t> pick(0, population_.size() - 1);
  size_t a = pick(rng_), b = pick(rng_);
  return population_[std::min(a, b)].second;  // population_ is sorted, best first
}

void GeneticStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  constexpr int kAttempts = 40;
  const int params = space_.num_params();
  while (static_cast<int>(out.size()) < max_n) {
    if (TakePriorStart(out)) continue;
    if (population_.size() < 4) return;  // the base fills with random points
    bool found = false;
    for (int attempt = 0; attempt < kAttempts && !found; ++attempt) {
      uint64_t a = Tournament(), b = Tournament();
      uint64_t child = a;
      for (int p = 0; p < params; ++p) {
        if (rng_() & 1) child = space_.WithValue(child, p, space_.ValueAt(b, p));
      }
      for (int p = 0; p < params; ++p) {
        const std::vector<int>& moves = space_.MovesFrom(p, space_.ValueAt(child, p));
        if (moves.empty() || Uniform(rng_) * params >= 1.0) continue;
        child = space_.WithValue(child, p, moves[rng_() % moves.size()]);
      }
      if (Claim(child)) {
        out.push_back(child);
        found = true;
      }
    }
    if (!found) {  // the population's region is used up: mutate a parent with a valid move
      auto claim = [this](uint64_t i) { return Claim(i); };
      auto child = space_.RandomNeighbour(Tournament(), rng_, claim);
      if (!child) return;
      out.push_back(*child);
    }
  }
}

void GeneticStrategy::OnResult(const Result& result, bool mine) {
  (void)mine;
  if (!result.ok) return;
  std::pair<double, uint64_t> entry{result.time_ns, result.index};
  population_.insert(std::upper_bound(population_.begin(), population_.end(), entry), entry);
  if (population_.size() > kPopulation) population_.pop_back();
}

void GeneticStrategy::OnPrior(std::span<const Result> prior) { AddPriorStarts(prior, 4); }

}  // namespace tessel::search

// ga: the standard generational genetic algorithm of Kernel Tuner (see strategies.h).
#include <algorithm>
#include <cmath>

#include "search/strategies.h"

namespace tessel::search {
namespace {

// Attempts to fill one generation with distinct valid children before the rest is random.
constexpr int kChildAttemptsPerMember = 50;
// Generations in a row that bring no unseen point before the algorithm counts as converged and
// proposes random unseen points instead (Kernel Tuner would spend its remaining iterations).
constexpr int kMaxIdleGenerations = 20;

double SampleBeta(std::mt19937_64& rng, double a, double b) {
  double x = std::gamma_distribution<double>(a, 1.0)(rng);
  double y = std::gamma_distribution<double>(b, 1.0)(rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace

StandardGaStrategy::StandardGaStrategy(const kernels::Space& space, uint64_t seed, Options options)
    : SpaceStrategy(space, seed), options_(options) {}

bool StandardGaStrategy::Resolved(uint64_t index) const {
  return TimeOf(index).has_value() || Failed(index);
}

uint64_t StandardGaStrategy::Mutate(uint64_t dna) {
  if (Uniform(rng_) * options_.mutation_chance >= 1.0) return dna;
  std::vector<uint64_t> neighbours = space_.Ball(dna, 1);  // Hamming neighbours, any value
  if (neighbours.empty()) return dna;
  return neighbours[rng_() % neighbours.size()];
}

void StandardGaStrategy::NextGeneration() {
  // Fitness: observed time, failures last; better members are likelier parents.
  std::vector<std::pair<double, uint64_t>> ranked;
  for (uint64_t dna : generation_) {
    std::optional<double> t = TimeOf(dna);
    ranked.emplace_back(t ? *t : std::numeric_limits<double>::infinity(), dna);
  }
  std::sort(ranked.begin(), ranked.end());
  const int n = static_cast<int>(ranked.size());
  auto parent_index = [&] {
    return std::min(n - 1, static_cast<int>(SampleBeta(rng_, 1.0, 2.5) * n));
  };
  std::vector<uint64_t> next;
  for (int attempt = 0; static_cast<int>(next.size()) < options_.population &&
                        attempt < kChildAttemptsPerMember * options_.population;
       ++attempt) {
    int a = parent_index(), b = parent_index();
    for (int retry = 0; b == a && n > 1 && retry < 64; ++retry) b = parent_index();
    uint64_t child1 = ranked[a].second, child2 = ranked[b].second;
    for (int p = 0; p < space_.num_params(); ++p) {  // uniform crossover
      if (rng_() & 1) {
        int v1 = space_.ValueAt(child1, p), v2 = space_.ValueAt(child2, p);
        child1 = space_.WithValue(child1, p, v2);
        child2 = space_.WithValue(child2, p, v1);
      }
    }
    for (uint64_t child : {Mutate(child1), Mutate(child2)}) {
      if (static_cast<int>(next.size()) >= options_.population) break;
      if (space_.Valid(child) && std::find(next.begin(), next.end(), child) == next.end()) {
        next.push_back(child);
      }
    }
  }
  generation_ = std::move(next);
  cursor_ = 0;
}

void StandardGaStrategy::ProposeIndices(int max_n, std::vector<uint64_t>& out) {
  if (!started_) {
    // A random valid population (unclaimed: the loop below claims members as it proposes them).
    started_ = true;
    std::uniform_int_distribution<uint64_t> pick(0, space_.size() - 1);
    for (int draw = 0; draw < 64 * options_.population &&
                       static_cast<int>(generation_.size()) < options_.population;
         ++draw) {
      uint64_t index = pick(rng_);
      if (space_.Valid(index) && !Seen(index) &&
          std::find(generation_.begin(), generation_.end(), index) == generation_.end()) {
        generation_.push_back(index);
      }
    }
    cursor_ = 0;
  }
  while (static_cast<int>(out.size()) < max_n) {
    if (idle_generations_ >= kMaxIdleGenerations) {
      idle_generations_ = 0;
      return;  // converged: the base proposes a random unseen point, then the GA goes on
    }
    // Members already measured (by anyone) are free, as repeats are in Kernel Tuner.
    while (cursor_ < generation_.size() && static_cast<int>(out.size()) < max_n) {
      uint64_t dna = generation_[cursor_];
      if (Claim(dna)) {
        out.push_back(dna);
        idle_generations_ = 0;
      }
      ++cursor_;
    }
    if (cursor_ < generation_.size()) return;
    for (uint64_t dna : generation_) {
      if (!Resolved(dna)) return;  // wait for this generation's results
    }
    if (generation_.empty()) {
      started_ = false;  // too sparse to draw a population: random points until it is not
      return;
    }
    ++idle_generations_;
    NextGeneration();
  }
}

}  // namespace tessel::search

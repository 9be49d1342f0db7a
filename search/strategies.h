// The search strategies behind MakeStrategy (random is in random.h). All are SpaceStrategy
// subclasses: seeded, batch-proposing, only valid never-repeated points, failures as data.
#ifndef TESSEL_SEARCH_STRATEGIES_H_
#define TESSEL_SEARCH_STRATEGIES_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/design.h"
#include "search/space_strategy.h"

namespace tessel::search {

// Every valid point in index order.
class ExhaustiveStrategy final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;
  std::string_view name() const override { return "exhaustive"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;

 private:
  uint64_t cursor_ = 0;
};

// Greedy iterated local search: first-improvement hill climbing over valid neighbours (single
// moves, then pairs when no single move is left), and at each local optimum a restart, either a
// random walk of a few moves from the best point found or (every third time) a random point.
class IlsStrategy final : public SpaceStrategy {
 public:
  IlsStrategy(const kernels::Space& space, uint64_t seed) : SpaceStrategy(space, seed) {}
  std::string_view name() const override { return "ils"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;
  void OnResult(const Result& result, bool mine) override;
  void OnPrior(std::span<const Result> prior) override;

 private:
  void MoveTo(uint64_t index, double time);
  std::optional<uint64_t> Restart();

  std::optional<uint64_t> current_;
  double current_time_ = 0;
  std::vector<uint64_t> queue_;  // neighbours of current_ not yet tried, next at the back
  int radius_ = 1;
  std::optional<uint64_t> start_;  // restart point awaiting its result
  int restarts_ = 0;
};

// Simulated annealing over valid neighbours: a worse neighbour is accepted with probability
// exp(-(t/t_current - 1) / T), T cooling geometrically per result and reheating after a long
// run without acceptance; from a dead end it restarts at the best point.
class AnnealStrategy final : public SpaceStrategy {
 public:
  AnnealStrategy(const kernels::Space& space, uint64_t seed) : SpaceStrategy(space, seed) {}
  std::string_view name() const override { return "anneal"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;
  void OnResult(const Result& result, bool mine) override;
  void OnPrior(std::span<const Result> prior) override;

 private:
  std::optional<uint64_t> current_;
  double current_time_ = 0;
  double temperature_ = kInitialTemperature;
  int since_accept_ = 0;

  static constexpr double kInitialTemperature = 0.15;
  static constexpr double kCooling = 0.985;
  static constexpr double kMinTemperature = 0.003;
  static constexpr int kReheatAfter = 40;
};

// Steady-state genetic algorithm: the population is the best results seen (from any source);
// each child is a uniform crossover of two tournament winners plus a mutation of each param with
// probability 1/params to a neighbouring value, repaired to a valid unseen point.
class GeneticStrategy final : public SpaceStrategy {
 public:
  GeneticStrategy(const kernels::Space& space, uint64_t seed) : SpaceStrategy(space, seed) {}
  std::string_view name() const override { return "genetic"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;
  void OnResult(const Result& result, bool mine) override;
  void OnPrior(std::span<const Result> prior) override;

 private:
  uint64_t Tournament();
  std::vector<std::pair<double, uint64_t>> population_;  // best first
  static constexpr int kPopulation = 20;
};

// ga: Kernel Tuner's genetic algorithm, kept faithful as a reference and an order-free arm.
// Generational: a random valid population; each generation ranks its members by time (failures
// last), draws parent pairs by rank (index Beta(1, 2.5) x population, two distinct parents),
// makes two children by uniform crossover, and with probability 1 / mutation_chance replaces a
// child by a random valid Hamming neighbour (one param changed to any other value). Children
// must be valid and distinct within the generation; members measured before cost nothing. It
// never looks at value order, so relabelling a parameter's values does not change it.
class StandardGaStrategy final : public SpaceStrategy {
 public:
  struct Options {
    int population = 20;
    double mutation_chance = 10;  // a child mutates with probability 1 / mutation_chance
  };
  StandardGaStrategy(const kernels::Space& space, uint64_t seed)
      : StandardGaStrategy(space, seed, {}) {}
  StandardGaStrategy(const kernels::Space& space, uint64_t seed, Options options);
  std::string_view name() const override { return "ga"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;

 private:
  bool Resolved(uint64_t index) const;
  uint64_t Mutate(uint64_t dna);
  void NextGeneration();

  Options options_;
  std::vector<uint64_t> generation_;
  size_t cursor_ = 0;  // members of generation_ handled so far
  bool started_ = false;
  int idle_generations_ = 0;
};

class CostModel;  // cost_model.h

// Cost-model search: an XGBoost ranking model (rank:pairwise) trained on the results (all of
// them up to Options::train_limit; failed points rank with the median; warm-start workloads are
// extra query groups), refitted as results arrive
// (every result at first, then every ~8% growth), proposing the unseen candidates it ranks best
// (a pool of valid points plus the neighbourhoods of the best ones), spread out within a batch,
// half of them from the best point's neighbourhood, with a share of random points for
// exploration.
class ModelStrategy final : public SpaceStrategy {
 public:
  struct Options {
    int initial_random = 10;     // random points before the first fit (without priors)
    double explore = 0.08;       // share of proposals drawn at random
    int pool_limit = 3000;       // pool of candidates ranked at each refit
    int rounds = 30;             // boosting rounds per fit
    double refit_growth = 0.08;  // refit when results grew by this fraction since the last fit
    // Most results a fit trains on (0: all). Beyond it, the fastest half of the limit and a
    // seeded random sample of the rest: a fit then costs the same however long the job, and the
    // model keeps its detail where the search is, among the fastest. 400 leaves every budget up
    // to 400 as it was; at 800 and 1600 it scored as training on all (BENCHMARKS.md "Strategy
    // overhead").
    int train_limit = 400;
    // XGBoost's tree method: "exact" enumerates every split; "hist" bins each feature (256 bins,
    // more than any param's values) and finds the same splits faster on larger histories.
    std::string tree_method = "exact";
    // Share of proposals taken from the best point's neighbourhood (single and paired moves),
    // in model order: a trust region that keeps refining the incumbent where the global ranking
    // would not look.
    double local_share = 0.5;
    // Once the best point is a certified local optimum (every one-move neighbour evaluated), take
    // the local share from the wider Ball(best, 2): points with one or two params changed to any
    // value (the one-step pairs among them), ranked by the model. Without it the local share
    // takes the best's one-step pairs, then the runners-up's neighbourhoods.
    bool widen_at_local_optimum = false;
    // The local neighbourhood also holds every single-param change to any other value
    // (Ball(centre, 1)), not only moves to the neighbouring values: value order then does not
    // decide which points the trust region can reach.
    bool any_value_moves = false;
    // Besides each param's numeric feature, one 0/1 feature per value (params with 3 to 32
    // values): trees then split on single values without relying on their order.
    bool one_hot = false;
    int one_hot_min_values = 3;  // params with fewer values keep their numeric feature only
  };
  ModelStrategy(const kernels::Space& space, uint64_t seed);
  ModelStrategy(const kernels::Space& space, uint64_t seed, Options options);
  ~ModelStrategy() override;
  std::string_view name() const override { return "model"; }

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;
  void OnResult(const Result& result, bool mine) override;
  void OnPrior(std::span<const Result> prior) override;

 private:
  void Refit();
  void BuildPool();
  // The model's features of the point at `index`, appended to `out`.
  void Features(uint64_t index, std::vector<float>& out) const;

  Options options_;
  std::unique_ptr<CostModel> model_;
  std::vector<std::vector<Result>> priors_;
  bool pool_built_ = false;
  std::vector<uint64_t> pool_;
  std::vector<uint64_t> ranked_;  // pool by predicted rank, best last
  std::vector<uint64_t> local_;   // unseen neighbours of local_center_ by predicted rank, best last
  std::optional<uint64_t> local_center_;
  absl::flat_hash_set<uint64_t> exhausted_centers_;  // neighbourhoods fully seen
  double local_credit_ = 0;                          // accumulates local_share per proposal
  void RankLocal();
  // Whether the next local ranking widens to Ball(best, 2): with widen_at_local_optimum, when
  // every one-move neighbour (Neighbours(best, 1)) of an unexhausted best has been seen.
  bool WidenAtBest() const;
  bool local_wide_ = false;  // local_ is the Ball around a certified local optimum
  // Sorts `points` by predicted score, best last; false without a model.
  bool RankByModel(std::vector<uint64_t>& points);
  // The results the next fit trains on: the history, or a subset of train_limit (training_).
  std::span<const Result> TrainingSet();
  std::vector<Result> training_;
  size_t fitted_at_ = 0;  // results in history at the last fit
  bool fitted_ = false;
};

// The default: a space-filling initial design (SpaceFillingDesign), then a bandit over model,
// ils, genetic, anneal and explore (the unseen point farthest from everything observed among a
// few random ones); its model arm widens its local neighbourhood to Ball(best, 2) at a certified
// local optimum (ModelStrategy::Options::widen_at_local_optimum). Every arm sees every result; each
// proposal slot goes to an arm drawn by Thompson sampling on a discounted record of how often its
// proposals improved the best (or landed near it), so the budget shifts to whatever keeps finding
// improvements.
class AutoStrategy final : public SpaceStrategy {
 public:
  struct Options {
    // Points of the initial design (search/design.h) before the bandit starts: a spread-out
    // sample every arm (and the model) learns from. A Latin hypercube of 16 points puts every
    // value of a parameter with up to 16 values into the sample once (tile sizes and block sizes
    // often have 8-32 values), and spreads the rest.
    int design = 16;
    // The arms, in order: model, ils, genetic, anneal, ga (StandardGaStrategy), explore (the
    // farthest of a few random unseen points), random. A "prior" arm is added when the space has
    // an analytic estimate.
    std::vector<std::string> arms = {"model", "ils", "genetic", "anneal", "explore"};
    // Share of proposals given to an arm drawn uniformly instead of by Thompson sampling.
    double floor = 0;
    // Per-result discount of the arms' records: at 0.98 old successes fade over ~50 results.
    double discount = 0.98;
    // ModelStrategy::Options::any_value_moves and one_hot for the model arm. One-hot features
    // let the model learn landscapes whose value order means nothing (chosen on the training
    // spaces and checked leave-one-GPU-out, BENCHMARKS.md "Search").
    bool any_value_moves = false;
    bool one_hot = true;
    // Params with fewer values keep their numeric feature only: a threshold split already isolates
    // the end values of 3 or 4, and one-hot features for them (the 8-param search_bench space)
    // doubled the model's cost per trial (BENCHMARKS.md "Strategy overhead").
    int one_hot_min_values = 5;
    // ModelStrategy::Options rounds, refit_growth, train_limit and tree_method for the model arm.
    int rounds = 30;
    double refit_growth = 0.08;
    int train_limit = 400;
    std::string tree_method = "exact";
  };
  AutoStrategy(const kernels::Space& space, uint64_t seed);
  AutoStrategy(const kernels::Space& space, uint64_t seed, Options options);
  // Parses "design=16,floor=0.1,discount=0.98,arms=model+ils+ga" (any subset, defaults for the
  // rest); InvalidArgument naming the option otherwise.
  static absl::StatusOr<Options> ParseOptions(std::string_view text);
  std::string_view name() const override { return "auto"; }
  std::string ProposedBy(const Config& config) const override;
  // Ranks the prior sample (BuildPriorRanking) when the space has an estimate.
  void Prepare() override;
  // Proposals each arm made so far, by arm name (for reports and tests).
  std::vector<std::pair<std::string, int>> ArmUsage() const;

 protected:
  void ProposeIndices(int max_n, std::vector<uint64_t>& out) override;
  void OnResult(const Result& result, bool mine) override;
  void OnPrior(std::span<const Result> prior) override;

 private:
  struct Arm {
    std::unique_ptr<SpaceStrategy> strategy;  // nullptr: explore (ExploreUnseen)
    std::string name;
    double wins = 0;   // discounted rewards
    double plays = 0;  // discounted results
    int proposed = 0;
  };
  int PickArm();
  // Claims the unseen valid point farthest from the observed ones among a few random draws.
  std::optional<uint64_t> ExploreUnseen();
  // With the kernel's analytic estimate (SearchSpace::has_estimate): ranks a sample of valid
  // points by it; claims the best ranked unseen one; the best `n` unseen, pairwise at least two
  // params apart, unclaimed.
  void BuildPriorRanking();
  // Adds to `ranked` (estimate, index; best last) the points where descents of the estimate from
  // its best few end (kPriorClimbs), and sorts it again.
  void ClimbEstimate(std::vector<std::pair<double, uint64_t>>& ranked) const;
  std::optional<uint64_t> NextByEstimate();
  std::vector<uint64_t> PriorDesign(int n);

  Options options_;
  DesignMetric metric_;
  // The ranks (DesignMetric::AppendRanks) of history()'s points, in order, for ExploreUnseen;
  // extended as results arrive.
  std::vector<int> history_ranks_;
  std::vector<Arm> arms_;
  absl::flat_hash_map<uint64_t, int> owner_;  // pending point -> arm
  std::vector<double> sorted_times_;          // ok times seen, ascending
  int initial_design_ = 0;  // points of the initial design (none after a warm start)
  bool design_built_ = false;
  std::vector<uint64_t> design_;  // initial design points not proposed yet, next at the back
  bool prior_built_ = false;
  std::vector<uint64_t> prior_ranked_;  // sampled valid points by estimate, best last
};

}  // namespace tessel::search

#endif  // TESSEL_SEARCH_STRATEGIES_H_

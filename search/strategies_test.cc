#include "search/strategies.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "search/space.h"
#include "search/strategy.h"

namespace tessel::search {
namespace {

// 4 x 4 x 3 x 6 = 288 points; valid when a * b <= 8 and not (c == "z" and order == "nmk").
kernels::Space SmallSpace() {
  return kernels::Space({{"a", {"1", "2", "4", "8"}, ""},
                         {"b", {"1", "2", "3", "4"}, ""},
                         {"c", {"x", "y", "z"}, ""},
                         {"order", {"mnk", "mkn", "nmk", "nkm", "kmn", "knm"}, ""}},
                        [](const Config& config) -> absl::Status {
                          if (*config.GetInt("a") * *config.GetInt("b") > 8) {
                            return absl::InvalidArgumentError("a*b > 8");
                          }
                          if (config.Get("c") == "z" && config.Get("order") == "nmk") {
                            return absl::InvalidArgumentError("z with nmk");
                          }
                          return absl::OkStatus();
                        });
}

int CountValid(const kernels::Space& space) {
  int valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) valid += space.Validate(space.Decode(i)).ok();
  return valid;
}

// A deterministic synthetic time: smooth in a and b, with c and order mattering; one config in
// twelve fails (as a compile or runtime failure would).
Observation Measure(const Config& config) {
  double a = std::log2(double(*config.GetInt("a"))), b = double(*config.GetInt("b"));
  std::string c(*config.Get("c")), order(*config.Get("order"));
  size_t h = std::hash<std::string>()(config.ToString());
  if (h % 12 == 0) return {config, false, 0};
  double t = 100 + 7 * (a - 2) * (a - 2) + 5 * (b - 3) * (b - 3) + (c == "y" ? 0 : 4) +
             (order == "kmn" ? 0 : 2 + double(order[0] - 'a') * 0.1);
  return {config, true, t};
}

class EveryStrategyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategyTest, ProposesOnlyValidNeverRepeatedConfigsUntilTheSpaceIsExhausted) {
  kernels::Space space = SmallSpace();
  auto strategy = MakeStrategy(GetParam(), space, 11);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  std::set<std::string> seen;
  for (int round = 0; round < 1000; ++round) {
    std::vector<Config> batch = (*strategy)->Propose(1 + round % 4);
    if (batch.empty()) break;
    std::vector<Observation> results;
    for (const Config& config : batch) {
      EXPECT_TRUE(space.Validate(config).ok()) << config.ToString();
      EXPECT_TRUE(seen.insert(config.ToString()).second) << "repeated " << config.ToString();
      results.push_back(Measure(config));
    }
    (*strategy)->Observe(results);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), CountValid(space));
  EXPECT_TRUE((*strategy)->Propose(3).empty());
}

TEST_P(EveryStrategyTest, SameSeedGivesTheSameSequence) {
  kernels::Space space = SmallSpace();
  auto run = [&](uint64_t seed) {
    auto strategy = *MakeStrategy(GetParam(), space, seed);
    std::string sequence;
    for (int round = 0; round < 30; ++round) {
      std::vector<Config> batch = strategy->Propose(2);
      std::vector<Observation> results;
      for (const Config& config : batch) {
        sequence += config.ToString() + ";";
        results.push_back(Measure(config));
      }
      strategy->Observe(results);
    }
    return sequence;
  };
  EXPECT_EQ(run(5), run(5));
  if (GetParam() != "exhaustive") {
    EXPECT_NE(run(5), run(6));
  }
}

TEST_P(EveryStrategyTest, NeverProposesAConfigObservedFromElsewhere) {
  kernels::Space space = SmallSpace();
  auto strategy = *MakeStrategy(GetParam(), space, 3);
  Config observed{{"a", "2"}, {"b", "3"}, {"c", "y"}, {"order", "kmn"}};
  ASSERT_TRUE(space.Validate(observed).ok());
  strategy->Observe(std::vector<Observation>{Measure(observed)});
  for (int round = 0; round < 400; ++round) {
    std::vector<Config> batch = strategy->Propose(1);
    if (batch.empty()) break;
    EXPECT_FALSE(batch[0] == observed);
    strategy->Observe(std::vector<Observation>{Measure(batch[0])});
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyTest, ::testing::ValuesIn(StrategyNames()),
                         [](const auto& info) { return info.param; });

// 8^5 = 32768 points, a tenth of them invalid; a unique optimum at a known point.
kernels::Space SyntheticSpace() {
  std::vector<kernels::Param> params;
  for (const char* name : {"p", "q", "r", "s", "t"}) {
    params.push_back({name, {"1", "2", "4", "8", "16", "32", "64", "128"}, ""});
  }
  return kernels::Space(params, [](const Config& config) -> absl::Status {
    if (*config.GetInt("p") * *config.GetInt("q") > 2048) {
      return absl::InvalidArgumentError("p*q > 2048");
    }
    return absl::OkStatus();
  });
}

double SyntheticTime(const Config& config) {
  const double optimum[] = {4, 2, 6, 1, 3};  // log2 of p..t at the optimum
  double t = 1.0;
  int i = 0;
  for (const char* name : {"p", "q", "r", "s", "t"}) {
    double d = std::log2(double(*config.GetInt(name))) - optimum[i];
    t += (0.3 + 0.1 * i) * d * d + 0.05 * std::abs(d) * i;
    ++i;
  }
  return t;
}

TEST(AutoStrategyTest, FindsTheKnownOptimumOfASyntheticSpace) {
  kernels::Space space = SyntheticSpace();
  const Config optimum{{"p", "16"}, {"q", "4"}, {"r", "64"}, {"s", "2"}, {"t", "8"}};
  ASSERT_TRUE(space.Validate(optimum).ok());
  constexpr int kBudget = 200;  // 0.6% of the space
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto strategy = *MakeStrategy("auto", space, seed);
    bool found = false;
    for (int evaluations = 0; evaluations < kBudget && !found;) {
      std::vector<Config> batch = strategy->Propose(4);
      ASSERT_FALSE(batch.empty());
      std::vector<Observation> results;
      for (const Config& config : batch) {
        found = found || config == optimum;
        results.push_back({config, true, SyntheticTime(config)});
        ++evaluations;
      }
      strategy->Observe(results);
    }
    EXPECT_TRUE(found) << "seed " << seed;
  }
}

// The searches of one workload (spaces of one identity) share auto's prior ranking: the second
// job ranks nothing again, and its proposals depend on its seed alone, not on which job ranked
// first. Without an identity every search ranks its own sample.
TEST(AutoStrategyTest, SearchesOfOneWorkloadShareThePriorRanking) {
  auto estimates = std::make_shared<int>(0);
  auto space_with = [&](const std::string& identity) {
    kernels::Space space = SyntheticSpace();
    space.set_estimate([estimates](const Config& config) -> std::optional<double> {
      ++*estimates;
      return SyntheticTime(config);
    });
    space.set_identity(identity);
    return space;
  };
  auto first_proposals = [&](const kernels::Space& space, uint64_t seed) {
    auto strategy = *MakeStrategy("auto", space, seed);
    strategy->Prepare();
    return strategy->Propose(8);
  };
  const std::string identity = "synthetic test workload";
  const kernels::Space a = space_with(identity), b = space_with(identity);
  *estimates = 0;
  const std::vector<Config> a1 = first_proposals(a, 1);
  EXPECT_GT(*estimates, 0);
  *estimates = 0;
  const std::vector<Config> a2 = first_proposals(b, 2);
  EXPECT_EQ(*estimates, 0) << "the second search of the workload ranked again";
  // In another order (seed 2's job first, on a fresh identity) the same proposals per seed.
  const kernels::Space c = space_with(identity + " again"), d = space_with(identity + " again");
  EXPECT_EQ(first_proposals(c, 2), a2);
  EXPECT_EQ(first_proposals(d, 1), a1);

  const kernels::Space e = space_with(""), f = space_with("");
  first_proposals(e, 1);
  *estimates = 0;
  first_proposals(f, 2);
  EXPECT_GT(*estimates, 0) << "spaces without an identity share nothing";
}

// A space too large for auto to rank whole (8^6 = 262,144 points, an eighth of them invalid):
// its prior sample (16,384 points) rarely holds the estimate's optimum, but that optimum is a few
// single-param changes from the sample's best, so the descent of the estimate finds it and auto
// measures it first, whatever the seed.
TEST(AutoStrategyTest, FirstMeasuresWhatTheEstimateRanksBestBeyondItsSample) {
  std::vector<kernels::Param> params;
  const std::vector<std::string> names = {"p", "q", "r", "s", "t", "u"};
  for (const std::string& name : names) {
    params.push_back({name, {"1", "2", "4", "8", "16", "32", "64", "128"}, ""});
  }
  kernels::Space space(params, [](const Config& config) -> absl::Status {
    if (*config.GetInt("p") * *config.GetInt("q") > 1024) {
      return absl::InvalidArgumentError("p*q > 1024");
    }
    return absl::OkStatus();
  });
  const double best_log2[] = {5, 3, 6, 1, 3, 2};
  space.set_estimate([&](const Config& config) -> std::optional<double> {
    double t = 1.0;
    for (size_t i = 0; i < names.size(); ++i) {
      const double d = std::log2(double(*config.GetInt(names[i]))) - best_log2[i];
      t += (0.3 + 0.1 * double(i)) * d * d;
    }
    return t;
  });
  const Config optimum{{"p", "32"}, {"q", "8"}, {"r", "64"}, {"s", "2"}, {"t", "8"}, {"u", "4"}};
  ASSERT_TRUE(space.Validate(optimum).ok());
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto strategy = *MakeStrategy("auto", space, seed);
    const std::vector<Config> first = strategy->Propose(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0], optimum) << "seed " << seed;
  }
}

// The configs `spec` proposes over `budget` evaluations of SyntheticTime, in order.
std::vector<Config> Proposals(const std::string& spec, int budget, uint64_t seed) {
  kernels::Space space = SyntheticSpace();
  auto strategy = *MakeStrategy(spec, space, seed);
  std::vector<Config> proposed;
  while (static_cast<int>(proposed.size()) < budget) {
    std::vector<Config> batch = strategy->Propose(1);
    if (batch.empty()) break;
    proposed.push_back(batch[0]);
    const std::vector<Observation> result = {{batch[0], true, SyntheticTime(batch[0])}};
    strategy->Observe(result);
  }
  return proposed;
}

TEST(ModelStrategyTest, ATrainingLimitChangesNothingUntilTheHistoryExceedsIt) {
  const std::vector<Config> all = Proposals("auto:train=0", 150, 3);
  const std::vector<Config> limited = Proposals("auto:train=60", 150, 3);
  ASSERT_EQ(all.size(), 150u);
  ASSERT_EQ(limited.size(), 150u);
  // The model arm's first fit past 60 results is the first that can differ.
  EXPECT_TRUE(std::equal(all.begin(), all.begin() + 60, limited.begin()));
  EXPECT_FALSE(std::equal(all.begin(), all.end(), limited.begin()))
      << "a limit of 60 over 150 results changed no proposal: is it applied?";
}

TEST(WarmStartTest, PriorBestConfigsAreProposedFirst) {
  kernels::Space space = SyntheticSpace();
  // A neighbouring workload whose best config is near this one's optimum.
  Config prior_best{{"p", "16"}, {"q", "4"}, {"r", "32"}, {"s", "2"}, {"t", "8"}};
  std::vector<Observation> prior = {
      {prior_best, true, 1.0},
      {Config{{"p", "1"}, {"q", "1"}, {"r", "1"}, {"s", "1"}, {"t", "1"}}, true, 9.0},
      {Config{{"p", "bogus"}}, true, 0.5}};  // not in this space: ignored
  for (const char* name : {"auto", "ils", "anneal", "genetic"}) {
    auto strategy = *MakeStrategy(name, space, 1);
    strategy->ObservePrior(prior);
    std::vector<Config> first = strategy->Propose(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0], prior_best) << name;
  }
}

TEST(SearchSpaceTest, InfersKindsAndMovesOnlyBetweenValidPoints) {
  EXPECT_EQ(InferKind({"1", "2", "4"}), ParamKind::kPowerOfTwo);
  EXPECT_EQ(InferKind({"1", "3", "4"}), ParamKind::kInteger);
  EXPECT_EQ(InferKind({"x", "y"}), ParamKind::kCategorical);
  EXPECT_EQ(InferKind({"mnk", "nmk", "kmn"}), ParamKind::kPermutation);
  kernels::Space space = SmallSpace();
  SearchSpace view(space);
  ASSERT_EQ(view.size(), 288u);
  EXPECT_EQ(view.kind(3), ParamKind::kPermutation);
  uint64_t start = *view.IndexOf(Config{{"a", "2"}, {"b", "4"}, {"c", "z"}, {"order", "mnk"}});
  std::vector<uint64_t> around = view.Neighbours(start);
  // a: 1 (4 would break a*b<=8); b: 3; c: x, y; order: mnk->nmk is invalid with z, mkn valid.
  EXPECT_EQ(around.size(), 5u);
  for (uint64_t n : around) {
    EXPECT_TRUE(view.Valid(n));
    EXPECT_EQ(view.Distance(start, n), 1);
  }
}

TEST(SearchSpaceTest, BallIsEveryValidPointOneOrTwoParamsAway) {
  kernels::Space space = SmallSpace();
  SearchSpace view(space);
  const uint64_t start =
      *view.IndexOf(Config{{"a", "1"}, {"b", "2"}, {"c", "z"}, {"order", "mnk"}});
  for (int radius = 1; radius <= 2; ++radius) {
    std::vector<uint64_t> ball = view.Ball(start, radius);
    std::set<uint64_t> got(ball.begin(), ball.end());
    EXPECT_EQ(got.size(), ball.size()) << "radius " << radius;  // no repeats
    std::set<uint64_t> want;
    for (uint64_t i = 0; i < view.size(); ++i) {
      int d = view.Distance(start, i);
      if (d >= 1 && d <= radius && view.Valid(i)) want.insert(i);
    }
    EXPECT_EQ(got, want) << "radius " << radius;
  }
  // Wider than Neighbours: a = 1 -> 4 skips a value, which single moves cannot.
  std::vector<uint64_t> near = view.Neighbours(start, 1), pairs = view.Neighbours(start, 2);
  near.insert(near.end(), pairs.begin(), pairs.end());
  const uint64_t jump = view.WithValue(start, 0, 2);
  ASSERT_TRUE(view.Valid(jump));
  EXPECT_EQ(std::count(near.begin(), near.end(), jump), 0);
}

// 8^3 points, all valid; p, q and r are quantities (moves go to the next value only).
kernels::Space CubeSpace() {
  std::vector<kernels::Param> params;
  for (const char* name : {"p", "q", "r"}) {
    params.push_back({name, {"10", "20", "30", "40", "50", "60", "70", "80"}, ""});
  }
  return kernels::Space(params, [](const Config&) { return absl::OkStatus(); });
}

// At a certified local optimum (every single move evaluated and worse), a model with
// widen_at_local_optimum proposes points two params away with values several steps off, where its
// data says the fast region is; without it, the model only tries the one-step pairs around the
// optimum.
TEST(ModelStrategyTest, WidensItsNeighbourhoodAtACertifiedLocalOptimum) {
  kernels::Space space = CubeSpace();
  SearchSpace view(space);
  const uint64_t trap = *view.IndexOf(Config{{"p", "40"}, {"q", "40"}, {"r", "40"}});
  std::vector<Observation> seen = {{view.ToConfig(trap), true, 1.0}};
  for (uint64_t n : view.Neighbours(trap, 1)) seen.push_back({view.ToConfig(n), true, 2.0});
  // Elsewhere: slow, except with p = 80, which is almost as fast as the trap.
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<uint64_t> pick(0, view.size() - 1);
  for (int k = 0; k < 40; ++k) {
    uint64_t i = pick(rng);
    if (view.Distance(i, trap) <= 1) continue;
    seen.push_back({view.ToConfig(i), true, view.ValueAt(i, 0) == 7 ? 1.2 : 3.0});
  }
  std::vector<uint64_t> one_step = view.Neighbours(trap, 2);
  auto proposals = [&](bool widen) {
    ModelStrategy::Options options;
    options.initial_random = 0;
    options.explore = 0;
    options.local_share = 1.0;  // every proposal from the local neighbourhood
    options.widen_at_local_optimum = widen;
    ModelStrategy model(space, 3, options);
    model.Observe(seen);
    std::vector<uint64_t> out;
    for (const Config& config : model.Propose(4)) out.push_back(*view.IndexOf(config));
    return out;
  };
  std::vector<uint64_t> wide = proposals(true);
  ASSERT_EQ(wide.size(), 4u);
  int jumps = 0;
  for (uint64_t i : wide) {
    EXPECT_LE(view.Distance(i, trap), 2);
    jumps += std::count(one_step.begin(), one_step.end(), i) == 0;
  }
  EXPECT_GE(jumps, 1);
  for (uint64_t i : proposals(false)) {
    EXPECT_EQ(std::count(one_step.begin(), one_step.end(), i), 1) << view.ToConfig(i).ToString();
  }
}

}  // namespace
}  // namespace tessel::search

namespace tessel::search {
namespace {

TEST(AutoStrategyTest, ParsesOptionsAndNamesTheBadOne) {
  auto options = AutoStrategy::ParseOptions("design=8,floor=0.25,discount=0.9,arms=ga+model");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->design, 8);
  EXPECT_EQ(options->floor, 0.25);
  EXPECT_EQ(options->discount, 0.9);
  EXPECT_EQ(options->arms, (std::vector<std::string>{"ga", "model"}));
  auto model = AutoStrategy::ParseOptions("rounds=15,refit=0.16,tree=hist");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->rounds, 15);
  EXPECT_EQ(model->refit_growth, 0.16);
  EXPECT_EQ(model->tree_method, "hist");
  auto limited = AutoStrategy::ParseOptions("train=64");
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->train_limit, 64);
  for (const auto& [text, named] :
       std::vector<std::pair<std::string, std::string>>{{"arms=ga+sgd", "sgd"},
                                                        {"train=-1", "train"},
                                                        {"floor=2", "floor"},
                                                        {"design", "design"},
                                                        {"speed=3", "speed"},
                                                        {"discount=x", "discount"},
                                                        {"tree=approx", "tree"},
                                                        {"rounds=0", "rounds"},
                                                        {"refit=-1", "refit"}}) {
    auto bad = AutoStrategy::ParseOptions(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(std::string(bad.status().message()).find(named), std::string::npos) << bad.status();
  }
  kernels::Space space = SyntheticSpace();
  EXPECT_FALSE(MakeStrategy("auto:arms=", space, 1).ok());
  EXPECT_TRUE(MakeStrategy("auto:arms=ga+random", space, 1).ok());
}

TEST(AutoStrategyTest, ProposesOnlyThroughTheArmsItIsGiven) {
  kernels::Space space = SyntheticSpace();
  AutoStrategy strategy(space, 3, *AutoStrategy::ParseOptions("design=4,arms=ga+random"));
  for (int i = 0; i < 60; ++i) {
    std::vector<Config> batch = strategy.Propose(1);
    ASSERT_EQ(batch.size(), 1u);
    strategy.Observe(std::vector<Observation>{{batch[0], true, SyntheticTime(batch[0])}});
  }
  std::vector<std::pair<std::string, int>> usage = strategy.ArmUsage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].first, "ga");
  EXPECT_EQ(usage[1].first, "random");
  EXPECT_EQ(usage[0].second + usage[1].second, 60 - 4) << "all but the design";
}

// Kernel Tuner's GA: every member of the second generation is a uniform crossover of two members
// of the first, perhaps with one param mutated. So per member, at most one param takes a value
// no first-generation member had.
TEST(StandardGaTest, ChildrenRecombineTheirParentsValuesWithAtMostOneMutation) {
  kernels::Space space = SyntheticSpace();
  StandardGaStrategy ga(space, 9);
  auto run_generation = [&] {
    std::vector<Config> generation;
    for (int i = 0; i < 20; ++i) {
      std::vector<Config> batch = ga.Propose(1);
      EXPECT_EQ(batch.size(), 1u);
      generation.push_back(batch[0]);
      ga.Observe(std::vector<Observation>{{batch[0], true, SyntheticTime(batch[0])}});
    }
    return generation;
  };
  std::vector<Config> first = run_generation();
  std::map<std::string, std::set<std::string>> first_values;
  for (const Config& c : first) {
    for (const auto& [name, value] : c.items()) first_values[name].insert(value);
  }
  // The second generation may contain first-generation members (free repeats, not proposed
  // again), so fewer than 20 new points come from it; read 10 and check them.
  for (int i = 0; i < 10; ++i) {
    std::vector<Config> batch = ga.Propose(1);
    ASSERT_EQ(batch.size(), 1u);
    int novel = 0;
    for (const auto& [name, value] : batch[0].items()) novel += !first_values[name].contains(value);
    EXPECT_LE(novel, 1) << batch[0].ToString();
    ga.Observe(std::vector<Observation>{{batch[0], true, SyntheticTime(batch[0])}});
  }
}

}  // namespace
}  // namespace tessel::search

#include "search/replay.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "fmt/format.h"
#include "search/space.h"
#include "tests/testing/temp_dir.h"

namespace tessel::search {
namespace {

// A 3 x 2 x 2 = 12-point product with 9 recorded configs: four that ran and every failed-entry
// form Kernel Tuner has written; three configs are absent (outside the space).
constexpr char kCache[] = R"({
  "device_name": "Test GPU", "kernel_name": "test_kernel", "problem_size": [64],
  "tune_params_keys": ["block", "unroll", "mode"],
  "tune_params": {"block": [32, 64, 128], "unroll": [0, 1], "mode": ["a", "b"]},
  "objective": "time",
  "cache": {
    "32,0,a": {"block": 32, "unroll": 0, "mode": "a", "time": 2.0, "times": [1.9, 2.1]},
    "64,0,a": {"block": 64, "unroll": 0, "mode": "a", "time": 1.5, "times": [1.4, 1.5, 1.6]},
    "128,0,a": {"block": 128, "unroll": 0, "mode": "a", "time": 1.0, "times": [0.9, 1.1]},
    "32,1,a": {"block": 32, "unroll": 1, "mode": "a", "time": 4.0},
    "64,1,a": {"block": 64, "unroll": 1, "mode": "a", "time": "CompilationFailedConfig"},
    "128,1,a": {"block": 128, "unroll": 1, "mode": "a", "time": "RuntimeFailedConfig"},
    "32,0,b": {"block": 32, "unroll": 0, "mode": "b", "time": "InvalidConfig"},
    "64,0,b": {"block": 64, "unroll": 0, "mode": "b", "time": 1e20},
    "128,0,b": {"block": 128, "unroll": 0, "mode": "b"}
  }
})";

Config Make(const char* block, const char* unroll, const char* mode) {
  return Config{{"block", block}, {"unroll", unroll}, {"mode", mode}};
}

// Replay options for `runs` runs of `strategy` with `budget` evaluations each.
ReplayOptions RunsOf(const char* strategy, int budget, int runs) {
  ReplayOptions options;
  options.strategy = strategy;
  options.budget = budget;
  options.runs = runs;
  return options;
}

std::string WriteFile(const testing::TempDir& dir, const std::string& name, const std::string& text,
                      bool gzip) {
  std::string path = dir.File(name + (gzip ? ".json.gz" : ".json"));
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
    gzclose(file);
  } else {
    std::ofstream(path) << text;
  }
  return path;
}

TEST(ReplayCacheTest, ParsesEveryFailedEntryFormAsAFailure) {
  auto cache = ReplayCache::Parse(kCache, "test");
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(cache->product_size(), 12u);
  EXPECT_EQ(cache->entries(), 9u);
  EXPECT_EQ(cache->ok_entries(), 4u);
  EXPECT_EQ(cache->best_time(), 1.0);
  EXPECT_EQ(cache->kernel_name(), "test_kernel");
  for (const Config& failed : {Make("64", "1", "a"), Make("128", "1", "a"), Make("32", "0", "b"),
                               Make("64", "0", "b"), Make("128", "0", "b")}) {
    const ReplayCache::Entry* entry = cache->Find(*cache->IndexOf(failed));
    ASSERT_NE(entry, nullptr) << failed.ToString();
    EXPECT_FALSE(entry->ok) << failed.ToString();
  }
  EXPECT_EQ(cache->Find(*cache->IndexOf(Make("32", "1", "b"))), nullptr);  // absent
  EXPECT_FALSE(cache->IndexOf(Make("16", "0", "a")).has_value());          // unknown value
}

// Found by kt_cache_fuzz: "064,0,a" with the values of "128,0,a" was counted as a second
// successful entry of one configuration (ok_entries above entries).
TEST(ReplayCacheTest, RejectsTwoEntriesOfOneConfiguration) {
  std::string text = kCache;
  const std::string extra = R"("064,0,a": {"block": 128, "unroll": 0, "mode": "a", "time": 3.0},)";
  text.insert(text.find(R"("32,0,a")"), extra);
  auto cache = ReplayCache::Parse(text, "test");
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      cache.status().message().find("'128,0,a' names the same configuration as an earlier one"),
      std::string_view::npos)
      << cache.status();
}

TEST(ReplayCacheTest, LoadsPlainAndGzippedFilesAlike) {
  for (bool gzip : {false, true}) {
    testing::TempDir dir("replay_test_");
    std::string path = WriteFile(dir, "replay_test", kCache, gzip);
    auto cache = ReplayCache::Load(path);
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ(cache->entries(), 9u);
    EXPECT_EQ(cache->ok_entries(), 4u);
  }
}

TEST(ReplayCacheTest, RejectsMissingAndMalformedFiles) {
  EXPECT_EQ(ReplayCache::Load("/nonexistent/cache.json").status().code(),
            absl::StatusCode::kNotFound);
  auto not_json = ReplayCache::Parse("{not json", "x");
  EXPECT_EQ(not_json.status().code(), absl::StatusCode::kInvalidArgument);
  auto no_cache = ReplayCache::Parse(R"({"tune_params_keys": [], "tune_params": {}})", "x");
  EXPECT_NE(std::string(no_cache.status().message()).find("cache"), std::string::npos);
  auto bad_value = ReplayCache::Parse(
      R"({"tune_params_keys": ["a"], "tune_params": {"a": [1]},
          "cache": {"2": {"a": 2, "time": 1.0}}})",
      "x");
  EXPECT_NE(std::string(bad_value.status().message()).find("not in tune_params"),
            std::string::npos);
}

TEST(ReplaySpaceTest, ConstrainedIsTheRecordedConfigsCartesianTheFullProduct) {
  auto cache = *ReplayCache::Parse(kCache, "test");
  kernels::Space constrained = MakeReplaySpace(cache, Protocol::kConstrained);
  kernels::Space cartesian = MakeReplaySpace(cache, Protocol::kCartesian);
  int valid_constrained = 0, valid_cartesian = 0;
  for (uint64_t i = 0; i < constrained.Size(); ++i) {
    valid_constrained += constrained.Validate(constrained.Decode(i)).ok();
    valid_cartesian += cartesian.Validate(cartesian.Decode(i)).ok();
  }
  EXPECT_EQ(valid_constrained, 9);  // failed entries are in the space, absent ones are not
  EXPECT_EQ(valid_cartesian, 12);
  // The kernels::Space index and the cache index agree.
  for (uint64_t i = 0; i < constrained.Size(); ++i) {
    EXPECT_EQ(cache.IndexOf(constrained.Decode(i)), i);
  }
  SearchSpace view(constrained);
  EXPECT_EQ(view.kind(0), ParamKind::kPowerOfTwo);
  EXPECT_EQ(view.kind(2), ParamKind::kCategorical);
}

TEST(ReplayEvaluatorTest, ReturnsMeansOrSeededRecordedRuns) {
  auto cache = *ReplayCache::Parse(kCache, "test");
  ReplayEvaluator exact(cache, false, 1);
  std::optional<double> true_time;
  Observation o = exact.Evaluate(Make("64", "0", "a"), &true_time);
  EXPECT_TRUE(o.ok);
  EXPECT_EQ(o.time_ns, 1.5);
  EXPECT_EQ(true_time, 1.5);
  EXPECT_FALSE(exact.Evaluate(Make("64", "1", "a"), &true_time).ok);  // failed entry
  EXPECT_FALSE(true_time.has_value());
  EXPECT_FALSE(exact.Evaluate(Make("32", "1", "b")).ok);         // absent: a failed draw
  EXPECT_EQ(exact.Evaluate(Make("32", "1", "a")).time_ns, 4.0);  // no runs: the mean

  ReplayEvaluator noisy_a(cache, true, 7), noisy_b(cache, true, 7);
  std::set<double> drawn;
  for (int i = 0; i < 50; ++i) {
    double a = noisy_a.Evaluate(Make("64", "0", "a"), &true_time).time_ns;
    EXPECT_EQ(a, noisy_b.Evaluate(Make("64", "0", "a")).time_ns);
    EXPECT_EQ(true_time, 1.5);
    drawn.insert(a);
  }
  EXPECT_EQ(drawn, (std::set<double>{1.4, 1.5, 1.6}));
}

TEST(RunReplayTest, ExhaustiveFindsTheBestAndFailuresCostEvaluations) {
  auto cache = *ReplayCache::Parse(kCache, "test");
  ReplayOptions options = RunsOf("exhaustive", 12, 2);
  options.protocol = Protocol::kCartesian;
  auto runs = RunReplay(cache, options);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  // Index order: 32,0,a (2.0); 64,0,a (1.5); 128,0,a (1.0); then the rest, none better.
  EXPECT_EQ((*runs)[0].published.size(), 12u);
  EXPECT_EQ((*runs)[0].published[0], 2.0);
  EXPECT_EQ((*runs)[0].published[1], 1.5);
  EXPECT_EQ((*runs)[0].published[2], 1.0);
  EXPECT_EQ((*runs)[0].published[11], 1.0);
  ReplaySummary at1 = Summarize(cache, *runs, 1), at3 = Summarize(cache, *runs, 3);
  EXPECT_DOUBLE_EQ(at1.score_mean, 0.5);
  EXPECT_DOUBLE_EQ(at3.score_mean, 1.0);
  EXPECT_EQ(at3.evals_to_1pct_median, 3.0);
  EXPECT_FALSE(at1.evals_to_5pct_median.has_value());

  options.protocol = Protocol::kConstrained;  // 9 recorded configs: the run ends there
  options.strategy = "random";
  runs = RunReplay(cache, options);
  EXPECT_EQ((*runs)[0].published.size(), 9u);
  EXPECT_EQ(Summarize(cache, *runs, 12).score_min, 1.0);
  options.strategy = "bogus";
  EXPECT_EQ(RunReplay(cache, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunReplayTest, ResultsDoNotDependOnThreads) {
  auto cache = *ReplayCache::Parse(kCache, "test");
  ReplayOptions options = RunsOf("auto", 6, 6);
  options.noisy = true;
  auto one = RunReplay(cache, options);
  options.threads = 3;
  auto three = RunReplay(cache, options);
  for (int r = 0; r < 6; ++r) EXPECT_EQ((*one)[r].published, (*three)[r].published);
}

// The recorded spaces of ../shared/datasets (not part of the repository): figures from SOURCES.md.
TEST(SharedSpacesTest, ParsesTheFourRecordedSpaces) {
  const std::filesystem::path dir =
      std::filesystem::path(TESSEL_SOURCE_DIR) / ".." / "shared" / "datasets" / "kerneltuner";
  if (!std::filesystem::exists(dir)) {
    GTEST_SKIP() << "no recorded spaces at " << dir << " (../shared/datasets is absent)";
  }
  struct Expected {
    const char* file;
    size_t configs, valid;
    double best_ms;
  };
  for (const Expected& e : {Expected{"gemm_RTX_3090.json.gz", 17956, 17956, 5.658},
                            Expected{"convolution_A4000.json.gz", 4362, 4201, 1.021},
                            Expected{"dedispersion_A4000.json.gz", 11130, 11130, 147.7},
                            Expected{"pnpoly_RTX_3090.json.gz", 4092, 3774, 8.714}}) {
    auto cache = ReplayCache::Load((dir / e.file).string());
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ(cache->entries(), e.configs) << e.file;
    EXPECT_EQ(cache->ok_entries(), e.valid) << e.file;
    EXPECT_NEAR(cache->best_time(), e.best_ms, 0.0006 * e.best_ms) << e.file;
    EXPECT_GE(cache->product_size(), cache->entries()) << e.file;
  }
}

}  // namespace
}  // namespace tessel::search

namespace tessel::search {
namespace {

// A 10 x 10 product, every point recorded: time = 1 + |x - 3| + 2 |y - 7| (ms), x and y the
// value positions; optimum 1.0 at x=3, y=7.
std::string GridCache() {
  std::string cache;
  for (int y = 0; y < 10; ++y) {
    for (int x = 0; x < 10; ++x) {
      double t = 1 + std::abs(x - 3) + 2 * std::abs(y - 7);
      cache += fmt::format("{}\"{},{}\": {{\"x\": {}, \"y\": {}, \"time\": {}}}",
                           cache.empty() ? "" : ",", x, y, x, y, t);
    }
  }
  return R"({"device_name": "Grid", "tune_params_keys": ["x", "y"],
    "tune_params": {"x": [0,1,2,3,4,5,6,7,8,9], "y": [0,1,2,3,4,5,6,7,8,9]},
    "cache": {)" +
         cache + "}}";
}

std::multiset<double> OkTimes(const ReplayCache& cache) {
  std::multiset<double> times;
  for (uint64_t i = 0; i < cache.product_size(); ++i) {
    if (const ReplayCache::Entry* e = cache.Find(i); e != nullptr && e->ok) times.insert(e->time);
  }
  return times;
}

TEST(ReplayVariantTest, ShuffledValuesRelabelEachParamByOnePermutation) {
  auto cache = ReplayCache::Parse(GridCache(), "grid");
  ASSERT_TRUE(cache.ok()) << cache.status();
  ReplayCache shuffled = cache->WithShuffledValues(3);
  EXPECT_EQ(OkTimes(shuffled), OkTimes(*cache));
  EXPECT_EQ(shuffled.best_time(), 1.0);
  int moved = 0;
  for (uint64_t i = 0; i < 100; ++i) moved += shuffled.Find(i)->time != cache->Find(i)->time;
  EXPECT_GT(moved, 50) << "a random relabelling moves most entries";
  // Relabelling x and y separately keeps columns and rows whole: every shuffled column holds the
  // times of one original column, every shuffled row those of one original row.
  auto line = [](const ReplayCache& c, int fixed_param, uint64_t at) {
    std::multiset<double> times;
    for (uint64_t k = 0; k < 10; ++k)
      times.insert(c.Find(fixed_param == 0 ? k * 10 + at : at * 10 + k)->time);
    return times;
  };
  for (int param = 0; param < 2; ++param) {
    std::set<std::multiset<double>> original;
    for (uint64_t at = 0; at < 10; ++at) original.insert(line(*cache, param, at));
    for (uint64_t at = 0; at < 10; ++at) {
      EXPECT_TRUE(original.contains(line(shuffled, param, at)))
          << "param " << param << " at " << at;
    }
  }
  EXPECT_EQ(cache->WithShuffledValues(3).Find(0)->time, shuffled.Find(0)->time) << "seeded";
}

TEST(ReplayVariantTest, FailedEntriesFailTheGivenShareAndRecomputeTheBest) {
  auto cache = ReplayCache::Parse(GridCache(), "grid");
  ASSERT_TRUE(cache.ok()) << cache.status();
  ReplayCache failed = cache->WithFailedEntries(0.2, 5);
  EXPECT_EQ(failed.entries(), 100u);
  EXPECT_EQ(failed.ok_entries(), 80u);
  double best = *OkTimes(failed).begin();
  EXPECT_EQ(failed.best_time(), best);
  EXPECT_EQ(OkTimes(cache->WithFailedEntries(0.2, 5)), OkTimes(failed)) << "seeded";
  int differ = 0;
  ReplayCache other = cache->WithFailedEntries(0.2, 6);
  for (uint64_t i = 0; i < 100; ++i) differ += failed.Find(i)->ok != other.Find(i)->ok;
  EXPECT_GT(differ, 0) << "another seed fails other entries";
  EXPECT_EQ(cache->WithFailedEntries(0.999, 5).ok_entries(), 1u) << "one entry always survives";
}

TEST(ReplayVariantTest, ObservationModelsKeepTheTrueTimeForScoring) {
  auto cache = ReplayCache::Parse(GridCache(), "grid");
  ASSERT_TRUE(cache.ok()) << cache.status();
  const kernels::Space space = MakeReplaySpace(*cache, Protocol::kConstrained);
  ReplayEvaluator monotone(*cache, ObservationModel{.monotone = true}, 1);
  ReplayEvaluator noisy(*cache, ObservationModel{.noise = 0.02}, 1);
  ReplayEvaluator noisy_again(*cache, ObservationModel{.noise = 0.02}, 1);
  std::vector<std::pair<double, double>> seen;  // true, monotone
  for (uint64_t i = 0; i < 100; ++i) {
    std::optional<double> truth;
    Observation m = monotone.Evaluate(space.Decode(i), &truth);
    ASSERT_TRUE(truth.has_value());
    EXPECT_EQ(m.time_ns, std::log1p(*truth / cache->best_time()));
    seen.emplace_back(*truth, m.time_ns);
    Observation n = noisy.Evaluate(space.Decode(i), &truth);
    EXPECT_EQ(n.time_ns, noisy_again.Evaluate(space.Decode(i)).time_ns) << "seeded";
    EXPECT_NE(n.time_ns, *truth);
    EXPECT_NEAR(n.time_ns / *truth, 1.0, 0.12) << "2% noise stays within 6 sigma";
  }
  std::sort(seen.begin(), seen.end());
  for (size_t k = 1; k < seen.size(); ++k) EXPECT_LE(seen[k - 1].second, seen[k].second);
  EXPECT_FALSE(ParseVariant("sorted").ok());
  EXPECT_NE(std::string(ParseVariant("sorted").status().message()).find("shuffled"),
            std::string::npos);
  for (Variant v : AllVariants()) EXPECT_EQ(*ParseVariant(VariantName(v)), v);
}

TEST(ReplaySummaryTest, ReportsTheStandardErrorOfTheMeanScore) {
  auto cache = ReplayCache::Parse(GridCache(), "grid");
  ASSERT_TRUE(cache.ok()) << cache.status();
  // Scores 1.0 and 0.5: mean 0.75, sd 0.3536, stderr 0.25.
  std::vector<ReplayRun> runs = {{{1.0}}, {{2.0}}};
  ReplaySummary s = Summarize(*cache, runs, 1);
  EXPECT_DOUBLE_EQ(s.score_mean, 0.75);
  EXPECT_NEAR(s.score_stderr, 0.25, 1e-12);
}

}  // namespace
}  // namespace tessel::search

#include "search/replay.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "search/space.h"

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

std::string WriteFile(const std::string& name, const std::string& text, bool gzip) {
  std::string path = (std::filesystem::temp_directory_path() /
                      (name + "_" + std::to_string(::getpid()) + (gzip ? ".json.gz" : ".json")))
                         .string();
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

TEST(ReplayCacheTest, LoadsPlainAndGzippedFilesAlike) {
  for (bool gzip : {false, true}) {
    std::string path = WriteFile("replay_test", kCache, gzip);
    auto cache = ReplayCache::Load(path);
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ(cache->entries(), 9u);
    EXPECT_EQ(cache->ok_entries(), 4u);
    std::filesystem::remove(path);
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
  ReplayOptions options;
  options.strategy = "exhaustive";
  options.budget = 12;
  options.runs = 2;
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
  ReplayOptions options;
  options.strategy = "auto";
  options.budget = 6;
  options.runs = 6;
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

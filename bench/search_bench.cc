// Strategy overhead: the CPU time a strategy spends in Propose + Observe over a 2,000-trial job,
// per trial (the evaluation itself is a cheap synthetic function, so this is all strategy).
//
//   search_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// The space: 8 params, 4 x 4 x 4 x 4 x 3 x 3 x 2 x 4 = 36,864 points, about 60% valid.
//
// Also BM_PriorRanking: auto's first proposal on a kernel's space at its large example shape on
// snc3, which samples valid points and ranks them by the kernel's analytic estimate before
// anything is measured (once per workload; in a short tune it is the largest cost).
#include <benchmark/benchmark.h>

#include <cmath>

#include "kernels/kernel.h"
#include "search/strategy.h"
#include "sim/target.h"

namespace tessel::search {
namespace {

kernels::Space BenchSpace() {
  std::vector<kernels::Param> params = {{"mwg", {"16", "32", "64", "128"}, ""},
                                        {"nwg", {"16", "32", "64", "128"}, ""},
                                        {"mdim", {"8", "16", "32", "64"}, ""},
                                        {"ndim", {"8", "16", "32", "64"}, ""},
                                        {"vw", {"1", "2", "4"}, ""},
                                        {"kw", {"1", "2", "4"}, ""},
                                        {"sa", {"0", "1"}, ""},
                                        {"order", {"mnk", "mkn", "nmk", "kmn"}, ""}};
  return kernels::Space(params, [](const Config& c) -> absl::Status {
    if (*c.GetInt("mwg") < *c.GetInt("mdim") * (*c.GetInt("vw") > 2 ? 2 : 1)) {
      return absl::InvalidArgumentError("mwg too small");
    }
    return absl::OkStatus();
  });
}

double Time(const Config& c) {
  double t = 10;
  t += std::pow(std::log2(double(*c.GetInt("mwg"))) - 6, 2) +
       std::pow(std::log2(double(*c.GetInt("nwg"))) - 5, 2) +
       0.5 * std::pow(std::log2(double(*c.GetInt("mdim"))) - 4, 2) +
       0.3 * std::abs(*c.GetInt("vw") - 2) + (c.Get("order") == "kmn" ? 0 : 1.5) +
       (c.Get("sa") == "1" ? 0 : 0.7) + 0.2 * *c.GetInt("kw");
  return t;
}

void BM_Job(benchmark::State& state, const char* name) {
  const kernels::Space space = BenchSpace();
  constexpr int kTrials = 2000;
  const int batch = static_cast<int>(state.range(0));
  uint64_t seed = 1;
  for (auto _ : state) {
    auto strategy = *MakeStrategy(name, space, seed++);
    int trials = 0;
    while (trials < kTrials) {
      std::vector<Config> configs = strategy->Propose(std::min(batch, kTrials - trials));
      if (configs.empty()) break;
      std::vector<Observation> results;
      for (const Config& c : configs) results.push_back({c, true, Time(c)});
      trials += static_cast<int>(configs.size());
      strategy->Observe(results);
    }
    benchmark::DoNotOptimize(trials);
  }
  // Time per trial (shown in seconds with a unit prefix).
  state.counters["per_trial"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kTrials,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_Job, auto, "auto") -> Arg(1) -> Arg(8) -> Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_numeric, "auto:features=numeric")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_onehot5, "auto:onehot_min=5")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_hist, "auto:tree=hist")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_refit16, "auto:refit=0.16")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_rounds15, "auto:rounds=15")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, auto_train_all, "auto:train=0")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, model, "model")->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, ils, "ils")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, genetic, "genetic")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Job, random, "random")->Arg(1)->Unit(benchmark::kMillisecond);

// Auto's first Propose on a kernel's real space: the prior ranking (the space has no identity
// here, so nothing is shared between iterations).
void BM_PriorRanking(benchmark::State& state, const char* kernel_name, const char* dims) {
  const kernels::Kernel& kernel = *kernels::FindKernel(kernel_name);
  const kernels::Problem problem{*Dims::Parse(dims), "bf16"};
  const sim::Target target = *sim::LoadTarget("snc3");
  const kernels::Space space = *kernel.SpaceFor(problem, target);
  uint64_t seed = 1;
  for (auto _ : state) {
    auto strategy = *MakeStrategy("auto", space, seed++);
    std::vector<Config> first = strategy->Propose(1);
    benchmark::DoNotOptimize(first);
  }
}
BENCHMARK_CAPTURE(BM_PriorRanking, matmul, "matmul", "M=4096,N=4096,K=4096")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PriorRanking, attention, "attention",
                  "batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PriorRanking, bmm, "bmm", "B=8,M=2048,N=2048,K=1024")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PriorRanking, conv2d, "conv2d",
                  "N=8,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessel::search

BENCHMARK_MAIN();

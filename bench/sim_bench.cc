// Simulator costs (BENCHMARKS.md "Simulator"): evaluations per second on random valid 4096^3 bf16
// matmul configs (snc2), Lower + Simulate per evaluation as a worker runs them; cost growth from
// 4096^3 to 16384^3; peak heap of one evaluation.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "bench/sim_configs.h"
#include "benchmark/benchmark.h"
#include "kernels/kernel.h"
#include "schema/process.h"
#include "sim/simulate.h"
#include "sim/target.h"

// Heap accounting for BM_SimulationPeakHeap (this binary only): live bytes (malloc_usable_size) and
// their high-water mark since the last reset.
namespace heap {
std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};
void* Allocate(size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  const auto bytes = static_cast<int64_t>(malloc_usable_size(p));
  const int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t old = peak.load(std::memory_order_relaxed);
  while (now > old && !peak.compare_exchange_weak(old, now, std::memory_order_relaxed)) {
  }
  return p;
}
void Free(void* p) {
  if (p == nullptr) return;
  live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace heap

namespace tessel {
namespace {

// Lower + Simulate of 64 random valid configs of `kernel` at `dims` (seeded, bench::ValidConfigs)
// on `target_name`, one per iteration, as a worker runs them; `exact` simulates every iteration.
void EvaluateRandomConfigs(benchmark::State& state, const char* kernel_name, const char* dims,
                           const char* dtype, const char* target_name, bool exact) {
  sim::Target target = *sim::LoadTarget(target_name);
  const kernels::Kernel& kernel = *kernels::FindKernel(kernel_name);
  kernels::Problem problem{*Dims::Parse(dims), dtype};
  absl::StatusOr<kernels::Space> space = kernel.SpaceFor(problem, target);
  if (!space.ok()) {
    state.SkipWithError(std::string(space.status().message()).c_str());
    return;
  }
  std::vector<Config> configs = bench::ValidConfigs(*space, 64);
  sim::SimOptions options;
  options.exact = exact;
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<sim::SimResult> r =
        kernels::Evaluate(kernel, problem, configs[i++ % configs.size()], target, options);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_EvaluateMatmul4096(benchmark::State& state) {
  EvaluateRandomConfigs(state, "matmul", "M=4096,N=4096,K=4096", "bf16", "snc2",
                        state.range(0) != 0);
}
BENCHMARK(BM_EvaluateMatmul4096)->Arg(0)->Arg(1)->ArgName("exact")->Unit(benchmark::kMicrosecond);

// The default (plain compiler) config alone: 8192 matmuls, ~25k instructions.
void BM_EvaluateMatmul4096Default(benchmark::State& state) {
  sim::Target target = *sim::LoadTarget("snc2");
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  kernels::Problem problem{Dims{{"M", 4096}, {"N", 4096}, {"K", 4096}}, "bf16"};
  Config config = kernel.Default(problem, target);
  for (auto _ : state) {
    absl::StatusOr<sim::SimResult> r = kernels::Evaluate(kernel, problem, config, target);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evals_per_s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EvaluateMatmul4096Default)->Unit(benchmark::kMicrosecond);

// Lower + Simulate of 64 random valid configs of each kernel at its large example shape (issue
// 20) on snc3: the per-kernel cost of an evaluation, fast path (exact=0) and `--exact` (exact=1).
// bench/kernel_costs.py measures the same shapes through sim_count: a shape changed here is
// changed there too.
struct LargeShape {
  const char* kernel;
  const char* dims;
  const char* dtype;
};
constexpr LargeShape kLargeShapes[] = {
    {"matmul", "M=4096,N=4096,K=4096", "bf16"},
    {"attention", "batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1", "bf16"},
    {"bmm", "B=8,M=2048,N=2048,K=1024", "bf16"},
    {"conv2d", "N=8,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1", "bf16"},
    {"softmax", "rows=8192,cols=8192", "bf16"},
    {"layernorm", "rows=8192,cols=8192", "bf16"},
    {"rmsnorm", "rows=8192,cols=8192", "bf16"},
};

void BM_EvaluateKernel(benchmark::State& state) {
  const LargeShape& shape = kLargeShapes[state.range(0)];
  state.SetLabel(shape.kernel);
  EvaluateRandomConfigs(state, shape.kernel, shape.dims, shape.dtype, "snc3", state.range(1) != 0);
}
BENCHMARK(BM_EvaluateKernel)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1}})
    ->ArgNames({"kernel", "exact"})
    ->Unit(benchmark::kMicrosecond);

// Cost growth from 4096^3 to 16384^3 (the goal: at most 4x, not the 64x of the instruction
// count) for the default config and for a blocked config (the best snc2 config of
// bench/landscape_matmul for 4096^3), fast path (exact=0) and full simulation (exact=1).
// Args: {size, blocked, exact}.
Config BlockedConfig() {
  return *Config::Parse(
      "tile_m=128,tile_n=512,tile_k=128,block_m=8,block_n=2,block_k=4,loop_order=nmk,bufs=2,"
      "hoist=0,stationary=a,evict=scalar,shards=2");
}

// The workload, config and options of one {size, blocked, exact} case.
struct GrowthCase {
  explicit GrowthCase(const benchmark::State& state)
      : size(state.range(0)), problem{Dims{{"M", size}, {"N", size}, {"K", size}}, "bf16"} {
    config = state.range(1) != 0 ? BlockedConfig() : kernel.Default(problem, target);
    options.exact = state.range(2) != 0;
  }
  absl::StatusOr<sim::SimResult> Evaluate() const {
    return kernels::Evaluate(kernel, problem, config, target, options);
  }
  int64_t size;
  sim::Target target = *sim::LoadTarget("snc2");
  const kernels::Kernel& kernel = *kernels::FindKernel("matmul");
  kernels::Problem problem;
  Config config;
  sim::SimOptions options;
};

void BM_CostGrowth(benchmark::State& state) {
  const GrowthCase c(state);
  for (auto _ : state) {
    absl::StatusOr<sim::SimResult> r = c.Evaluate();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_CostGrowth)
    ->ArgsProduct({{4096, 8192, 16384}, {0, 1}, {0, 1}})
    ->ArgNames({"size", "blocked", "exact"})
    ->Unit(benchmark::kMillisecond);

// Peak heap bytes of one evaluation (Lower + Simulate) above the live heap before it, counted by
// the replacement operator new of this binary. Args as BM_CostGrowth.
void BM_SimulationPeakHeap(benchmark::State& state) {
  const GrowthCase c(state);
  int64_t peak_bytes = 0;
  for (auto _ : state) {
    const int64_t base = heap::live.load();
    heap::peak.store(base);
    {
      absl::StatusOr<sim::SimResult> r = c.Evaluate();
      benchmark::DoNotOptimize(r);
    }
    peak_bytes = std::max(peak_bytes, heap::peak.load() - base);
  }
  state.counters["peak_heap_bytes"] = static_cast<double>(peak_bytes);
}
BENCHMARK(BM_SimulationPeakHeap)
    ->ArgsProduct({{4096, 16384}, {0, 1}, {0, 1}})
    ->ArgNames({"size", "blocked", "exact"})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Verify (the CPU run of the reduced problem and its reference) of the best attention config a
// Llama-3-8B prefill model tune found on snc3: the step that took half of a model tune's CPU
// (issue 21, "Speed"), as every round verifies its best.
void BM_VerifyAttentionModelBest(benchmark::State& state) {
  const kernels::Kernel& kernel = *kernels::FindKernel("attention");
  const kernels::Problem problem{Dims{{"batch", 1},
                                      {"heads", 32},
                                      {"seq_q", 2048},
                                      {"seq_k", 2048},
                                      {"head_dim", 128},
                                      {"causal", 1}},
                                 "bf16"};
  const Config config = *Config::Parse(
      "block_q=128,kv_tile=512,kv_block=2,q_group=2,qk_role=q,pv_role=p,qk_transpose=dma,"
      "p_transpose=tensor,softmax_src=psum,sum_engine=scalar,stats_engine=scalar,evict=scalar,"
      "kv_resident=1,bufs=1,causal_skip=1,pipeline=3,softmax_ops=tile,mask=matmul,exp_layout=st,"
      "max_dtype=input,softmax=two_pass,shards=8");
  const sim::Target target = *sim::LoadTarget("snc3");
  for (auto _ : state) {
    const absl::Status verified = kernel.Verify(problem, config, target);
    if (!verified.ok()) state.SkipWithError(std::string(verified.message()).c_str());
  }
}
BENCHMARK(BM_VerifyAttentionModelBest)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessel

// Replacement global allocation functions feeding `heap` (benchmark binary only).
void* operator new(size_t size) { return heap::Allocate(size); }
void* operator new[](size_t size) { return heap::Allocate(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  try {
    return heap::Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  try {
    return heap::Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { heap::Free(p); }
void operator delete[](void* p) noexcept { heap::Free(p); }
void operator delete(void* p, size_t) noexcept { heap::Free(p); }
void operator delete[](void* p, size_t) noexcept { heap::Free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { heap::Free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { heap::Free(p); }

// As a worker runs (tessel-worker's main does the same).
int main(int argc, char** argv) {
  tessel::KeepFreedHeapMemory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

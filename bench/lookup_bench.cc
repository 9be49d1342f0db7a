// libtessel lookup costs (BENCHMARKS.md "Runtime lookup"):
//   BM_CacheHitPrepared   in-process cache hit with a prepared key (the hot path of a program)
//   BM_CacheHitFind       in-process cache hit through Find(kernel, dims, ...) (builds the key)
//   BM_SnapshotMiss       a lookup the in-process cache has not seen: the snapshot answers
//                         (exact or nearest over 1,000 tuned shapes)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "client/lookup.h"
#include "client/snapshot.h"

namespace tessel::client {
namespace {

constexpr int kTunedShapes = 1000;

std::string SnapshotWithTunedShapes() {
  static const std::string path = [] {
    tessel::v1::ExportResponse contents;
    contents.set_snapshot_id(1);
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> pick(6, 14);  // 64 .. 16384
    for (int i = 0; i < kTunedShapes; ++i) {
      auto* b = contents.add_best();
      b->set_kernel("matmul");
      Dims dims{{"M", int64_t{1} << pick(rng)},
                {"N", int64_t{1} << pick(rng)},
                {"K", int64_t{1} << pick(rng)}};
      b->set_dims(dims.Canonical());
      b->set_dtype("bf16");
      b->set_target("snc2");
      b->set_kernel_version(1);
      b->set_target_version(1);
      b->set_config("tile_m=128,tile_n=512,tile_k=128,block_m=" + std::to_string(i % 16 + 1));
      b->set_time_ns(1000 + i);
      b->set_snapshot_id(1);
    }
    auto* d = contents.add_defaults();
    d->set_kernel("matmul");
    d->set_dtype("bf16");
    d->set_target("snc2");
    d->set_config("tile_m=128,tile_n=512,tile_k=128,block_m=1");
    std::string file = (std::filesystem::temp_directory_path() /
                        ("tessel-lookup-bench-" + std::to_string(getpid()) + ".snapshot"))
                           .string();
    if (!WriteSnapshot(contents, file).ok()) std::abort();
    return file;
  }();
  return path;
}

std::unique_ptr<Lookup> MakeLookup() {
  LookupOptions options;
  options.snapshot_path = SnapshotWithTunedShapes();
  auto lookup = Lookup::Create(options);
  if (!lookup.ok()) std::abort();
  return *std::move(lookup);
}

void BM_CacheHitPrepared(benchmark::State& state) {
  auto lookup = MakeLookup();
  const Dims dims{{"M", 4096}, {"N", 4096}, {"K", 4096}};
  if (!lookup->Find("matmul", dims).ok()) std::abort();
  const std::string key = WorkloadKey("matmul", dims, "bf16", "snc2");
  for (auto _ : state) {
    const LookupResult* r = lookup->FindPrepared(key);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_CacheHitPrepared);

void BM_CacheHitFind(benchmark::State& state) {
  auto lookup = MakeLookup();
  const Dims dims{{"M", 4096}, {"N", 4096}, {"K", 4096}};
  for (auto _ : state) {
    auto r = lookup->Find("matmul", dims);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_CacheHitFind);

void BM_SnapshotMiss(benchmark::State& state) {
  auto snapshot = Snapshot::Open(SnapshotWithTunedShapes());
  if (!snapshot.ok()) std::abort();
  std::mt19937 rng(2);
  std::uniform_int_distribution<int64_t> pick(64, 16384);
  std::vector<Dims> queries;
  for (int i = 0; i < 1024; ++i) {
    queries.push_back(Dims{{"M", pick(rng)}, {"N", pick(rng)}, {"K", pick(rng)}});
  }
  size_t i = 0;
  for (auto _ : state) {
    auto r = (*snapshot)->Find("matmul", queries[i++ % queries.size()], "bf16", "snc2");
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_SnapshotMiss);

}  // namespace
}  // namespace tessel::client

BENCHMARK_MAIN();

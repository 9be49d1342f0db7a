// libtessel lookup costs (BENCHMARKS.md "Runtime lookup"):
//   BM_CacheHitPrepared   in-process cache hit with a prepared key (the hot path of a program)
//   BM_CacheHitFind       in-process cache hit through Find(kernel, dims, ...) (builds the key)
//   BM_SnapshotMiss       a lookup the in-process cache has not seen: the snapshot answers
//                         (exact or nearest over 1,000 tuned shapes)
//   BM_Concurrent_*       lookups/s of 1 and 2 threads sharing one Lookup (see below)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/lookup.h"
#include "client/snapshot.h"
#include "schema/tessel.grpc.pb.h"
#include "tests/testing/in_process_server.h"
#include "tests/testing/service_host.h"
#include "tests/testing/temp_dir.h"

namespace tessel::client {
namespace {

constexpr int kTunedShapes = 1000;

// One tuned bf16 snc2 entry of snapshot 1.
void AddBest(tessel::v1::ExportResponse& contents, const std::string& kernel, const Dims& dims,
             const std::string& config, double time_ns) {
  auto* b = contents.add_best();
  b->set_kernel(kernel);
  b->set_dims(dims.Canonical());
  b->set_dtype("bf16");
  b->set_target("snc2");
  b->set_kernel_version(1);
  b->set_target_version(1);
  b->set_config(config);
  b->set_time_ns(time_ns);
  b->set_snapshot_id(1);
}

// Writes `contents` to a snapshot file of this process named after `name`; aborts on failure.
std::string WriteBenchSnapshot(const tessel::v1::ExportResponse& contents,
                               const std::string& name) {
  std::string file = (std::filesystem::temp_directory_path() /
                      (name + "-" + std::to_string(getpid()) + ".snapshot"))
                         .string();
  if (!WriteSnapshot(contents, file).ok()) std::abort();
  return file;
}

std::string SnapshotWithTunedShapes() {
  static const std::string path = [] {
    tessel::v1::ExportResponse contents;
    contents.set_snapshot_id(1);
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> pick(6, 14);  // 64 .. 16384
    for (int i = 0; i < kTunedShapes; ++i) {
      Dims dims{{"M", int64_t{1} << pick(rng)},
                {"N", int64_t{1} << pick(rng)},
                {"K", int64_t{1} << pick(rng)}};
      // Full configs (libtessel checks each answer against the asked workload's space); block_m
      // up to 16, so answers for smaller shapes are adapted.
      AddBest(contents, "matmul", dims,
              "tile_m=128,tile_n=512,tile_k=128,block_m=" + std::to_string(1 << (i % 5)) +
                  ",block_n=1,block_k=1,loop_order=mnk,bufs=2,hoist=0,stationary=a,"
                  "evict=vector,shards=1",
              1000 + i);
    }
    auto* d = contents.add_defaults();
    d->set_kernel("matmul");
    d->set_dtype("bf16");
    d->set_target("snc2");
    d->set_config("tile_m=128,tile_n=512,tile_k=128,block_m=1");
    return WriteBenchSnapshot(contents, "tessel-lookup-bench");
  }();
  return path;
}

std::unique_ptr<Lookup> MakeLookup(const LookupOptions& options) {
  auto lookup = Lookup::Create(options);
  if (!lookup.ok()) {
    std::fprintf(stderr, "lookup_bench: %s\n", lookup.status().ToString().c_str());
    std::abort();
  }
  return *std::move(lookup);
}

std::unique_ptr<Lookup> MakeLookup() {
  LookupOptions options;
  options.snapshot_path = SnapshotWithTunedShapes();
  return MakeLookup(options);
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

// ---- Concurrent lookups (BENCHMARKS.md "Concurrent lookups (libtessel)") ----
//
// One Lookup shared by 1 or 2 threads; items_per_second is the lookups/s of all threads together.
// Each run gets a fresh Lookup (Setup/Teardown), so an answer-cache miss stays a miss:
//   BM_Concurrent_CacheHit        Find of 64 warmed workloads (the in-process answer cache)
//   BM_Concurrent_SnapshotMiss    Find of workloads never seen, the snapshot answers nearest
//                                 (graded match over 1,000 tuned shapes)
//   BM_Concurrent_SnapshotAnswer  Find of workloads never seen, the snapshot answers exact
//   BM_Concurrent_FakeServer      Find of workloads never seen, a fake server answers after 5 ms
//   BM_Concurrent_RealServer      Find of workloads never seen, a real in-process tessel-server
//                                 (127.0.0.1, port 0) answers from its store
//   BM_Concurrent_SnapshotOnly    Snapshot::Find alone (immutable, no Lookup), one snapshot per
//                                 thread: the scaling the machine itself allows at that moment
//                                 (the cores are shared with other work)
//   BM_Concurrent_SnapshotExactOnly  the same for the exact-answer snapshot, shared by the threads
//
//   build/bench/lookup_bench --benchmark_filter=Concurrent --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true

constexpr int kWarmKeys = 64;
constexpr int64_t kExactShapesPerThread = 32768;  // rows x cols of the exact-answer snapshot
constexpr int kMaxThreads = 2;
constexpr int kFakeServerLatencyMs = 5;

// The shared Lookup of the current run, made before its threads start and dropped after.
std::unique_ptr<Lookup> g_lookup;
// Each thread takes a block of workload numbers from here, so no two lookups of a run (nor, for
// the servers, of any run) ask for the same workload.
std::atomic<int64_t> g_next_workload{0};

int64_t TakeWorkloads(int64_t count) { return g_next_workload.fetch_add(count); }

// An untuned matmul shape for workload number `n`: M and N not both powers of two, so never exact.
Dims UntunedShape(int64_t n) {
  return Dims{{"M", 65 + 2 * (n % 4000)}, {"N", 65 + 2 * ((n / 4000) % 4000)}, {"K", 3000}};
}

std::string SnapshotWithExactShapes() {
  static const std::string path = [] {
    tessel::v1::ExportResponse contents;
    contents.set_snapshot_id(1);
    for (int64_t n = 0; n < kMaxThreads * kExactShapesPerThread; ++n) {
      AddBest(contents, "rmsnorm", Dims{{"rows", 1 + n / 256}, {"cols", 1 + n % 256}},
              "rows_per_tile=128,cols_per_tile=" + std::to_string(1 + n % 8), 1000 + n);
    }
    return WriteBenchSnapshot(contents, "tessel-lookup-bench-exact");
  }();
  return path;
}

void DropLookup(const benchmark::State&) { g_lookup.reset(); }

void CheckedFind(benchmark::State& state, const std::string& kernel, const Dims& dims) {
  auto r = g_lookup->Find(kernel, dims);
  if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  benchmark::DoNotOptimize(r);
}

// Find of workloads never seen before (each thread its own block of workload numbers).
void FindUntunedShapes(benchmark::State& state) {
  int64_t n = TakeWorkloads(int64_t{1} << 30);
  for (auto _ : state) CheckedFind(state, "matmul", UntunedShape(n++));
  state.SetItemsProcessed(state.iterations());
}

// Registers `fn` as a concurrent benchmark `name`: a fresh shared Lookup per run made by `setup`,
// at 1 and 2 threads, timed by the wall clock.
benchmark::internal::Benchmark* Concurrent(const char* name, void (*fn)(benchmark::State&),
                                           void (*setup)(const benchmark::State&)) {
  return benchmark::RegisterBenchmark(name, fn)
      ->Setup(setup)
      ->Teardown(DropLookup)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
}

// The Lookup of a run that asks the server at `address` only.
void LookupFromServer(const std::string& address) {
  LookupOptions options;
  options.server_address = address;
  options.server_timeout_ms = 2000;
  g_lookup = MakeLookup(options);
}

void SetupCacheHit(const benchmark::State&) {
  LookupOptions options;
  options.snapshot_path = SnapshotWithTunedShapes();
  g_lookup = MakeLookup(options);
  for (int i = 0; i < kWarmKeys; ++i) {
    if (!g_lookup->Find("matmul", UntunedShape(i)).ok()) std::abort();
  }
}

void BM_Concurrent_CacheHit(benchmark::State& state) {
  std::vector<Dims> warm;
  for (int i = 0; i < kWarmKeys; ++i) warm.push_back(UntunedShape(i));
  size_t i = static_cast<size_t>(state.thread_index()) * 7;
  for (auto _ : state) CheckedFind(state, "matmul", warm[i++ % warm.size()]);
  state.SetItemsProcessed(state.iterations());
}
const auto* const kCacheHit =
    Concurrent("BM_Concurrent_CacheHit", BM_Concurrent_CacheHit, SetupCacheHit);

void SetupSnapshotMiss(const benchmark::State&) {
  LookupOptions options;
  options.snapshot_path = SnapshotWithTunedShapes();
  g_lookup = MakeLookup(options);
}

const auto* const kSnapshotMiss =
    Concurrent("BM_Concurrent_SnapshotMiss", FindUntunedShapes, SetupSnapshotMiss);

void SetupSnapshotAnswer(const benchmark::State&) {
  LookupOptions options;
  options.snapshot_path = SnapshotWithExactShapes();
  g_lookup = MakeLookup(options);
  g_next_workload = 0;  // the exact shapes are numbered from 0
}

void BM_Concurrent_SnapshotAnswer(benchmark::State& state) {
  int64_t n = TakeWorkloads(kExactShapesPerThread);
  for (auto _ : state) {
    CheckedFind(state, "rmsnorm", Dims{{"rows", 1 + n / 256}, {"cols", 1 + n % 256}});
    ++n;
  }
  state.SetItemsProcessed(state.iterations());
}
const auto* const kSnapshotAnswer =
    Concurrent("BM_Concurrent_SnapshotAnswer", BM_Concurrent_SnapshotAnswer, SetupSnapshotAnswer)
        -> Iterations(kExactShapesPerThread);

// A TesselService whose Lookup answers `default` after kFakeServerLatencyMs.
class SlowLookupService final : public tessel::v1::TesselService::Service {
 public:
  grpc::Status Lookup(grpc::ServerContext*, const tessel::v1::LookupRequest*,
                      tessel::v1::LookupResponse* response) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(kFakeServerLatencyMs));
    response->set_config("tile_m=128,tile_n=512,tile_k=128,block_m=1");
    response->set_match("default");
    return grpc::Status::OK;
  }
};

void SetupFakeServer(const benchmark::State&) {
  static SlowLookupService* service = new SlowLookupService();
  static testing::ServiceHost* host =
      new testing::ServiceHost({service}, testing::ServiceHost::Listen::kLoopbackTcp);
  LookupFromServer(host->address());
}

const auto* const kFakeServer =
    Concurrent("BM_Concurrent_FakeServer", FindUntunedShapes, SetupFakeServer) -> Iterations(200);

// A real tessel-server with the 1,000 tuned matmul shapes of SnapshotWithTunedShapes imported.
void SetupRealServer(const benchmark::State&) {
  static testing::TempDir* dir = new testing::TempDir("tessel-lookup-bench-");
  static testing::InProcessServer* server = [] {
    auto started = testing::InProcessServer::Start(dir->File("tessel.db"));
    if (!started.ok()) std::abort();
    auto snapshot = Snapshot::Open(SnapshotWithTunedShapes());
    if (!snapshot.ok()) std::abort();
    tessel::v1::ImportRequest request;
    for (const auto& entry : (*snapshot)->entries()) *request.add_best() = entry;
    Client client((*started)->InProcessChannel(), "bench server");
    if (!client.Import(request).ok()) std::abort();
    return started->release();
  }();
  LookupFromServer(server->address());
}

const auto* const kRealServer =
    Concurrent("BM_Concurrent_RealServer", FindUntunedShapes, SetupRealServer) -> Iterations(1000);

void BM_Concurrent_SnapshotOnly(benchmark::State& state) {
  auto snapshot = Snapshot::Open(SnapshotWithTunedShapes());
  if (!snapshot.ok()) std::abort();
  int64_t n = TakeWorkloads(int64_t{1} << 30);
  for (auto _ : state) {
    auto r = (*snapshot)->Find("matmul", UntunedShape(n++), "bf16", "snc2");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Concurrent_SnapshotOnly)->Threads(1)->Threads(2)->UseRealTime();

// Snapshot::Find alone over the exact-answer snapshot of BM_Concurrent_SnapshotAnswer, shared by
// the threads: that benchmark's ceiling on this machine (no answer cache, no counters).
void BM_Concurrent_SnapshotExactOnly(benchmark::State& state) {
  static const Snapshot* snapshot = Snapshot::Open(SnapshotWithExactShapes())->release();
  int64_t n = kExactShapesPerThread * state.thread_index();
  for (auto _ : state) {
    auto r = snapshot->Find("rmsnorm", Dims{{"rows", 1 + n / 256}, {"cols", 1 + n % 256}}, "bf16",
                            "snc2");
    benchmark::DoNotOptimize(r);
    ++n;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Concurrent_SnapshotExactOnly)
    ->Threads(1)
    ->Threads(2)
    ->Iterations(kExactShapesPerThread)
    ->UseRealTime();

}  // namespace
}  // namespace tessel::client

BENCHMARK_MAIN();

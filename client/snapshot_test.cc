#include "client/snapshot.h"

#include <sqlite3.h>

#include <atomic>
#include <thread>
#include <vector>

#include "client/lookup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema/status_macros.h"
#include "tests/testing/temp_dir.h"

namespace tessel::client {
namespace {

using ::testing::HasSubstr;

// One directory for the whole test binary, removed when it exits.
std::string TempPath(const std::string& name) {
  static tessel::testing::TempDir dir("tessel-snapshot-test-");
  return dir.File(name);
}

tessel::v1::BestConfig Best(const std::string& dims, const std::string& target,
                            const std::string& config, double time_ns, int kernel_version = 1) {
  tessel::v1::BestConfig b;
  b.set_kernel("matmul");
  b.set_dims(dims);
  b.set_dtype("bf16");
  b.set_target(target);
  b.set_kernel_version(kernel_version);
  b.set_target_version(1);
  b.set_config(config);
  b.set_time_ns(time_ns);
  b.set_job_id(7);
  b.set_snapshot_id(3);
  return b;
}

// Matmul configs, each valid for the workload it is stored under below.
constexpr char kTuned1024[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=8,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=scalar,shards=2";
constexpr char kTuned4096[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=8,block_n=2,block_k=4,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=scalar,shards=2";
constexpr char kTuned512Snc3[] =
    "tile_m=64,tile_n=256,tile_k=128,block_m=2,block_n=2,block_k=2,loop_order=mnk,bufs=2,"
    "hoist=0,stationary=a,evict=vector,shards=4";
constexpr char kDefault[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=1,block_n=1,block_k=1,loop_order=mnk,bufs=2,"
    "hoist=0,stationary=a,evict=vector,shards=1";

tessel::v1::ExportResponse Contents() {
  tessel::v1::ExportResponse c;
  c.set_snapshot_id(3);
  *c.add_best() = Best("K=1024,M=1024,N=1024", "snc2", kTuned1024, 100);
  *c.add_best() = Best("K=4096,M=4096,N=4096", "snc2", kTuned4096, 900);
  *c.add_best() = Best("K=512,M=512,N=512", "snc3", kTuned512Snc3, 10);
  *c.add_best() = Best("K=256,M=256,N=256", "snc2", kDefault, 5, /*kernel_version=*/0);
  auto* v = c.add_kernels();
  v->set_name("matmul");
  v->set_version(1);
  auto* t = c.add_targets();
  t->set_name("snc2");
  t->set_version(1);
  auto* d = c.add_defaults();
  d->set_kernel("matmul");
  d->set_dtype("bf16");
  d->set_target("snc2");
  d->set_config(kDefault);
  return c;
}

Dims D(const std::string& text) { return *Dims::Parse(text); }

TEST(SnapshotTest, EachMatchLevelIsReturnedWhereItApplies) {
  const std::string path = TempPath("levels.snapshot");
  ASSERT_TRUE(WriteSnapshot(Contents(), path).ok());
  auto snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ((*snapshot)->snapshot_id(), 3);
  EXPECT_EQ((*snapshot)->size(), 4u);

  auto exact = (*snapshot)->Find("matmul", D("N=1024,M=1024,K=1024"), "bf16", "snc2");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->match, "exact");
  EXPECT_EQ(exact->config, kTuned1024);
  EXPECT_FALSE(exact->adapted);
  EXPECT_EQ(exact->job_id, 7);
  EXPECT_FALSE(exact->stale);

  // 3000^3 is 3 x log2(4096/3000) = 1.35 from 4096^3 and 4.65 from 1024^3.
  auto nearest = (*snapshot)->Find("matmul", D("M=3000,N=3000,K=3000"), "bf16", "snc2");
  ASSERT_TRUE(nearest.ok());
  EXPECT_EQ(nearest->match, "nearest");
  EXPECT_EQ(nearest->tuned_dims, "K=4096,M=4096,N=4096");

  auto other = (*snapshot)->Find("matmul", D("M=512,N=512,K=512"), "bf16", "snc2");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->match, "nearest") << "same-target neighbours beat another target";

  // The only snc3 entry is 512^3, however far; for 8^3 (one tile each way) its blocking factors
  // and shards shrink to what exists.
  auto only_neighbour = (*snapshot)->Find("matmul", D("M=8,N=8,K=8"), "bf16", "snc3");
  ASSERT_TRUE(only_neighbour.ok()) << only_neighbour.status();
  EXPECT_EQ(only_neighbour->match, "nearest");
  EXPECT_EQ(only_neighbour->tuned_dims, "K=512,M=512,N=512");
  EXPECT_TRUE(only_neighbour->adapted);
  EXPECT_EQ(only_neighbour->adaptation, "block_m 2->1, block_n 2->1, block_k 2->1, shards 4->1");

  auto fp32 = (*snapshot)->Find("matmul", D("M=8,N=8,K=8"), "fp32", "snc2");
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(fp32->match, "default") << "no fp32 entries: the kernel's default for the workload";

  for (const auto& [kernel, target] : std::vector<std::pair<std::string, std::string>>{
           {"conv9d", "snc2"}, {"matmul", "snc2-nope"}}) {
    auto unknown = (*snapshot)->Find(kernel, D("M=1,N=1,K=1"), "bf16", target);
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << kernel << target;
  }
}

// Tuned on snc3 with 4 shards, asked on snc2 (2 cores): served as other_target, with the shards
// capped, never as the invalid config itself (issue 15).
TEST(SnapshotTest, AnotherTargetsConfigIsAdaptedToTheAskedTarget) {
  tessel::v1::ExportResponse c = Contents();
  c.clear_best();
  *c.add_best() = Best("K=512,M=512,N=512", "snc3", kTuned512Snc3, 10);
  const std::string path = TempPath("other-target.snapshot");
  ASSERT_TRUE(WriteSnapshot(c, path).ok());
  auto snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok());
  auto cross = (*snapshot)->Find("matmul", D("M=512,N=512,K=512"), "bf16", "snc2");
  ASSERT_TRUE(cross.ok()) << cross.status();
  EXPECT_EQ(cross->match, "other_target");
  EXPECT_EQ(cross->tuned_target, "snc3");
  EXPECT_TRUE(cross->adapted);
  EXPECT_EQ(cross->adaptation, "shards 4->2");
  EXPECT_THAT(cross->config, HasSubstr("shards=2"));
}

// A stored config no rule can make valid (an unknown param) is never served: the next graded
// candidate is, and with none left the kernel's default for the asked workload.
TEST(SnapshotTest, AnUnusableConfigGivesWayToTheNextCandidateThenTheDefault) {
  tessel::v1::ExportResponse c = Contents();
  c.clear_best();
  *c.add_best() = Best("K=1024,M=1024,N=1024", "snc2", "tile_m=7,garbage=yes", 1);
  *c.add_best() = Best("K=4096,M=4096,N=4096", "snc2", kTuned4096, 900);
  const std::string path = TempPath("unusable.snapshot");
  ASSERT_TRUE(WriteSnapshot(c, path).ok());
  auto snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok());
  auto exact = (*snapshot)->Find("matmul", D("M=1024,N=1024,K=1024"), "bf16", "snc2");
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->match, "nearest") << "the garbage exact entry is skipped";
  EXPECT_EQ(exact->tuned_dims, "K=4096,M=4096,N=4096");
  auto snc3 = (*snapshot)->Find("matmul", D("M=1024,N=1024,K=1024"), "bf16", "snc3");
  ASSERT_TRUE(snc3.ok()) << snc3.status();
  EXPECT_EQ(snc3->match, "default") << "the garbage entry is not served as other_target either";
  c.mutable_best()->RemoveLast();
  ASSERT_TRUE(WriteSnapshot(c, path).ok());
  snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok());
  auto fallback = (*snapshot)->Find("matmul", D("M=1024,N=1024,K=1024"), "bf16", "snc2");
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->match, "default");
  EXPECT_EQ(fallback->config, kDefault);
}

TEST(SnapshotTest, DefaultIsUsedWhenNothingOfTheKernelIsTunedThere) {
  tessel::v1::ExportResponse c = Contents();
  c.clear_best();
  const std::string path = TempPath("defaults.snapshot");
  ASSERT_TRUE(WriteSnapshot(c, path).ok());
  auto snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok());
  auto found = (*snapshot)->Find("matmul", D("M=8,N=8,K=8"), "bf16", "snc2");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->match, "default");
  EXPECT_EQ(found->config, kDefault);
  EXPECT_EQ(found->time_ns, 0);
}

TEST(SnapshotTest, ResultsOfAnOlderKernelVersionAreStale) {
  const std::string path = TempPath("stale.snapshot");
  ASSERT_TRUE(WriteSnapshot(Contents(), path).ok());
  auto snapshot = Snapshot::Open(path);
  ASSERT_TRUE(snapshot.ok());
  auto found = (*snapshot)->Find("matmul", D("M=256,N=256,K=256"), "bf16", "snc2");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->match, "exact");
  EXPECT_TRUE(found->stale);
}

TEST(SnapshotTest, WritingTheSameContentsTwiceGivesTheSameEntries) {
  const std::string a = TempPath("a.snapshot"), b = TempPath("b.snapshot");
  tessel::v1::ExportResponse shuffled = Contents();
  shuffled.mutable_best()->SwapElements(0, 3);
  ASSERT_TRUE(WriteSnapshot(Contents(), a).ok());
  ASSERT_TRUE(WriteSnapshot(shuffled, b).ok());
  auto sa = Snapshot::Open(a);
  auto sb = Snapshot::Open(b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  ASSERT_EQ((*sa)->entries().size(), (*sb)->entries().size());
  for (size_t i = 0; i < (*sa)->entries().size(); ++i) {
    EXPECT_EQ((*sa)->entries()[i].SerializeAsString(), (*sb)->entries()[i].SerializeAsString());
  }
}

TEST(SnapshotTest, AFileOfAnotherFormatVersionIsRejectedWithBothVersions) {
  const std::string path = TempPath("future.snapshot");
  ASSERT_TRUE(WriteSnapshot(Contents(), path).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'format_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto snapshot = Snapshot::Open(path);
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(snapshot.status().message()), HasSubstr("format version 99"));
  EXPECT_EQ(Snapshot::Open(TempPath("absent.snapshot")).status().code(),
            absl::StatusCode::kNotFound);
}

// A Lookup over a snapshot of Contents() written to `name`.
absl::StatusOr<std::unique_ptr<Lookup>> LookupOverContents(const std::string& name) {
  const std::string path = TempPath(name);
  TESSEL_RETURN_IF_ERROR(WriteSnapshot(Contents(), path));
  LookupOptions options;
  options.snapshot_path = path;
  return Lookup::Create(options);
}

TEST(LookupTest, ASnapshotAloneAnswersWithNoServerAndCachesInProcess) {
  auto lookup = LookupOverContents("lookup.snapshot");
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  const Dims dims = D("M=1024,N=1024,K=1024");
  EXPECT_EQ((*lookup)->FindPrepared(WorkloadKey("matmul", dims, "bf16", "snc2")), nullptr);
  auto first = (*lookup)->Find("matmul", dims);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->source, "snapshot");
  auto second = (*lookup)->Find("matmul", dims);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->config, first->config);
  const LookupResult* prepared =
      (*lookup)->FindPrepared(WorkloadKey("matmul", dims, "bf16", "snc2"));
  ASSERT_NE(prepared, nullptr);
  EXPECT_EQ(prepared->config, kTuned1024);
  EXPECT_EQ((*lookup)->counters().cache_hits, 1);
  EXPECT_EQ((*lookup)->counters().snapshot_answers, 1);
}

// Threads sharing one Lookup, asking for the same and for different workloads at once, all get
// the snapshot's answers, and every lookup is counted exactly once.
TEST(LookupTest, ConcurrentLookupsAllAnswerAndAreEachCountedOnce) {
  auto lookup = LookupOverContents("concurrent.snapshot");
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  constexpr int kThreads = 4, kLookups = 2000, kShapes = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLookups; ++i) {
        const int64_t m = 1100 + (i * (t + 1)) % kShapes;  // untuned: the snapshot says nearest
        auto r = (*lookup)->Find("matmul", Dims{{"M", m}, {"N", 1024}, {"K", 1024}});
        if (!r.ok() || r->match != "nearest" || r->config != kTuned1024) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const Lookup::Counters counters = (*lookup)->counters();
  EXPECT_EQ(counters.cache_hits + counters.snapshot_answers, kThreads * kLookups);
  // A workload may be answered by the snapshot more than once only when threads raced on its
  // first lookup; never fewer times than there are workloads.
  EXPECT_GE(counters.snapshot_answers, kShapes);
  EXPECT_LE(counters.snapshot_answers, kShapes * kThreads);
}

TEST(LookupTest, CreateNeedsASource) {
  auto lookup = Lookup::Create(LookupOptions{});
  EXPECT_EQ(lookup.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessel::client

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

tessel::v1::ExportResponse Contents() {
  tessel::v1::ExportResponse c;
  c.set_snapshot_id(3);
  *c.add_best() = Best("K=1024,M=1024,N=1024", "snc2", "tile_m=128,block_m=4", 100);
  *c.add_best() = Best("K=4096,M=4096,N=4096", "snc2", "tile_m=128,block_m=16", 900);
  *c.add_best() = Best("K=512,M=512,N=512", "snc3", "tile_m=64,block_m=2", 10);
  *c.add_best() = Best("K=256,M=256,N=256", "snc2", "tile_m=32", 5, /*kernel_version=*/0);
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
  d->set_config("tile_m=128,block_m=1");
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
  EXPECT_EQ(exact->config, "tile_m=128,block_m=4");
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
  auto cross = (*snapshot)->Find("matmul", D("M=512,N=512,K=512"), "bf16", "snc2-nope");
  ASSERT_TRUE(cross.ok()) << cross.status();
  EXPECT_EQ(cross->match, "other_target");
  EXPECT_EQ(cross->tuned_target, "snc3");

  auto fallback = (*snapshot)->Find("matmul", D("M=8,N=8,K=8"), "fp32", "snc2");
  EXPECT_FALSE(fallback.ok()) << "no fp32 entries and no fp32 default";
  auto only_neighbour = (*snapshot)->Find("matmul", D("M=8,N=8,K=8"), "bf16", "snc3");
  ASSERT_TRUE(only_neighbour.ok());
  EXPECT_EQ(only_neighbour->match, "nearest") << "512^3 is the only snc3 entry, however far";
  EXPECT_EQ(only_neighbour->tuned_dims, "K=512,M=512,N=512");

  auto unknown = (*snapshot)->Find("conv9d", D("M=1"), "bf16", "snc2");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
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
  EXPECT_EQ(found->config, "tile_m=128,block_m=1");
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
  EXPECT_EQ(prepared->config, "tile_m=128,block_m=4");
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
        if (!r.ok() || r->match != "nearest" || r->config != "tile_m=128,block_m=4") ++wrong;
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

// libtessel against a real tessel-server (in this process, on 127.0.0.1 port 0): read-through,
// the local cache file when the server goes away, snapshot pinning and tuning on miss.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "client/client.h"
#include "client/lookup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/start_server.h"
#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

v1::BestConfig Best(const std::string& dims, const std::string& config, double time_ns) {
  v1::BestConfig b;
  b.set_kernel("matmul");
  b.set_dims(dims);
  b.set_dtype("bf16");
  b.set_target("snc2");
  b.set_kernel_version(1);
  b.set_target_version(1);
  b.set_config(config);
  b.set_time_ns(time_ns);
  return b;
}

constexpr char kConfigA[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=4,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=vector,shards=1";
// Valid for 1024^3 and 2048^3, not for 512^3 (block_n=2 is more than its one N tile).
constexpr char kConfigB[] =
    "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=4,loop_order=mnk,bufs=2,"
    "hoist=1,stationary=a,evict=scalar,shards=2";

class LookupIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }

  void StartServer() {
    ASSERT_NO_FATAL_FAILURE(testing::StartInProcessServer(tmp_.File("server.db"), &server_));
    address_ = server_->address();
    client_ = std::make_unique<client::Client>(server_->InProcessChannel(), "test server");
  }

  // Publishes one config for 1024^3 and returns its snapshot id.
  int64_t Publish(const std::string& config, double time_ns) {
    v1::ImportRequest request;
    *request.add_best() = Best("K=1024,M=1024,N=1024", config, time_ns);
    auto imported = client_->Import(request);
    EXPECT_TRUE(imported.ok()) << imported.status();
    EXPECT_EQ(imported->imported(), 1);
    v1::LookupRequest lookup;
    lookup.mutable_workload()->set_kernel("matmul");
    for (auto [n, v] : {std::pair{"M", 1024}, {"N", 1024}, {"K", 1024}}) {
      auto* d = lookup.mutable_workload()->add_dims();
      d->set_name(n);
      d->set_value(v);
    }
    auto found = client_->Lookup(lookup);
    EXPECT_TRUE(found.ok());
    return found->snapshot_id();
  }

  testing::TempDir tmp_{"tessel-lookup-it-"};
  std::string dir_ = tmp_.path();
  std::string address_;
  std::unique_ptr<testing::InProcessServer> server_;
  std::unique_ptr<client::Client> client_;
  const Dims gemm_ = *Dims::Parse("M=1024,N=1024,K=1024");
};

TEST_F(LookupIntegrationTest, ACachedAnswerIsStillServedAfterTheServerGoesDown) {
  Publish(kConfigA, 1e5);
  client::LookupOptions options;
  options.server_address = address_;
  options.cache_path = dir_ + "/lookup-cache.db";
  options.server_timeout_ms = 300;
  {
    auto lookup = client::Lookup::Create(options);
    ASSERT_TRUE(lookup.ok());
    auto found = (*lookup)->Find("matmul", gemm_);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->source, "server");
    EXPECT_EQ(found->match, "exact");
    EXPECT_EQ(found->config, kConfigA);
  }
  client_.reset();
  server_->server().Shutdown();
  server_.reset();
  // A new process (fresh in-memory cache) with the server gone: the local cache file answers.
  auto lookup = client::Lookup::Create(options);
  ASSERT_TRUE(lookup.ok());
  const auto start = std::chrono::steady_clock::now();
  auto found = (*lookup)->Find("matmul", gemm_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->source, "local-cache");
  EXPECT_EQ(found->config, kConfigA);
  EXPECT_EQ(found->match, "exact");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ((*lookup)->counters().server_failures, 1);
  // A workload it never saw is an error that names the server, not a hang or a made-up answer.
  auto unseen = (*lookup)->Find("matmul", *Dims::Parse("M=64,N=64,K=64"));
  EXPECT_FALSE(unseen.ok());
}

TEST_F(LookupIntegrationTest, ProcessesPinnedToOneSnapshotAgreeWhileNewerResultsArePublished) {
  const int64_t pinned = Publish(kConfigA, 1e5);
  client::LookupOptions options;
  options.server_address = address_;
  options.pin_snapshot = pinned;
  auto first = client::Lookup::Create(options);
  ASSERT_TRUE(first.ok());
  auto before = (*first)->Find("matmul", gemm_);
  ASSERT_TRUE(before.ok());

  const int64_t newer = Publish(kConfigB, 8e4);
  ASSERT_GT(newer, pinned);
  auto second = client::Lookup::Create(options);  // another "process", started later
  ASSERT_TRUE(second.ok());
  auto after = (*second)->Find("matmul", gemm_);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->config, before->config);
  EXPECT_EQ(after->config, kConfigA);
  EXPECT_EQ(after->snapshot_id, pinned);

  options.pin_snapshot = 0;
  auto unpinned = client::Lookup::Create(options);
  ASSERT_TRUE(unpinned.ok());
  auto latest = (*unpinned)->Find("matmul", gemm_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->config, kConfigB);
}

TEST_F(LookupIntegrationTest, AMissAsksTheServerToTuneItOnce) {
  client::LookupOptions options;
  options.server_address = address_;
  options.tune_misses = true;
  options.tune_budget = 4;
  auto lookup = client::Lookup::Create(options);
  ASSERT_TRUE(lookup.ok());
  auto found = (*lookup)->Find("matmul", *Dims::Parse("M=256,N=256,K=256"));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->match, "default");
  (void)(*lookup)->Find("matmul", *Dims::Parse("M=256,N=256,K=256"));  // cached: no new request
  EXPECT_EQ((*lookup)->counters().tune_requests, 1);
  std::vector<v1::Job> jobs;
  for (int i = 0; i < 200 && jobs.empty(); ++i) {
    auto listed = client_->ListJobs();
    ASSERT_TRUE(listed.ok());
    jobs = *listed;
    if (jobs.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].budget(), 4);
  EXPECT_EQ(jobs[0].workload().kernel(), "matmul");
}

TEST_F(LookupIntegrationTest, ImportingTheSameRecordsTwiceChangesNothing) {
  v1::ImportRequest request;
  *request.add_best() = Best("K=1024,M=1024,N=1024", kConfigA, 1e5);
  *request.add_best() = Best("K=2048,M=2048,N=2048", kConfigB, 7e5);
  auto once = client_->Import(request);
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once->imported(), 2);
  auto export_once = client_->Export(v1::ExportRequest());
  auto twice = client_->Import(request);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->imported(), 0);
  EXPECT_EQ(twice->unchanged(), 2);
  auto export_twice = client_->Export(v1::ExportRequest());
  ASSERT_TRUE(export_once.ok() && export_twice.ok());
  EXPECT_EQ(export_once->SerializeAsString(), export_twice->SerializeAsString());
}

TEST_F(LookupIntegrationTest, ImportRefusesInvalidRecordsWithTheirReasonsAndImportsTheRest) {
  v1::ImportRequest request;
  *request.add_best() = Best("K=1024,M=1024,N=1024", kConfigA, 100);
  request.mutable_best(0)->set_kernel("nope");
  *request.add_best() = Best("K=1024,M=1024,N=1024", "tile_m=7,garbage=yes", 1e6);
  *request.add_best() = Best("K=1024,M=1024,N=1024", kConfigA, 0.5);  // beats the roofline
  *request.add_best() = Best("K=512,M=512,N=512", kConfigB, 1e6);     // blocks beyond 512^3
  *request.add_best() = Best("K=2048,M=2048,N=2048", kConfigB, 7e5);  // valid
  auto imported = client_->Import(request);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->imported(), 1);
  ASSERT_EQ(imported->refused_size(), 4);
  const char* const reasons[] = {"unknown kernel 'nope'", "parameter tile_m=7 is not one of",
                                 "time_ns of 0.5 ns beats the workload's roofline",
                                 "block_n=2 is redundant"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(imported->refused(i).index(), i);
    EXPECT_THAT(imported->refused(i).reason(), HasSubstr(reasons[i])) << i;
  }
  auto exported = client_->Export(v1::ExportRequest());
  ASSERT_TRUE(exported.ok());
  ASSERT_EQ(exported->best_size(), 1);
  EXPECT_EQ(exported->best(0).dims(), "K=2048,M=2048,N=2048");
}

}  // namespace
}  // namespace tessel

// Issue 14, finding 4, end to end: for every kernel, on every target and dtype it supports, a
// snapshot exported by a real tessel-server answers a lookup of an untuned shape (the kernel's
// example problem) with match=default and a config the kernel accepts for that shape. Before the
// fix the server built its example problems by setting every dim to 1024, which attention and
// conv2d reject, so their exports had no default and the lookup answered NotFound.
#include <string>

#include "client/client.h"
#include "client/lookup.h"
#include "client/snapshot.h"
#include "gtest/gtest.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "sim/api.h"
#include "sim/program.h"
#include "tests/testing/start_server.h"
#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

class SnapshotDefaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartInProcessServer(tmp_.File("server.db"), &server_));
    client::Client client(server_->InProcessChannel(), "test server");
    auto exported = client.Export(v1::ExportRequest());
    ASSERT_TRUE(exported.ok()) << exported.status();
    ASSERT_TRUE(client::WriteSnapshot(*exported, snapshot_path_).ok());
  }

  testing::TempDir tmp_{"tessel-snapshot-default-"};
  std::string snapshot_path_ = tmp_.File("best.snapshot");
  std::unique_ptr<testing::InProcessServer> server_;
};

TEST_F(SnapshotDefaultTest, EveryKernelAnswersAnUntunedShapeWithADefaultItAccepts) {
  auto snapshot = client::Snapshot::Open(snapshot_path_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  client::LookupOptions options;
  options.snapshot_path = snapshot_path_;
  auto lookup = client::Lookup::Create(options);
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  int checked = 0;
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    int kernel_checked = 0;
    for (const std::string& target_name : sim::TargetNames()) {
      auto target = kernels::ResolveTarget(target_name);
      ASSERT_TRUE(target.ok()) << target.status();
      if (target->systolic) continue;
      for (const std::string& dtype : kernel->dtypes()) {
        kernels::Problem problem = kernel->Example();
        problem.dtype = dtype;
        if (!kernel->ValidateProblem(problem, *target).ok()) continue;  // e.g. fp8 on snc2
        SCOPED_TRACE(std::string(kernel->name()) + " " + dtype + " on " + target_name);
        auto found = (*snapshot)->Find(kernel->name(), problem.dims, dtype, target_name);
        ASSERT_TRUE(found.ok()) << found.status();
        EXPECT_EQ(found->match, "default");
        auto config = Config::Parse(found->config);
        ASSERT_TRUE(config.ok()) << config.status();
        auto space = kernel->SpaceFor(problem, *target);
        ASSERT_TRUE(space.ok()) << space.status();
        EXPECT_TRUE(space->Validate(*config).ok()) << space->Validate(*config);
        EXPECT_TRUE(kernel->Lower(problem, *config, *target).ok());
        // libtessel over the same snapshot answers the same.
        auto answered = (*lookup)->Find(kernel->name(), problem.dims, dtype, target_name);
        ASSERT_TRUE(answered.ok()) << answered.status();
        EXPECT_EQ(answered->match, "default");
        EXPECT_EQ(answered->config, found->config);
        ++kernel_checked;
      }
    }
    EXPECT_GT(kernel_checked, 0) << kernel->name() << " has no default in the export";
    checked += kernel_checked;
  }
  EXPECT_GE(checked, static_cast<int>(kernels::AllKernels().size()));
}

}  // namespace
}  // namespace tessel

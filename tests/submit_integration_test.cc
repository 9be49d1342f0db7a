// SubmitJobRequest's effort and early stops through a real tessel-server (in this process, on
// 127.0.0.1 port 0) and a TCP gRPC channel: each field is checked at the RPC boundary with
// INVALID_ARGUMENT naming it, and an effort preset fills what the request left 0.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/stopping.h"
#include "tests/testing/start_server.h"
#include "tests/testing/temp_dir.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

class SubmitIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartInProcessServer(tmp_.File("server.db"), &server_));
    auto client = client::Client::Connect(server_->address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  static v1::SubmitJobRequest Request() {
    v1::SubmitJobRequest request;
    v1::Workload* w = request.mutable_workload();
    w->set_kernel("matmul");
    w->set_dtype("bf16");
    w->set_target("snc2");
    for (auto [name, value] : {std::pair{"M", 512}, {"N", 512}, {"K", 512}}) {
      v1::Dim* dim = w->add_dims();
      dim->set_name(name);
      dim->set_value(value);
    }
    request.set_budget(8);
    return request;
  }

  testing::TempDir tmp_{"tessel-submit-it-"};
  std::unique_ptr<testing::InProcessServer> server_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(SubmitIntegrationTest, EachBadEffortOrEarlyStopFieldIsInvalidArgumentNamingIt) {
  struct Case {
    void (*mutate)(v1::SubmitJobRequest&);
    const char* message;
  };
  const Case cases[] = {
      {[](v1::SubmitJobRequest& r) { r.set_effort("thorough"); },
       "effort must be one of quick, default, full (or empty), got 'thorough'"},
      {[](v1::SubmitJobRequest& r) { r.set_time_limit_s(-30); },
       "time_limit_s must be >= 0 (0 = none), got -30"},
      {[](v1::SubmitJobRequest& r) { r.set_stop_after_no_improvement(-2); },
       "stop_after_no_improvement must be >= 0 (0 = none), got -2"},
      {[](v1::SubmitJobRequest& r) { r.set_target_time_ns(-1.5); },
       "target_time_ns must be >= 0 (0 = none), got -1.5"},
      {[](v1::SubmitJobRequest& r) { r.set_budget(0); }, "budget must be between 1 and"},
  };
  for (const Case& c : cases) {
    v1::SubmitJobRequest request = Request();
    c.mutate(request);
    auto job = client_->SubmitJob(request);
    ASSERT_FALSE(job.ok()) << c.message;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << job.status();
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.message));
  }
  auto jobs = client_->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty()) << "a rejected submission stores no job";
}

TEST_F(SubmitIntegrationTest, AnEffortWithoutABudgetRunsThePresetsBudgetAndStop) {
  const search::EffortPreset* full = search::FindEffortPreset("full");
  ASSERT_NE(full, nullptr);
  v1::SubmitJobRequest request = Request();
  request.set_budget(0);
  request.set_effort("full");
  request.set_time_limit_s(600);
  auto job = client_->SubmitJob(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->effort(), "full");
  EXPECT_EQ(job->budget(), full->budget);
  EXPECT_EQ(job->stop_after_no_improvement(), full->no_improvement);
  EXPECT_EQ(job->time_limit_s(), 600);
  auto cancelled = client_->CancelJob(job->id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->stopped_by(), "cancelled");
}

}  // namespace
}  // namespace tessel

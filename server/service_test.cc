// The services' own request checks, over gRPC: the status code and message a client sees when a
// request's shape is wrong, before the scheduler is asked.
#include "server/service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "schema/tessel.grpc.pb.h"
#include "server/server.h"
#include "tests/testing/temp_dir.h"

namespace tessel::server {
namespace {

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = "";  // in-process channel only
    options.db_path = tmp_.File("t.db");
    auto server = Server::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = v1::TesselService::NewStub(server_->InProcessChannel());
    worker_ = v1::WorkerService::NewStub(server_->InProcessChannel());
  }

  // Expects `status` to be INVALID_ARGUMENT with exactly `message`.
  static void ExpectInvalid(const grpc::Status& status, const std::string& message) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_EQ(status.error_message(), message);
  }

  testing::TempDir tmp_{"tessel-service-test-"};
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::TesselService::Stub> client_;
  std::unique_ptr<v1::WorkerService::Stub> worker_;
};

TEST_F(ServiceTest, JobIdsMustBePositive) {
  for (int64_t job_id : {0, -3}) {
    grpc::ClientContext get_context, cancel_context, trials_context;
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    v1::CancelJobRequest cancel;
    cancel.set_job_id(job_id);
    v1::ListTrialsRequest trials;
    trials.set_job_id(job_id);
    v1::Job job;
    v1::ListTrialsResponse listed;
    ExpectInvalid(client_->GetJob(&get_context, get, &job), "job_id must be positive");
    ExpectInvalid(client_->CancelJob(&cancel_context, cancel, &job), "job_id must be positive");
    ExpectInvalid(client_->ListTrials(&trials_context, trials, &listed), "job_id must be positive");
  }
}

TEST_F(ServiceTest, AnUnknownJobIsNotFound) {
  grpc::ClientContext context;
  v1::GetJobRequest request;
  request.set_job_id(999);
  v1::Job job;
  EXPECT_EQ(client_->GetJob(&context, request, &job).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ListJobsLimitIsBetweenZeroAndTenThousand) {
  for (int limit : {-1, 10'001}) {
    grpc::ClientContext context;
    v1::ListJobsRequest request;
    request.set_limit(limit);
    v1::ListJobsResponse response;
    ExpectInvalid(client_->ListJobs(&context, request, &response),
                  "limit must be between 0 and 10000");
  }
  grpc::ClientContext context;
  v1::ListJobsResponse response;
  EXPECT_TRUE(client_->ListJobs(&context, v1::ListJobsRequest(), &response).ok());
  EXPECT_EQ(response.jobs_size(), 0);
}

TEST_F(ServiceTest, AReportNeedsAWorkerId) {
  grpc::ClientContext context;
  v1::ReportResponse response;
  ExpectInvalid(worker_->Report(&context, v1::ReportRequest(), &response), "worker_id is required");
}

// Issue 17: trials and jobs page with tokens, so no answer grows past gRPC's message limit.
TEST_F(ServiceTest, TrialsAndJobsPageWithTokens) {
  v1::SubmitJobRequest submit;
  v1::Workload* w = submit.mutable_workload();
  w->set_kernel("matmul");
  for (const char* dim : {"M", "N", "K"}) {
    v1::Dim* d = w->add_dims();
    d->set_name(dim);
    d->set_value(512);
  }
  submit.set_strategy("random");
  submit.set_budget(23);
  submit.set_new_job(true);  // three jobs of one workload
  v1::Job job;
  for (int i = 0; i < 3; ++i) {  // three jobs for the job pages
    grpc::ClientContext context;
    submit.set_seed(i);
    ASSERT_TRUE(client_->SubmitJob(&context, submit, &job).ok());
  }
  grpc::ClientContext register_context;
  v1::RegisterRequest reg;
  reg.set_name("pager");
  reg.set_slots(8);
  v1::RegisterResponse worker;
  ASSERT_TRUE(worker_->Register(&register_context, reg, &worker).ok());
  // A worker that finds every config invalid: results charged to the budget, no times to check.
  int reported = 0;
  for (int round = 0; round < 200 && reported < 23; ++round) {
    grpc::ClientContext lease_context;
    v1::LeaseRequest lease;
    lease.set_worker_id(worker.worker_id());
    lease.set_max_trials(8);
    v1::LeaseResponse leased;
    ASSERT_TRUE(worker_->Lease(&lease_context, lease, &leased).ok());
    v1::ReportRequest report;
    report.set_worker_id(worker.worker_id());
    for (const v1::TrialSpec& spec : leased.trials()) {
      v1::TrialResult* r = report.add_results();
      r->set_trial_id(spec.trial_id());
      r->set_status(v1::TRIAL_INVALID_CONFIG);
      r->set_message("refused by the test");
      r->set_config(spec.config());
      reported += spec.job_id() == job.id();
    }
    grpc::ClientContext report_context;
    v1::ReportResponse ack;
    ASSERT_TRUE(worker_->Report(&report_context, report, &ack).ok());
  }
  ASSERT_GE(reported, 23);

  std::vector<int64_t> ids;
  v1::ListTrialsRequest request;
  request.set_job_id(job.id());
  request.set_page_size(7);
  int pages = 0;
  do {
    grpc::ClientContext context;
    v1::ListTrialsResponse page;
    ASSERT_TRUE(client_->ListTrials(&context, request, &page).ok());
    EXPECT_LE(page.trials_size(), 7);
    for (const v1::TrialResult& t : page.trials()) ids.push_back(t.trial_id());
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 100);
  EXPECT_GE(ids.size(), 23u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());  // no trial twice
  EXPECT_EQ(pages, int(ids.size()) / 7 + 1);
  {
    grpc::ClientContext context;
    v1::ListTrialsResponse all;
    request.clear_page_token();
    request.set_page_size(0);
    ASSERT_TRUE(client_->ListTrials(&context, request, &all).ok());
    EXPECT_EQ(all.trials_size(), int(ids.size()));
    EXPECT_TRUE(all.next_page_token().empty());
  }
  for (const char* token : {"x12", "t", "t-4", "j5", "t99999999999999999999999"}) {
    grpc::ClientContext context;
    v1::ListTrialsResponse page;
    request.set_page_token(token);
    ExpectInvalid(client_->ListTrials(&context, request, &page),
                  "page_token is not one this server issued");
  }

  std::vector<int64_t> job_ids;
  v1::ListJobsRequest jobs;
  jobs.set_limit(2);
  do {
    grpc::ClientContext context;
    v1::ListJobsResponse page;
    ASSERT_TRUE(client_->ListJobs(&context, jobs, &page).ok());
    for (const v1::Job& j : page.jobs()) job_ids.push_back(j.id());
    jobs.set_page_token(page.next_page_token());
  } while (!jobs.page_token().empty() && job_ids.size() < 10);
  EXPECT_EQ(job_ids, (std::vector<int64_t>{job.id(), job.id() - 1, job.id() - 2}));
}

TEST_F(ServiceTest, ListsKernelsAndTargets) {
  grpc::ClientContext kernels_context, targets_context;
  v1::ListKernelsResponse kernels;
  v1::ListTargetsResponse targets;
  ASSERT_TRUE(client_->ListKernels(&kernels_context, v1::ListKernelsRequest(), &kernels).ok());
  ASSERT_TRUE(client_->ListTargets(&targets_context, v1::ListTargetsRequest(), &targets).ok());
  bool matmul = false, snc2 = false;
  for (const auto& kernel : kernels.kernels()) matmul |= kernel.name() == "matmul";
  for (const auto& target : targets.targets()) snc2 |= target.name() == "snc2";
  EXPECT_TRUE(matmul);
  EXPECT_TRUE(snc2);
}

}  // namespace
}  // namespace tessel::server

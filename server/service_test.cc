// The services' own request checks, over gRPC: the status code and message a client sees when a
// request's shape is wrong, before the scheduler is asked.
#include "server/service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "schema/tessel.grpc.pb.h"
#include "server/client_quota.h"
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

// Issue 17: each client (peer address; in-process callers are one client) may hold a bounded
// number of open watches and of queued or running jobs; beyond, RESOURCE_EXHAUSTED naming the
// limit, and a slot is free again once a watch ends or a job is cancelled.
TEST(ClientQuotaTest, WatchesAndActiveJobsPerClientAreBounded) {
  testing::TempDir tmp("tessel-quota-test-");
  ServerOptions options;
  options.listen = "";
  options.db_path = tmp.File("t.db");
  options.client_limits = {.max_watch_streams = 2, .max_active_jobs = 2};
  auto server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = v1::TesselService::NewStub((*server)->InProcessChannel());

  auto submit = [&](int64_t m, v1::Job* job) {
    v1::SubmitJobRequest request;
    request.mutable_workload()->set_kernel("matmul");
    for (auto [name, value] : {std::pair{"M", m}, {"N", int64_t{256}}, {"K", int64_t{256}}}) {
      v1::Dim* dim = request.mutable_workload()->add_dims();
      dim->set_name(name);
      dim->set_value(value);
    }
    request.set_strategy("random");
    request.set_budget(4);
    grpc::ClientContext context;
    return client->SubmitJob(&context, request, job);
  };
  v1::Job first, second, third;
  ASSERT_TRUE(submit(128, &first).ok());
  ASSERT_TRUE(submit(256, &second).ok());
  grpc::Status refused = submit(384, &third);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(), "client in-process has 2 queued or running jobs (limit 2)");
  // A cancelled job frees its place.
  {
    v1::CancelJobRequest cancel;
    cancel.set_job_id(first.id());
    v1::Job cancelled;
    grpc::ClientContext context;
    ASSERT_TRUE(client->CancelJob(&context, cancel, &cancelled).ok());
  }
  EXPECT_TRUE(submit(384, &third).ok());

  // Watches: two open (no worker: the jobs stay queued), the third refused, and once one ends
  // another may open.
  auto open_watch = [&](grpc::ClientContext& context) {
    v1::WatchJobRequest request;
    request.set_job_id(second.id());
    auto reader = client->WatchJob(&context, request);
    v1::JobEvent event;
    bool got = reader->Read(&event);
    return std::make_pair(std::move(reader), got);
  };
  grpc::ClientContext c1, c2, c3;
  auto w1 = open_watch(c1);
  auto w2 = open_watch(c2);
  ASSERT_TRUE(w1.second && w2.second);
  auto w3 = open_watch(c3);
  EXPECT_FALSE(w3.second);
  grpc::Status third_watch = w3.first->Finish();
  EXPECT_EQ(third_watch.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(third_watch.error_message(), "client in-process has 2 WatchJob streams open (limit 2)");
  c1.TryCancel();
  v1::JobEvent drain;
  while (w1.first->Read(&drain)) {
  }
  (void)w1.first->Finish();
  bool reopened = false;
  for (int attempt = 0; attempt < 100 && !reopened; ++attempt) {  // OnDone runs after Finish
    grpc::ClientContext c4;
    auto w4 = open_watch(c4);
    reopened = w4.second;
    c4.TryCancel();
    while (w4.first->Read(&drain)) {
    }
    (void)w4.first->Finish();
    if (!reopened) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(reopened);
  c2.TryCancel();
  while (w2.first->Read(&drain)) {
  }
  (void)w2.first->Finish();
}

TEST(ClientQuotaTest, AClientIsItsPeerAddressWithoutThePort) {
  EXPECT_EQ(ClientOfPeer("ipv4:10.0.0.7:51234"), "ipv4:10.0.0.7");
  EXPECT_EQ(ClientOfPeer("ipv6:[::1]:51234"), "ipv6:[::1]");
  EXPECT_EQ(ClientOfPeer("unknown"), "in-process");
  EXPECT_EQ(ClientOfPeer("unix:/tmp/s"), "unix:/tmp/s");
}

}  // namespace
}  // namespace tessel::server

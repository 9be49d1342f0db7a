// The services' own request checks, over gRPC: the status code and message a client sees when a
// request's shape is wrong, before the scheduler is asked.
#include "server/service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

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

#include "client/client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/service_host.h"

namespace tessel::client {
namespace {

using tessel::v1::Job;
using tessel::v1::JobEvent;

// Answers GetJob (NotFound for id != 1) and WatchJob (running, then completed).
class FakeTesselService final : public tessel::v1::TesselService::Service {
 public:
  grpc::Status GetJob(grpc::ServerContext*, const tessel::v1::GetJobRequest* request,
                      Job* job) override {
    if (request->job_id() != 1) return {grpc::StatusCode::NOT_FOUND, "no job 7"};
    job->set_id(1);
    job->set_state(tessel::v1::JOB_RUNNING);
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext*, const tessel::v1::WatchJobRequest* request,
                        grpc::ServerWriter<JobEvent>* writer) override {
    JobEvent event;
    event.mutable_job()->set_id(request->job_id());
    event.mutable_job()->set_state(tessel::v1::JOB_RUNNING);
    writer->Write(event);
    event.mutable_job()->set_state(tessel::v1::JOB_COMPLETED);
    event.mutable_job()->mutable_best()->set_time_ns(42);
    writer->Write(event);
    return grpc::Status::OK;
  }
};

class ClientTest : public ::testing::Test {
 protected:
  FakeTesselService service_;
  tessel::testing::ServiceHost host_{{&service_}};
  std::unique_ptr<Client> client_ =
      std::make_unique<Client>(host_.InProcessChannel(), "in-process fake");
};

TEST_F(ClientTest, GetJobReturnsTheServersJob) {
  absl::StatusOr<Job> job = client_->GetJob(1);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), tessel::v1::JOB_RUNNING);
}

TEST_F(ClientTest, ServerErrorsKeepTheirCodeAndMessage) {
  absl::StatusOr<Job> job = client_->GetJob(7);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "no job 7");
}

TEST_F(ClientTest, WatchJobDeliversEveryEventAndReturnsTheFinalJob) {
  std::vector<tessel::v1::JobState> states;
  absl::StatusOr<Job> job = client_->WatchJob(5, [&](const JobEvent& event) {
    states.push_back(event.job().state());
    return true;
  });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), tessel::v1::JOB_COMPLETED);
  EXPECT_EQ(job->best().time_ns(), 42);
  EXPECT_EQ(states, (std::vector<tessel::v1::JobState>{tessel::v1::JOB_RUNNING,
                                                       tessel::v1::JOB_COMPLETED}));
}

TEST_F(ClientTest, WatchJobStopsWhenTheCallbackSaysSo) {
  int events = 0;
  absl::StatusOr<Job> job = client_->WatchJob(5, [&](const JobEvent&) {
    ++events;
    return false;
  });
  EXPECT_EQ(events, 1);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(ClientTest, UnimplementedCallsSayWhatIsMissing) {
  absl::StatusOr<std::vector<Job>> jobs = client_->ListJobs();
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(jobs.status().message().find("ListJobs"), absl::string_view::npos);
}

TEST(ClientConnectTest, UnreachableServerFailsFastWithAnActionableMessage) {
  ClientOptions options;
  options.connect_timeout_ms = 2000;
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect("127.0.0.1:9", options);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("cannot reach tessel server at 127.0.0.1:9"),
            absl::string_view::npos)
      << client.status();
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(ClientConnectTest, UnaryCallOnDeadChannelIsUnavailableNotAHang) {
  auto channel = grpc::CreateChannel("127.0.0.1:9", grpc::InsecureChannelCredentials());
  ClientOptions options;
  options.call_timeout_ms = 2000;
  Client client(channel, "127.0.0.1:9", options);
  absl::StatusOr<Job> job = client.GetJob(1);
  ASSERT_FALSE(job.ok());
  EXPECT_TRUE(job.status().code() == absl::StatusCode::kUnavailable ||
              job.status().code() == absl::StatusCode::kDeadlineExceeded)
      << job.status();
  EXPECT_NE(job.status().message().find("127.0.0.1:9"), absl::string_view::npos) << job.status();
}

TEST(FromGrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "GetJob", "x").ok());
}

TEST(JobStateNameTest, UsesTheCliContractNames) {
  EXPECT_EQ(JobStateName(tessel::v1::JOB_QUEUED), "queued");
  EXPECT_EQ(JobStateName(tessel::v1::JOB_COMPLETED), "completed");
  EXPECT_TRUE(IsFinalState(tessel::v1::JOB_FAILED));
  EXPECT_FALSE(IsFinalState(tessel::v1::JOB_RUNNING));
}

}  // namespace
}  // namespace tessel::client

#include "worker/agent.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/matmul.h"
#include "kernels/workload.h"
#include "schema/tessel.grpc.pb.h"
#include "schema/vocab.h"
#include "sim/api.h"
#include "sim/target.h"
#include "tests/testing/service_host.h"

namespace tessel::worker {
namespace {

namespace v1 = tessel::v1;

constexpr const char* kShape = "M=256,N=256,K=256";

v1::Workload MatmulWorkload(std::string_view shape = kShape) {
  v1::Workload workload;
  workload.set_kernel("matmul");
  const Dims dims = *Dims::Parse(shape);
  for (const auto& [name, value] : dims.items()) {
    v1::Dim* dim = workload.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  workload.set_dtype("bf16");
  workload.set_target("snc2");
  return workload;
}

kernels::Problem MatmulProblem(std::string_view shape = kShape) {
  return {*Dims::Parse(shape), "bf16"};
}

std::string DefaultConfig(std::string_view shape = kShape) {
  const kernels::Kernel* kernel = kernels::FindKernel("matmul");
  return kernel->Default(MatmulProblem(shape), *sim::LoadTarget("snc2")).ToString();
}

v1::TrialSpec Spec(std::string config, double noise_sigma = 0, uint64_t seed = 1) {
  v1::TrialSpec spec;
  spec.set_trial_id(11);
  spec.set_job_id(1);
  *spec.mutable_workload() = MatmulWorkload();
  spec.set_config(std::move(config));
  spec.mutable_protocol()->set_warmup(1);
  spec.mutable_protocol()->set_repeats(5);
  spec.mutable_protocol()->set_verify("never");
  spec.mutable_protocol()->set_noise_sigma(noise_sigma);
  spec.set_seed(seed);
  return spec;
}

TEST(MeasureTrialTest, DefaultConfigIsOkWithTheMedianOfItsSamples) {
  v1::TrialResult result = MeasureTrial(Spec(DefaultConfig(), 0.05, 3));
  ASSERT_EQ(result.status(), v1::TRIAL_OK) << result.message();
  ASSERT_EQ(result.samples_ns_size(), 5);  // warmup discarded
  std::vector<double> samples(result.samples_ns().begin(), result.samples_ns().end());
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(result.time_ns(), samples[2]);
  EXPECT_GT(result.time_ns(), 0);
  EXPECT_EQ(result.trial_id(), 11);
  EXPECT_EQ(result.config(), DefaultConfig());
  EXPECT_FALSE(result.bound().empty());
  EXPECT_NE(result.stats_json().find("busy_frac"), std::string::npos);
  EXPECT_FALSE(result.verified());
}

// Issue 17: a trial the server cancels stops in its simulation, not after it.
TEST(MeasureTrialTest, ACancelledTrialStopsWithinItsSimulation) {
  v1::TrialSpec spec = Spec(DefaultConfig());
  std::atomic<bool> cancel{true};
  const v1::TrialResult stopped = MeasureTrial(spec, &cancel);
  EXPECT_EQ(stopped.status(), v1::TRIAL_CANCELLED) << stopped.message();
  cancel = false;
  EXPECT_EQ(MeasureTrial(spec, &cancel).status(), v1::TRIAL_OK);

  // A slow trial (an attention program of 185 ms on an idle machine: four heads on one core, too
  // few for the compact lowering to compress their loop, in small tiles; lowering, which is bounded
  // by the workload limits but not interruptible, then simulation) whose flag is raised a quarter
  // of the way in ends CANCELLED: without the simulator's check it would end OK. Timed warm (a
  // worker's second evaluation reuses the first's program buffers, sim::RecycleProgram).
  v1::TrialSpec slow = spec;
  v1::Workload* w = slow.mutable_workload();
  w->Clear();
  w->set_kernel("attention");
  w->set_target("snc2");
  w->set_dtype("bf16");
  for (auto [name, value] : {std::pair{"batch", 1},
                             {"heads", 4},
                             {"seq_q", 16384},
                             {"seq_k", 16384},
                             {"head_dim", 128},
                             {"causal", 2}}) {
    v1::Dim* dim = w->add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  const kernels::ResolvedWorkload resolved = *kernels::Resolve(*w);
  Config small_tiles = resolved.kernel->Default(resolved.problem, resolved.target);
  small_tiles.Set("block_q", "64");  // eight times the default's steps
  small_tiles.Set("kv_tile", "128");
  slow.set_config(small_tiles.ToString());
  slow.mutable_protocol()->set_warmup(0);
  slow.mutable_protocol()->set_repeats(1);
  ASSERT_EQ(MeasureTrial(slow).status(), v1::TRIAL_OK);  // warms this thread's buffers
  auto start = std::chrono::steady_clock::now();
  const v1::TrialResult full = MeasureTrial(slow);
  const auto full_time = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(full.status(), v1::TRIAL_OK) << full.message();
  ASSERT_GT(full_time, std::chrono::milliseconds(100))
      << "not slow enough to cancel midway: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(full_time).count() << " ms";
  cancel = false;
  start = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(full_time / 4);
    cancel = true;
  });
  const v1::TrialResult cut = MeasureTrial(slow, &cancel);
  const auto cut_time = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_EQ(cut.status(), v1::TRIAL_CANCELLED) << cut.message();
  EXPECT_LT(cut_time, full_time * 3 / 2);
}

TEST(MeasureTrialTest, VerifyAlwaysMarksACorrectConfigVerified) {
  v1::TrialSpec spec = Spec(DefaultConfig());
  spec.mutable_protocol()->set_verify("always");
  v1::TrialResult result = MeasureTrial(spec);
  ASSERT_EQ(result.status(), v1::TRIAL_OK) << result.message();
  EXPECT_TRUE(result.verified());
}

// Issue 4: a deliberately broken lowering (the matmul drops its ragged last K tile) is caught by
// verification and reported as WRONG_ANSWER, with the kernel's message.
TEST(MeasureTrialTest, ABrokenLoweringIsAWrongAnswer) {
  constexpr const char* kRagged = "M=300,N=600,K=1000";  // K = 7 full tiles + 104
  v1::TrialSpec spec = Spec(DefaultConfig(kRagged));
  *spec.mutable_workload() = MatmulWorkload(kRagged);
  spec.mutable_protocol()->set_verify("always");
  ASSERT_EQ(MeasureTrial(spec).status(), v1::TRIAL_OK);
  kernels::SetMatmulFaultForTesting(kernels::MatmulFault::kDropRaggedKTile);
  const v1::TrialResult result = MeasureTrial(spec);
  kernels::SetMatmulFaultForTesting(kernels::MatmulFault::kNone);
  EXPECT_EQ(result.status(), v1::TRIAL_WRONG_ANSWER) << result.message();
  EXPECT_NE(result.message().find("wrong answer"), std::string::npos) << result.message();
  EXPECT_FALSE(result.verified());
}

TEST(MeasureTrialTest, ConfigTheConstraintsRejectIsInvalidWithTheReason) {
  const kernels::Kernel* kernel = kernels::FindKernel("matmul");
  sim::Target target = *sim::LoadTarget("snc2");
  absl::StatusOr<kernels::Space> space = kernel->SpaceFor(MatmulProblem(), target);
  ASSERT_TRUE(space.ok()) << space.status();
  std::optional<Config> invalid;
  std::string reason;
  for (uint64_t i = 0; i < space->Size() && !invalid; ++i) {
    Config config = space->Decode(i);
    if (absl::Status valid = space->Validate(config); !valid.ok()) {
      invalid = config;
      reason = std::string(valid.message());
    }
  }
  if (!invalid) GTEST_SKIP() << "every config of this space is valid";
  v1::TrialResult result = MeasureTrial(Spec(invalid->ToString()));
  EXPECT_EQ(result.status(), v1::TRIAL_INVALID_CONFIG);
  EXPECT_FALSE(result.message().empty());
  EXPECT_EQ(result.time_ns(), 0);
}

// Measures `spec` and expects `status` with a message that contains each of `words`.
void ExpectFailureMentioning(const v1::TrialSpec& spec, v1::TrialStatus status,
                             std::initializer_list<std::string_view> words) {
  v1::TrialResult result = MeasureTrial(spec);
  EXPECT_EQ(result.status(), status);
  for (std::string_view word : words) {
    EXPECT_NE(result.message().find(word), std::string::npos) << result.message();
  }
}

TEST(MeasureTrialTest, MalformedConfigIsInvalidConfig) {
  ExpectFailureMentioning(Spec("tile_m"), v1::TRIAL_INVALID_CONFIG, {"tile_m"});
}

TEST(MeasureTrialTest, UnknownKernelIsARuntimeErrorNamingTheKernel) {
  v1::TrialSpec spec = Spec(DefaultConfig());
  spec.mutable_workload()->set_kernel("nosuchkernel");
  ExpectFailureMentioning(spec, v1::TRIAL_RUNTIME_ERROR, {"nosuchkernel", "matmul"});
}

TEST(MeasureTrialTest, UnknownTargetIsARuntimeError) {
  v1::TrialSpec spec = Spec(DefaultConfig());
  spec.mutable_workload()->set_target("nosuchtarget");
  ExpectFailureMentioning(spec, v1::TRIAL_RUNTIME_ERROR, {"nosuchtarget"});
}

TEST(MeasureTrialTest, WithoutNoiseEverySampleIsTheSame) {
  v1::TrialResult a = MeasureTrial(Spec(DefaultConfig(), 0, 1));
  v1::TrialResult b = MeasureTrial(Spec(DefaultConfig(), 0, 2));
  ASSERT_EQ(a.status(), v1::TRIAL_OK) << a.message();
  for (double sample : a.samples_ns()) EXPECT_EQ(sample, a.time_ns());
  EXPECT_EQ(a.time_ns(), b.time_ns());
}

TEST(MeasureTrialTest, NoiseVariesSamplesButTheSameSeedRepeatsThem) {
  v1::TrialResult a = MeasureTrial(Spec(DefaultConfig(), 0.05, 9));
  v1::TrialResult b = MeasureTrial(Spec(DefaultConfig(), 0.05, 9));
  v1::TrialResult c = MeasureTrial(Spec(DefaultConfig(), 0.05, 10));
  ASSERT_EQ(a.status(), v1::TRIAL_OK) << a.message();
  std::set<double> distinct(a.samples_ns().begin(), a.samples_ns().end());
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(std::vector<double>(a.samples_ns().begin(), a.samples_ns().end()),
            std::vector<double>(b.samples_ns().begin(), b.samples_ns().end()));
  EXPECT_NE(std::vector<double>(a.samples_ns().begin(), a.samples_ns().end()),
            std::vector<double>(c.samples_ns().begin(), c.samples_ns().end()));
}

// A WorkerService that hands out `total` trials and records the reports. The first
// `failing_reports` Report calls fail with UNAVAILABLE.
class FakeWorkerService final : public v1::WorkerService::Service {
 public:
  FakeWorkerService(int total, int failing_reports)
      : total_(total), failing_reports_(failing_reports) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    std::lock_guard lock(mu_);
    slots_ = request->slots();
    response->set_worker_id("w1");
    response->set_heartbeat_interval_ms(50);
    response->set_lease_ms(60000);
    return grpc::Status::OK;
  }
  grpc::Status Lease(grpc::ServerContext*, const v1::LeaseRequest* request,
                     v1::LeaseResponse* response) override {
    std::lock_guard lock(mu_);
    if (request->worker_id() != "w1") return {grpc::StatusCode::NOT_FOUND, "unknown worker"};
    max_lease_request_ = std::max(max_lease_request_, request->max_trials());
    for (int i = 0; i < request->max_trials() && next_ < total_; ++i) {
      v1::TrialSpec spec = Spec(DefaultConfig(), 0, 1);
      spec.set_trial_id(++next_);
      *response->add_trials() = spec;
    }
    return grpc::Status::OK;
  }
  grpc::Status Report(grpc::ServerContext*, const v1::ReportRequest* request,
                      v1::ReportResponse* response) override {
    std::lock_guard lock(mu_);
    if (failing_reports_ > 0) {
      --failing_reports_;
      return {grpc::StatusCode::UNAVAILABLE, "store busy"};
    }
    for (const v1::TrialResult& result : request->results()) {
      reported_.insert(result.trial_id());
      if (result.status() != v1::TRIAL_OK) ++not_ok_;
      if (result.worker_id() != "w1") ++bad_worker_id_;
    }
    response->set_accepted(request->results_size());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* response) override {
    std::lock_guard lock(mu_);
    ++heartbeats_;
    response->set_known(true);
    return grpc::Status::OK;
  }

  size_t reported() {
    std::lock_guard lock(mu_);
    return reported_.size();
  }

  std::mutex mu_;
  int total_;
  int failing_reports_;
  int next_ = 0;
  int slots_ = 0;
  int max_lease_request_ = 0;
  int heartbeats_ = 0;
  int not_ok_ = 0;
  int bad_worker_id_ = 0;
  std::set<int64_t> reported_;
};

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// An agent created on `channel` and running on its own thread until Stop() or destruction.
class RunningAgent {
 public:
  RunningAgent(std::shared_ptr<grpc::Channel> channel, const AgentOptions& options)
      : agent_(Agent::Create(std::move(channel), options)) {
    if (agent_.ok()) runner_ = std::thread([this] { run_status_ = (*agent_)->Run(); });
  }
  ~RunningAgent() { Stop().IgnoreError(); }
  RunningAgent(const RunningAgent&) = delete;
  RunningAgent& operator=(const RunningAgent&) = delete;

  // Agent::Create's status; the agent runs only if it is OK.
  absl::Status created() const { return agent_.status(); }
  // Stops the agent, waits for Run to return and returns its status (OK if it never ran).
  absl::Status Stop() {
    if (runner_.joinable()) {
      (*agent_)->Stop();
      runner_.join();
    }
    return run_status_;
  }

 private:
  absl::StatusOr<std::unique_ptr<Agent>> agent_;
  absl::Status run_status_;
  std::thread runner_;
};

// A FakeWorkerService(total, failing_reports) served in process, and an agent running against it
// with `lease_wait_ms` and `threads` (AgentOptions' default when not given).
struct AgentOnFakeServer {
  AgentOnFakeServer(int total, int failing_reports, int lease_wait_ms,
                    int threads = AgentOptions().threads)
      : service(total, failing_reports),
        server({&service}),
        agent(server.InProcessChannel(), Options(lease_wait_ms, threads)) {}

  static AgentOptions Options(int lease_wait_ms, int threads) {
    AgentOptions options;
    options.threads = threads;
    options.lease_wait_ms = lease_wait_ms;
    return options;
  }

  FakeWorkerService service;
  testing::ServiceHost server;
  RunningAgent agent;
};

TEST(AgentTest, MeasuresAndReportsEveryLeasedTrialThenStops) {
  AgentOnFakeServer setup(/*total=*/12, /*failing_reports=*/0, /*lease_wait_ms=*/50,
                          /*threads=*/3);
  ASSERT_TRUE(setup.agent.created().ok()) << setup.agent.created();
  EXPECT_TRUE(WaitFor([&] { return setup.service.reported() == 12; }, std::chrono::seconds(30)));
  absl::Status run_status = setup.agent.Stop();
  EXPECT_TRUE(run_status.ok()) << run_status;
  std::lock_guard lock(setup.service.mu_);
  EXPECT_EQ(setup.service.slots_, 3);
  // It leases ahead (two per slot before any trial is timed), never beyond what slots allow.
  EXPECT_GE(setup.service.max_lease_request_, 2 * 3);
  EXPECT_LE(setup.service.max_lease_request_, kMaxLeaseDepthPerSlot * 3);
  EXPECT_EQ(setup.service.not_ok_, 0);
  EXPECT_EQ(setup.service.bad_worker_id_, 0);
}

TEST(AgentTest, ResultsSurviveAnUnavailableServerAndAreReportedLater) {
  AgentOnFakeServer setup(/*total=*/4, /*failing_reports=*/3, /*lease_wait_ms=*/50,
                          /*threads=*/2);
  ASSERT_TRUE(setup.agent.created().ok()) << setup.agent.created();
  EXPECT_TRUE(WaitFor([&] { return setup.service.reported() == 4; }, std::chrono::seconds(30)));
  setup.agent.Stop().IgnoreError();
}

TEST(AgentTest, HeartbeatsWhileRunning) {
  AgentOnFakeServer setup(/*total=*/0, /*failing_reports=*/0, /*lease_wait_ms=*/20);
  ASSERT_TRUE(setup.agent.created().ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(setup.service.mu_);
        return setup.service.heartbeats_ >= 2;
      },
      std::chrono::seconds(10)));
  setup.agent.Stop().IgnoreError();
}

TEST(AgentTest, RunGivesUpWithUnavailableWhenNoServerAnswers) {
  AgentOptions options;
  options.unreachable_timeout_ms = 500;
  auto channel = grpc::CreateChannel("127.0.0.1:9", grpc::InsecureChannelCredentials());
  auto agent = Agent::Create(channel, options);
  ASSERT_TRUE(agent.ok());
  auto start = std::chrono::steady_clock::now();
  absl::Status status = (*agent)->Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(AgentTest, StopBeforeRunMakesRunReturnOk) {
  auto channel = grpc::CreateChannel("127.0.0.1:9", grpc::InsecureChannelCredentials());
  auto agent = Agent::Create(channel, {});
  ASSERT_TRUE(agent.ok());
  (*agent)->Stop();
  EXPECT_TRUE((*agent)->Run().ok());
}

TEST(AgentTest, CreateRejectsBadOptions) {
  auto channel = grpc::CreateChannel("127.0.0.1:9", grpc::InsecureChannelCredentials());
  AgentOptions options;
  options.threads = 0;
  EXPECT_EQ(Agent::Create(channel, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.threads = 1;
  options.targets = {"nosuchtarget"};
  EXPECT_FALSE(Agent::Create(channel, options).ok());
}

}  // namespace
}  // namespace tessel::worker

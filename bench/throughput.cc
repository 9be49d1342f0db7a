// What the service costs beside the work it serves (issue 17, Throughput; BENCHMARKS.md "Service
// throughput"). Runs one tuning job to its end, embedded (a server and `--threads` worker threads
// in this process, over the in-process channel, as `tessel tune` does) or on a running server
// (`--server`, with its own worker processes), then simulates the same configs again with nothing
// around the simulator, on as many threads, and prints both rates and their ratio.
//
//   throughput --threads 2                          # embedded
//   throughput --server 127.0.0.1:PORT --threads 2  # a server with 2 worker processes
//
// The job's rate is its trials over the server's own created..finished time; the simulator's is the
// same trials' configs over wall time. Exit 1 when the ratio is below --min-ratio.
#include <grpcpp/grpcpp.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/key.h"
#include "schema/tessel.grpc.pb.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "worker/agent.h"

namespace {

namespace v1 = tessel::v1;
using Clock = std::chrono::steady_clock;

bool Finished(v1::JobState state) {
  return state == v1::JOB_COMPLETED || state == v1::JOB_CANCELLED || state == v1::JOB_FAILED;
}

// Submits the job and polls it to its end; the finished job.
absl::StatusOr<v1::Job> RunJob(v1::TesselService::Stub& stub, const v1::Workload& workload,
                               int trials, uint64_t seed) {
  v1::SubmitJobRequest request;
  *request.mutable_workload() = workload;
  request.set_strategy("random");
  request.set_budget(trials);
  request.set_seed(seed);
  request.set_cold_start(true);
  request.set_new_job(true);
  v1::Job job;
  {
    grpc::ClientContext context;
    grpc::Status status = stub.SubmitJob(&context, request, &job);
    if (!status.ok()) return absl::UnavailableError("SubmitJob: " + status.error_message());
  }
  while (!Finished(job.state())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    v1::GetJobRequest get;
    get.set_job_id(job.id());
    grpc::ClientContext context;
    grpc::Status status = stub.GetJob(&context, get, &job);
    if (!status.ok()) return absl::UnavailableError("GetJob: " + status.error_message());
  }
  return job;
}

std::vector<std::string> Configs(v1::TesselService::Stub& stub, int64_t job_id) {
  std::vector<std::string> configs;
  v1::ListTrialsRequest request;
  request.set_job_id(job_id);
  request.set_page_size(10000);
  while (true) {
    v1::ListTrialsResponse response;
    grpc::ClientContext context;
    if (!stub.ListTrials(&context, request, &response).ok()) break;
    for (const v1::TrialResult& trial : response.trials()) {
      if (trial.status() == v1::TRIAL_OK) configs.push_back(trial.config());
    }
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  return configs;
}

// Simulates every config once on `threads` threads; evaluations per second.
double SimulatorRate(const v1::Workload& workload, const std::vector<std::string>& configs,
                     int threads) {
  absl::StatusOr<tessel::kernels::ResolvedWorkload> resolved = tessel::kernels::Resolve(workload);
  if (!resolved.ok() || configs.empty()) return 0;
  std::atomic<size_t> next{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < configs.size(); i = next++) {
        absl::StatusOr<tessel::Config> config = tessel::Config::Parse(configs[i]);
        if (!config.ok()) continue;
        (void)tessel::kernels::Evaluate(*resolved->kernel, resolved->problem, *config,
                                        resolved->target);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return static_cast<double>(configs.size()) /
         std::chrono::duration<double>(Clock::now() - start).count();
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"service throughput against the bare simulator on the same configs"};
  std::string server_address;
  int threads = 2;
  int trials = 2000;
  int64_t m = 4096, n = 4096, k = 4096;
  uint64_t seed = 1;
  double min_ratio = 0;
  app.add_option("--server", server_address,
                 "a running tessel-server HOST:PORT (its workers do the job); embedded when empty");
  app.add_option("--threads", threads, "embedded worker threads, and simulator threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--trials", trials, "the job's budget")->capture_default_str();
  app.add_option("-M", m, "matmul M")->capture_default_str();
  app.add_option("-N", n, "matmul N")->capture_default_str();
  app.add_option("-K", k, "matmul K")->capture_default_str();
  app.add_option("--seed", seed, "the random strategy's seed")->capture_default_str();
  app.add_option("--min-ratio", min_ratio, "exit 1 when service/simulator is below this");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  v1::Workload workload;
  workload.set_kernel("matmul");
  for (auto [name, value] : {std::pair{"M", m}, {"N", n}, {"K", k}}) {
    v1::Dim* dim = workload.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }

  std::unique_ptr<tessel::server::Server> server;
  std::unique_ptr<tessel::worker::Agent> agent;
  std::thread agent_thread;
  std::shared_ptr<grpc::Channel> channel;
  std::string db_path;
  if (server_address.empty()) {
    db_path = (std::filesystem::temp_directory_path() /
               ("tessel-throughput-" + std::to_string(getpid()) + ".db"))
                  .string();
    tessel::server::ServerOptions options;
    options.listen = "";
    options.db_path = db_path;
    absl::StatusOr<std::unique_ptr<tessel::server::Server>> created =
        tessel::server::Server::Create(options);
    if (!created.ok()) {
      std::fprintf(stderr, "cannot start the server: %s\n", created.status().ToString().c_str());
      return 2;
    }
    server = *std::move(created);
    tessel::worker::AgentOptions agent_options;
    agent_options.threads = threads;
    agent_options.lease_wait_ms = 200;
    absl::StatusOr<std::unique_ptr<tessel::worker::Agent>> made =
        tessel::worker::Agent::Create(server->InProcessChannel(), agent_options);
    if (!made.ok()) return 2;
    agent = *std::move(made);
    agent_thread = std::thread([a = agent.get()] { (void)a->Run(); });
    channel = server->InProcessChannel();
  } else {
    channel = grpc::CreateChannel(server_address, grpc::InsecureChannelCredentials());
  }
  auto stub = v1::TesselService::NewStub(channel);

  const double cpu_before = ProcessCpuSeconds();
  absl::StatusOr<v1::Job> job = RunJob(*stub, workload, trials, seed);
  const double job_cpu_s = ProcessCpuSeconds() - cpu_before;
  std::vector<std::string> configs;
  if (job.ok()) configs = Configs(*stub, job->id());
  if (agent) {
    agent->Stop();
    agent_thread.join();
    agent.reset();
  }
  stub.reset();
  if (server) server->Shutdown();
  if (!db_path.empty()) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_path + suffix);
  }
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    return 2;
  }

  const double service_s =
      static_cast<double>(job->finished_unix_ms() - job->created_unix_ms()) / 1000.0;
  const double service_rate = static_cast<double>(job->trials().total()) / service_s;
  const double sim_rate = SimulatorRate(workload, configs, threads);
  const double ratio = sim_rate > 0 ? service_rate / sim_rate : 0;
  std::printf(
      "{\"mode\": \"%s\", \"threads\": %d, \"trials\": %d, \"ok\": %zu, \"service_s\": %.3f, "
      "\"service_trials_per_s\": %.0f, \"process_cpu_s\": %.3f, \"simulator_evals_per_s\": %.0f, "
      "\"ratio\": %.3f}\n",
      server_address.empty() ? "embedded" : "server", threads, job->trials().total(),
      configs.size(), service_s, service_rate, job_cpu_s, sim_rate, ratio);
  if (ratio < min_ratio) {
    std::fprintf(stderr, "service reaches %.1f%% of the simulator's rate, below %.1f%%\n",
                 100 * ratio, 100 * min_ratio);
    return 1;
  }
  return 0;
}

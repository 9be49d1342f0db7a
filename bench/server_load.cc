// A mixed load on a tessel-server, as many build machines and engineers make it (issue 17):
//   server_load --server 127.0.0.1:PORT [--clients 50] [--seconds 30] [--rate 0]
// Each client (a thread with its own channel) sends back to back, in a fixed rotation: Lookup
// (6 of every 10 calls), SubmitJob (small random-strategy matmul jobs over 32 shapes, so
// single-flight attaches some), GetJob and ListJobs, ListTrials of the last job it submitted, and
// a WatchJob that reads one event and cancels. With --rate R, a client starts a call every 1/R s
// (a build machine's pace) rather than back to back (0: back to back, the server saturated).
// Prints one JSON object: per RPC the calls, the
// errors by code, p50/p99/max in microseconds, and the total calls per second. Exit 1 when any
// call failed with a code other than RESOURCE_EXHAUSTED (a limit) or when the run deadlocked
// (a call exceeded its 10 s deadline).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "schema/tessel.grpc.pb.h"

namespace {

namespace v1 = tessel::v1;
using Clock = std::chrono::steady_clock;

enum Rpc { kLookup, kSubmit, kGetJob, kListJobs, kListTrials, kWatch, kNumRpcs };
constexpr const char* kNames[kNumRpcs] = {"Lookup",   "SubmitJob",  "GetJob",
                                          "ListJobs", "ListTrials", "WatchJob"};
// The rotation of one client: 10 calls.
constexpr Rpc kRotation[] = {kLookup, kLookup, kSubmit,   kLookup,     kGetJob,
                             kLookup, kLookup, kListJobs, kListTrials, kWatch};

struct Stats {
  std::vector<double> latencies_us;
  std::map<std::string, int64_t> errors;  // by code name
};

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    default:
      return "CODE_" + std::to_string(static_cast<int>(code));
  }
}

v1::Workload Matmul(int64_t m) {
  v1::Workload w;
  w.set_kernel("matmul");
  for (auto [name, value] : {std::pair{"M", m}, {"N", int64_t{512}}, {"K", int64_t{512}}}) {
    v1::Dim* dim = w.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  return w;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixed gRPC load on a tessel-server"};
  std::string server;
  int clients = 50;
  double seconds = 30;
  double rate = 0;
  app.add_option("--server", server, "tessel-server HOST:PORT")->required();
  app.add_option("--clients", clients, "client threads, one channel each")->capture_default_str();
  app.add_option("--seconds", seconds, "duration")->capture_default_str();
  app.add_option("--rate", rate, "calls per second per client (0 = back to back)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::vector<Stats>> stats(clients, std::vector<Stats>(kNumRpcs));
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection per client
      auto stub = v1::TesselService::NewStub(
          grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
      int64_t last_job = 0;
      const auto period = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(rate > 0 ? 1.0 / rate : 0.0));
      // Clients start spread over one period, so paced calls do not arrive in bursts.
      auto next = Clock::now() + period * c / std::max(1, clients);
      for (int64_t i = c; Clock::now() < end; ++i) {
        if (rate > 0) {
          std::this_thread::sleep_until(next);
          next += period;
        }
        const Rpc rpc = kRotation[i % 10];
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        grpc::Status status;
        const auto sent = Clock::now();
        switch (rpc) {
          case kLookup: {
            v1::LookupRequest request;
            *request.mutable_workload() = Matmul(64 * (1 + i % 64));
            v1::LookupResponse response;
            status = stub->Lookup(&context, request, &response);
            break;
          }
          case kSubmit: {
            v1::SubmitJobRequest request;
            *request.mutable_workload() = Matmul(128 * (1 + (i / 10) % 32));
            request.set_strategy("random");
            request.set_budget(4);
            request.set_seed(uint64_t(i));
            v1::Job job;
            status = stub->SubmitJob(&context, request, &job);
            if (status.ok()) last_job = job.id();
            break;
          }
          case kGetJob: {
            v1::GetJobRequest request;
            request.set_job_id(std::max<int64_t>(last_job, 1));
            v1::Job job;
            status = stub->GetJob(&context, request, &job);
            if (status.error_code() == grpc::StatusCode::NOT_FOUND && last_job == 0) {
              status = grpc::Status::OK;  // nothing submitted yet
            }
            break;
          }
          case kListJobs: {
            v1::ListJobsRequest request;
            request.set_limit(20);
            v1::ListJobsResponse response;
            status = stub->ListJobs(&context, request, &response);
            break;
          }
          case kListTrials: {
            if (last_job == 0) continue;
            v1::ListTrialsRequest request;
            request.set_job_id(last_job);
            v1::ListTrialsResponse response;
            status = stub->ListTrials(&context, request, &response);
            break;
          }
          case kWatch: {
            if (last_job == 0) continue;
            v1::WatchJobRequest request;
            request.set_job_id(last_job);
            auto reader = stub->WatchJob(&context, request);
            v1::JobEvent event;
            const bool got = reader->Read(&event);
            context.TryCancel();
            while (reader->Read(&event)) {
            }
            status = reader->Finish();
            // Our own cancel after the first event is the expected end of a watch.
            if (got && status.error_code() == grpc::StatusCode::CANCELLED)
              status = grpc::Status::OK;
            break;
          }
          case kNumRpcs:
            break;
        }
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - sent).count();
        Stats& s = stats[c][rpc];
        if (status.ok()) {
          s.latencies_us.push_back(us);
        } else {
          ++s.errors[CodeName(status.error_code())];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  bool failed = false;
  int64_t total = 0;
  std::string out = "{\"clients\": " + std::to_string(clients) +
                    ", \"rate_per_client\": " + std::to_string(rate) + ", \"rpcs\": {";
  for (int r = 0; r < kNumRpcs; ++r) {
    std::vector<double> all;
    std::map<std::string, int64_t> errors;
    for (int c = 0; c < clients; ++c) {
      all.insert(all.end(), stats[c][r].latencies_us.begin(), stats[c][r].latencies_us.end());
      for (const auto& [code, n] : stats[c][r].errors) errors[code] += n;
    }
    std::sort(all.begin(), all.end());
    std::string errs = "{";
    for (const auto& [code, n] : errors) {
      errs += (errs.size() > 1 ? ", \"" : "\"") + code + "\": " + std::to_string(n);
      if (code != "RESOURCE_EXHAUSTED") failed = true;
    }
    errs += "}";
    total += int64_t(all.size());
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%s\"%s\": {\"calls\": %zu, \"per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": %.0f, "
                  "\"max_us\": %.0f, \"errors\": %s}",
                  r > 0 ? ", " : "", kNames[r], all.size(), double(all.size()) / elapsed,
                  Percentile(all, 0.5), Percentile(all, 0.99), all.empty() ? 0.0 : all.back(),
                  errs.c_str());
    out += line;
  }
  char tail[128];
  std::snprintf(tail, sizeof(tail), "}, \"seconds\": %.1f, \"calls_per_s\": %.0f}", elapsed,
                double(total) / elapsed);
  std::printf("%s%s\n", out.c_str(), tail);
  return failed ? 1 : 0;
}

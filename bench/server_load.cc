// A mixed load on a tessel-server, as many build machines and engineers make it (issue 17):
//   server_load --server 127.0.0.1:PORT [--clients 50] [--seconds 30] [--rate 0]
// Each client (its own channel, one call at a time) sends back to back, in a fixed rotation: Lookup
// (6 of every 10 calls), SubmitJob (small random-strategy matmul jobs over 32 shapes, so
// single-flight attaches some), GetJob and ListJobs, ListTrials of the last job it submitted, and
// a WatchJob that reads one event and cancels. With --rate R, a client starts a call every 1/R s
// (a build machine's pace) rather than back to back (0: back to back, the server saturated).
// Clients are driven by gRPC's callback API (no thread per client). Prints one JSON object: per
// RPC the calls, the errors by code, p50/p99/max in microseconds, and the total calls per second.
// Exit 1 when any call failed with a code other than RESOURCE_EXHAUSTED (a limit) or when the run
// deadlocked (a call exceeded its 10 s deadline).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "schema/process.h"
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

// One client: its own channel and one call at a time, issued from the previous call's completion
// (gRPC's callback API), so that 50 clients need no 50 threads of their own. On this 2-core
// machine the load generator shares the cores with the server; a thread per client spent them
// on context switches and its threads' run-queue waits inflated every latency it measured.
class Client {
 public:
  Client(int id, const std::string& server, Clock::time_point end, Clock::duration period,
         class Pacer* pacer)
      : i_(id), end_(end), period_(period), pacer_(pacer), stats_(kNumRpcs) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection per client
    stub_ = v1::TesselService::NewStub(
        grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
  }

  // Starts the client's next call, or ends the client when the run is over.
  void Next();
  // Schedules the next call: at once when back to back, else one period after the last start.
  void Done(Rpc rpc, const grpc::Status& status, Clock::time_point sent);
  const std::vector<Stats>& stats() const { return stats_; }
  Clock::time_point due() const { return due_; }
  void set_due(Clock::time_point due) { due_ = due; }

 private:
  template <typename Request, typename Response>
  struct Call {
    grpc::ClientContext context;
    Request request;
    Response response;
  };
  class Watch;

  int64_t i_;
  Clock::time_point end_, due_{};
  Clock::duration period_;
  class Pacer* pacer_;
  std::unique_ptr<v1::TesselService::Stub> stub_;
  std::vector<Stats> stats_;
  int64_t last_job_ = 0;
};

// Starts paced clients' calls at their due times (one thread); also counts finished clients.
class Pacer {
 public:
  void Schedule(Client* client) {
    std::lock_guard lock(mu_);
    queue_.push({client->due(), client});
    cv_.notify_one();
  }
  void Finished() {
    std::lock_guard lock(mu_);
    ++finished_;
    cv_.notify_one();
  }
  // Runs until `clients` have finished.
  void Run(int clients) {
    std::unique_lock lock(mu_);
    while (finished_ < clients) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto [due, client] = queue_.top();
      if (Clock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      queue_.pop();
      lock.unlock();
      client->Next();
      lock.lock();
    }
  }

 private:
  using Entry = std::pair<Clock::time_point, Client*>;
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const { return a.first > b.first; }
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, Later> queue_;
  int finished_ = 0;
};

// WatchJob: reads the first event, then cancels.
class Client::Watch : public grpc::ClientReadReactor<v1::JobEvent> {
 public:
  Watch(Client* client, int64_t job) : client_(client), sent_(Clock::now()) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    request_.set_job_id(job);
    client->stub_->async()->WatchJob(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    got_ = ok;
    context_.TryCancel();
  }
  void OnDone(const grpc::Status& status) override {
    // Our own cancel after the first event is the expected end of a watch.
    const bool cancelled = status.error_code() == grpc::StatusCode::CANCELLED;
    Client* client = client_;
    const auto sent = sent_;
    const grpc::Status result = got_ && cancelled ? grpc::Status::OK : status;
    delete this;
    client->Done(kWatch, result, sent);
  }

 private:
  Client* client_;
  Clock::time_point sent_;
  grpc::ClientContext context_;
  v1::WatchJobRequest request_;
  v1::JobEvent event_;
  bool got_ = false;
};

void Client::Next() {
  if (Clock::now() >= end_) {
    pacer_->Finished();
    return;
  }
  const int64_t i = i_++;
  const Rpc rpc = kRotation[i % 10];
  const auto sent = Clock::now();
  // Each call owns its context and messages until its completion runs.
  // `issue(async, context, request, response, done)` starts the call.
  auto start = [&](auto* call, auto issue, auto after) {
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    issue(stub_->async(), &call->context, &call->request, &call->response,
          [this, call, rpc, sent, after](grpc::Status status) {
            after(call, status);
            delete call;
            Done(rpc, status, sent);
          });
  };
  auto nothing = [](auto*, grpc::Status&) {};
  switch (rpc) {
    case kLookup: {
      auto* call = new Call<v1::LookupRequest, v1::LookupResponse>;
      *call->request.mutable_workload() = Matmul(64 * (1 + i % 64));
      start(
          call, [](auto* async, auto... args) { async->Lookup(args...); }, nothing);
      break;
    }
    case kSubmit: {
      auto* call = new Call<v1::SubmitJobRequest, v1::Job>;
      *call->request.mutable_workload() = Matmul(128 * (1 + (i / 10) % 32));
      call->request.set_strategy("random");
      call->request.set_budget(4);
      call->request.set_seed(uint64_t(i));
      start(
          call, [](auto* async, auto... args) { async->SubmitJob(args...); },
          [this](auto* c, grpc::Status& status) {
            if (status.ok()) last_job_ = c->response.id();
          });
      break;
    }
    case kGetJob: {
      auto* call = new Call<v1::GetJobRequest, v1::Job>;
      call->request.set_job_id(std::max<int64_t>(last_job_, 1));
      const bool none = last_job_ == 0;
      start(
          call, [](auto* async, auto... args) { async->GetJob(args...); },
          [none](auto*, grpc::Status& status) {
            if (none && status.error_code() == grpc::StatusCode::NOT_FOUND) {
              status = grpc::Status::OK;  // nothing submitted yet
            }
          });
      break;
    }
    case kListJobs: {
      auto* call = new Call<v1::ListJobsRequest, v1::ListJobsResponse>;
      call->request.set_limit(20);
      start(
          call, [](auto* async, auto... args) { async->ListJobs(args...); }, nothing);
      break;
    }
    case kListTrials: {
      if (last_job_ == 0) return Next();
      auto* call = new Call<v1::ListTrialsRequest, v1::ListTrialsResponse>;
      call->request.set_job_id(last_job_);
      start(
          call, [](auto* async, auto... args) { async->ListTrials(args...); }, nothing);
      break;
    }
    case kWatch:
      if (last_job_ == 0) return Next();
      new Watch(this, last_job_);
      break;
    case kNumRpcs:
      break;
  }
}

void Client::Done(Rpc rpc, const grpc::Status& status, Clock::time_point sent) {
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - sent).count();
  Stats& s = stats_[rpc];
  if (status.ok()) {
    s.latencies_us.push_back(us);
  } else {
    ++s.errors[CodeName(status.error_code())];
  }
  if (period_ == Clock::duration::zero()) return Next();
  due_ += period_;
  pacer_->Schedule(this);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixed gRPC load on a tessel-server"};
  std::string server;
  int clients = 50;
  double seconds = 30;
  double rate = 0;
  app.add_option("--server", server, "tessel-server HOST:PORT")->required();
  app.add_option("--clients", clients,
                 "concurrent clients, one channel and one call at a time each")
      ->capture_default_str();
  app.add_option("--seconds", seconds, "duration")->capture_default_str();
  app.add_option("--rate", rate, "calls per second per client (0 = back to back)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // Like the server's: gRPC's own locks otherwise feed abseil's lock-order graph on every call.
  tessel::StopMutexDeadlockDetection();

  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(rate > 0 ? 1.0 / rate : 0.0));
  Pacer pacer;
  std::vector<std::unique_ptr<Client>> all_clients;
  for (int c = 0; c < clients; ++c) {
    all_clients.push_back(std::make_unique<Client>(c, server, end, period, &pacer));
  }
  for (int c = 0; c < clients; ++c) {
    // Clients start spread over one period, so paced calls do not arrive in bursts.
    all_clients[c]->set_due(start + period * c / std::max(1, clients));
    pacer.Schedule(all_clients[c].get());
  }
  pacer.Run(clients);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  bool failed = false;
  int64_t total = 0;
  std::string out = "{\"clients\": " + std::to_string(clients) +
                    ", \"rate_per_client\": " + std::to_string(rate) + ", \"rpcs\": {";
  for (int r = 0; r < kNumRpcs; ++r) {
    std::vector<double> all;
    std::map<std::string, int64_t> errors;
    for (const auto& client : all_clients) {
      const Stats& s = client->stats()[r];
      all.insert(all.end(), s.latencies_us.begin(), s.latencies_us.end());
      for (const auto& [code, n] : s.errors) errors[code] += n;
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

// A load generator for the gRPC Lookup RPC, run as its own process against a tessel-server:
//   lookup_load --server 127.0.0.1:PORT [--threads 4] [--seconds 10] [--shapes 64]
// Each thread sends Lookup requests back to back on its own channel (sync stub) for the given
// time, cycling over tuned shapes. Prints one JSON object: requests, errors, seconds,
// requests_per_s, p50_us, p99_us, max_us.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "schema/tessel.grpc.pb.h"

int main(int argc, char** argv) {
  CLI::App app{"gRPC Lookup load generator"};
  std::string server;
  int threads = 4;
  double seconds = 10;
  int shapes = 64;
  app.add_option("--server", server, "tessel-server HOST:PORT")->required();
  app.add_option("--threads", threads, "client threads (one channel each)");
  app.add_option("--seconds", seconds, "duration");
  app.add_option("--shapes", shapes, "distinct M values cycled through (M=64*i, N=K=1024)");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::vector<double>> latencies(threads);
  std::atomic<int64_t> errors{0};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection per thread
      auto channel = grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
      auto stub = tessel::v1::TesselService::NewStub(channel);
      tessel::v1::LookupRequest request;
      request.mutable_workload()->set_kernel("matmul");
      auto* m = request.mutable_workload()->add_dims();
      m->set_name("M");
      for (const char* name : {"N", "K"}) {
        auto* d = request.mutable_workload()->add_dims();
        d->set_name(name);
        d->set_value(1024);
      }
      int i = t;
      latencies[t].reserve(1 << 20);
      while (std::chrono::steady_clock::now() < end) {
        m->set_value(64 * (1 + i++ % shapes));
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        tessel::v1::LookupResponse response;
        const auto sent = std::chrono::steady_clock::now();
        grpc::Status status = stub->Lookup(&context, request, &response);
        const auto received = std::chrono::steady_clock::now();
        if (!status.ok()) {
          ++errors;
          continue;
        }
        latencies[t].push_back(std::chrono::duration<double, std::micro>(received - sent).count());
      }
    });
  }
  for (auto& w : workers) w.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf(
      "{\"requests\": %zu, \"errors\": %lld, \"seconds\": %.2f, \"requests_per_s\": %.0f, "
      "\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
      all.size(), static_cast<long long>(errors.load()), elapsed, all.size() / elapsed, pct(0.5),
      pct(0.99), all.empty() ? 0.0 : all.back());
  return errors.load() > 0 ? 1 : 0;
}

#include "server/server.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "schema/strings.h"
#include "server/scheduler.h"
#include "server/service.h"
#include "server/store.h"

namespace tessel::server {

// How long Shutdown lets in-flight calls finish before cancelling them.
constexpr auto kShutdownGrace = std::chrono::milliseconds(1000);

class Server::Impl {
 public:
  std::unique_ptr<Store> store;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<grpc::Service> client_service;
  std::unique_ptr<grpc::Service> worker_service;
  std::unique_ptr<grpc::Server> grpc_server;
  int port = 0;

  std::mutex mu;
  std::condition_variable cv;
  bool shut_down = false;  // guarded by mu
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  auto store = Store::Open(options.db_path);
  if (!store.ok()) return store.status();
  impl->store = std::move(*store);

  SchedulerOptions scheduler_options;
  scheduler_options.lease_ms = options.lease_ms;
  scheduler_options.heartbeat_interval_ms = options.heartbeat_interval_ms;
  const bool noisy = options.noise_sigma > 0;
  scheduler_options.repeats = options.repeats >= 0 ? options.repeats : (noisy ? 5 : 1);
  scheduler_options.warmup = options.warmup >= 0 ? options.warmup : (noisy ? 1 : 0);
  scheduler_options.noise_sigma = options.noise_sigma;
  scheduler_options.verify = options.verify;
  auto scheduler = Scheduler::Create(impl->store.get(), scheduler_options);
  if (!scheduler.ok()) return scheduler.status();
  impl->scheduler = std::move(*scheduler);

  impl->client_service = MakeTesselService(impl->scheduler.get());
  impl->worker_service = MakeWorkerService(impl->scheduler.get());
  grpc::ServerBuilder builder;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &impl->port);
  }
  builder.RegisterService(impl->client_service.get());
  builder.RegisterService(impl->worker_service.get());
  impl->grpc_server = builder.BuildAndStart();
  if (!impl->grpc_server || (!options.listen.empty() && impl->port == 0)) {
    impl->scheduler->Shutdown();
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.listen, " (address in use or not local?)"));
  }
  if (!options.listen.empty()) {
    spdlog::info("tessel-server listening on port {} (db {})", impl->port, options.db_path);
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

std::shared_ptr<grpc::Channel> Server::InProcessChannel(const grpc::ChannelArguments& args) {
  return impl_->grpc_server->InProcessChannel(args);
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->shut_down; });
}

void Server::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  // Answer parked lease calls and end watches first, so the gRPC shutdown does not wait on them.
  impl_->scheduler->Shutdown();
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  impl_->grpc_server->Wait();
  impl_->scheduler.reset();
  impl_->store.reset();  // drains the writer: every accepted write is committed
  impl_->cv.notify_all();
}

}  // namespace tessel::server

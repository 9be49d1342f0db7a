#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "schema/credentials.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "server/admin_service.h"
#include "server/auth.h"
#include "server/dashboard.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/rpc_metrics.h"
#include "server/scheduler.h"
#include "server/service.h"
#include "server/store.h"
#include "server/store_admin.h"

namespace tessel::server {

// How long Shutdown lets in-flight calls finish before cancelling them.
constexpr auto kShutdownGrace = std::chrono::milliseconds(1000);

namespace {

// The listening port's credentials: TLS when a certificate is given, else plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenCredentials(
    const ServerOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.tls_cert.empty()) {
    if (!options.tls_client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  TESSEL_ASSIGN_OR_RETURN(pair.cert_chain, ReadSecretFile(options.tls_cert, "--tls-cert"));
  TESSEL_ASSIGN_OR_RETURN(pair.private_key, ReadSecretFile(options.tls_key, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca.empty()) {
    TESSEL_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                            ReadSecretFile(options.tls_client_ca, "--tls-client-ca"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// Who may call what; refuses to open a network port to everyone by accident.
absl::StatusOr<Authorizer> MakeAuthorizer(const ServerOptions& options) {
  if (!options.token_file.empty()) {
    TESSEL_ASSIGN_OR_RETURN(TokenTable tokens, TokenTable::Load(options.token_file));
    return Authorizer(std::move(tokens), options.open_lookups);
  }
  if (!options.listen.empty() && !IsLoopbackAddress(options.listen)) {
    if (!options.insecure) {
      return absl::InvalidArgumentError(
          StrCat("refusing to listen on ", options.listen,
                 " without --token-file: anyone who reaches it could submit jobs and publish "
                 "results. Give --token-file, listen on 127.0.0.1, or pass --insecure"));
    }
    spdlog::warn(
        "listening on {} with no authentication (--insecure): anyone who reaches this "
        "port may submit jobs, register workers and publish results",
        options.listen);
  }
  return Authorizer();
}

}  // namespace

bool IsLoopbackAddress(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

class Server::Impl {
 public:
  Metrics metrics;  // first: outlives everything that feeds it
  std::unique_ptr<Store> store;
  std::unique_ptr<HttpServer> http;
  std::atomic<bool> draining{false};
  Authorizer auth;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<grpc::Service> client_service;
  std::unique_ptr<grpc::Service> worker_service;
  std::unique_ptr<grpc::Service> admin_service;
  std::unique_ptr<grpc::Server> grpc_server;
  // Held while the store is open: keeps `tessel admin restore --db` off a file in use.
  std::optional<DatabaseLock> db_lock;
  // Hourly retention (ServerOptions::keep_trials_days); stopped by Shutdown.
  std::thread retention;
  int port = 0;
  int drain_s = 0;  // ServerOptions::drain_s

  std::mutex mu;
  std::condition_variable cv;
  bool shut_down = false;  // guarded by mu

  // Applies `policy` now and every hour until Shutdown.
  void RetentionLoop(RetentionPolicy policy) {
    std::unique_lock<std::mutex> lock(mu);
    while (!shut_down) {
      lock.unlock();
      absl::StatusOr<int64_t> deleted = store->DeleteOldTrials(policy, NowUnixMs());
      if (!deleted.ok()) {
        spdlog::error("retention: {}", std::string(deleted.status().message()));
      } else if (*deleted > 0) {
        spdlog::info("retention: deleted {} trial(s) older than {} days", *deleted,
                     policy.keep_trials_days);
      }
      lock.lock();
      cv.wait_for(lock, std::chrono::hours(1), [this] { return shut_down; });
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  if (!options.listen.empty()) TESSEL_RETURN_IF_ERROR(CheckGrpcAddress(options.listen, "--listen"));
  auto impl = std::make_unique<Impl>();
  TESSEL_ASSIGN_OR_RETURN(impl->auth, MakeAuthorizer(options));
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          ListenCredentials(options));
  if (!options.listen.empty() && options.tls_cert.empty() && !IsLoopbackAddress(options.listen)) {
    spdlog::warn(
        "listening on {} without TLS: tokens and results cross the network in plaintext "
        "(--tls-cert/--tls-key)",
        options.listen);
  }
  StoreOptions store_options;
  Metrics* metrics = &impl->metrics;
  store_options.on_commit = [metrics](double seconds) { metrics->ObserveCommit(seconds); };
  // A restore staged by AdminService.Restore replaces the database before it is opened.
  TESSEL_ASSIGN_OR_RETURN(std::optional<std::string> replaced, ApplyStagedRestore(options.db_path));
  if (replaced) {
    spdlog::warn("restored {} from {}; the database it replaced is kept at {}", options.db_path,
                 StagedRestorePath(options.db_path),
                 replaced->empty() ? std::string("(none)") : *replaced);
  }
  auto store = Store::Open(options.db_path, store_options);
  if (!store.ok()) return store.status();
  impl->store = std::move(*store);
  TESSEL_ASSIGN_OR_RETURN(impl->db_lock, DatabaseLock::Shared(options.db_path));

  SchedulerOptions scheduler_options;
  scheduler_options.metrics = metrics;
  scheduler_options.lease_ms = options.lease_ms;
  scheduler_options.heartbeat_interval_ms = options.heartbeat_interval_ms;
  const bool noisy = options.noise_sigma > 0;
  scheduler_options.repeats = options.repeats >= 0 ? options.repeats : (noisy ? 5 : 1);
  scheduler_options.warmup = options.warmup >= 0 ? options.warmup : (noisy ? 1 : 0);
  scheduler_options.noise_sigma = options.noise_sigma;
  scheduler_options.promote_top = options.promote_top;
  scheduler_options.promote_repeats = options.promote_repeats;
  scheduler_options.promote_rounds = options.promote_rounds;
  scheduler_options.verify = options.verify;
  auto scheduler = Scheduler::Create(impl->store.get(), scheduler_options);
  if (!scheduler.ok()) return scheduler.status();
  impl->scheduler = std::move(*scheduler);
  impl->drain_s = options.drain_s;

  impl->client_service =
      MakeTesselService(impl->scheduler.get(), &impl->auth, options.client_limits);
  impl->worker_service = MakeWorkerService(impl->scheduler.get(), &impl->auth);
  impl->admin_service = MakeAdminService(impl->store.get(), &impl->auth);
  // Standard probes (grpc.health.v1 and server reflection) for grpcurl, grpc_health_probe and
  // Kubernetes gRPC probes. They answer without a token, as probes do; they reveal the schema
  // (public in schema/tessel.proto) and whether the server serves, nothing stored. Health says
  // SERVING from here (the store is open and migrated) until Shutdown begins.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, credentials, &impl->port);
  }
  builder.RegisterService(impl->client_service.get());
  builder.RegisterService(impl->worker_service.get());
  builder.RegisterService(impl->admin_service.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(RpcMetricsInterceptor(metrics));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  impl->grpc_server = builder.BuildAndStart();
  if (!impl->grpc_server || (!options.listen.empty() && impl->port == 0)) {
    impl->scheduler->Shutdown();
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.listen, " (address in use or not local?)"));
  }
  if (!options.http.empty()) {
    Impl* raw = impl.get();
    auto http = HttpServer::Start(
        options.http, MakeDashboard({.scheduler = impl->scheduler.get(),
                                     .store = impl->store.get(),
                                     .metrics = metrics,
                                     .ready = [raw] { return !raw->draining.load(); }}));
    if (!http.ok()) {
      impl->grpc_server->Shutdown();
      impl->scheduler->Shutdown();
      return http.status();
    }
    impl->http = std::move(*http);
    spdlog::info("HTTP (health, metrics, dashboard) on port {}", impl->http->port());
  }
  if (!options.listen.empty()) {
    spdlog::info("tessel-server listening on port {} (db {}; {}, {})", impl->port, options.db_path,
                 options.tls_cert.empty() ? "plaintext" : "TLS",
                 impl->auth.enabled() ? "token authentication" : "no authentication");
  }
  if (options.keep_trials_days > 0) {
    Impl* raw = impl.get();
    const RetentionPolicy policy{.keep_trials_days = options.keep_trials_days,
                                 .keep_top = options.keep_top};
    impl->retention = std::thread([raw, policy] { raw->RetentionLoop(policy); });
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }
int Server::http_port() const { return impl_->http ? impl_->http->port() : 0; }

std::shared_ptr<grpc::Channel> Server::InProcessChannel(const grpc::ChannelArguments& args) {
  return impl_->grpc_server->InProcessChannel(args);
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->shut_down; });
}

void Server::Drain() {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(impl_->drain_s);
  if (grpc::HealthCheckServiceInterface* health = impl_->grpc_server->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  impl_->draining = true;  // /readyz says 503 from here
  impl_->scheduler->BeginDrain();
  size_t outstanding = impl_->scheduler->OutstandingLeases();
  spdlog::info("draining: {} leased trial(s) outstanding, waiting up to {} s", outstanding,
               impl_->drain_s);
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    while (!impl_->shut_down && outstanding > 0 && Clock::now() < deadline) {
      impl_->cv.wait_for(lock, std::chrono::milliseconds(50));
      lock.unlock();
      outstanding = impl_->scheduler->OutstandingLeases();
      lock.lock();
    }
  }
  if (outstanding > 0) {
    spdlog::warn("drain: {} leased trial(s) not reported in {} s; they run again after a restart",
                 outstanding, impl_->drain_s);
  }
  Shutdown();
}

void Server::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  impl_->cv.notify_all();
  if (impl_->retention.joinable()) impl_->retention.join();
  // Probes see NOT_SERVING from the start of the drain.
  if (grpc::HealthCheckServiceInterface* health = impl_->grpc_server->GetHealthCheckService()) {
    health->Shutdown();
  }
  impl_->draining = true;
  // The HTTP port first: its handlers read the scheduler and the store.
  if (impl_->http) impl_->http->Stop();
  // Answer parked lease calls and end watches first, so the gRPC shutdown does not wait on them.
  impl_->scheduler->Shutdown();
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  impl_->grpc_server->Wait();
  impl_->scheduler.reset();
  impl_->store.reset();  // drains the writer: every accepted write is committed
  impl_->cv.notify_all();
}

}  // namespace tessel::server

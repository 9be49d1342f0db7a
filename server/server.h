// tessel-server as a library: the gRPC services, the scheduler and the store in one object, so the
// `tessel-server` binary and the CLI's embedded mode run exactly the same code.
#ifndef TESSEL_SERVER_SERVER_H_
#define TESSEL_SERVER_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/client_quota.h"
#include "server/scheduler_options.h"
#include "server/store.h"

namespace tessel::server {

struct ServerOptions {
  // gRPC listen address, e.g. "127.0.0.1:7878"; port 0 picks a free port. Empty: no network port,
  // in-process channels only (the CLI's embedded mode).
  std::string listen = "127.0.0.1:7878";
  // SQLite database file; created with its schema when absent.
  std::string db_path = "tessel.db";
  // A leased trial whose result has not arrived by then is re-queued (WORKER_LOST).
  int lease_ms = 60000;
  // Workers heartbeat this often; one silent for 3 intervals is declared lost.
  int heartbeat_interval_ms = 1000;
  // Measurement protocol sent with each trial. -1 picks by noise: a deterministic simulator
  // (noise_sigma 0) needs one run and no warmup; a noisy one gets warmup 1 and the median of 5.
  int repeats = -1;
  int warmup = -1;
  double noise_sigma = 0;
  // Noise-aware promotion (SchedulerOptions): with noise, the top promote_top candidates race,
  // promote_repeats runs per round for up to promote_rounds rounds. promote_top 0 turns it off.
  int promote_top = SchedulerOptions{}.promote_top;
  int promote_repeats = SchedulerOptions{}.promote_repeats;
  int promote_rounds = SchedulerOptions{}.promote_rounds;
  // Verification policy for ordinary trials: "always", "never" or "sample:P". The config a job
  // publishes as its best is always verified first, whatever this says.
  std::string verify = "never";

  // Who may call: a token file (server/auth.h: `ROLE TOKEN` lines). Empty: no authentication,
  // and then the server listens only on a loopback address unless `insecure` is set.
  std::string token_file;
  // Lookup needs no token even with a token file.
  bool open_lookups = false;
  // Listen beyond loopback without a token file (a warning is logged).
  bool insecure = false;
  // TLS: the server's PEM certificate chain and private key (both or neither); with
  // `tls_client_ca`, clients must present a certificate signed by it (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Drain() waits at most this long for leased trials to be reported.
  int drain_s = 20;
  // Open WatchJob streams and queued or running jobs each client (peer address) may have.
  ClientLimits client_limits;
  // Retention (store.h RetentionPolicy): with keep_trials_days > 0, old trials are deleted at start
  // and every hour after, so a long-lived server's database does not grow without bound.
  // `tessel admin vacuum` then gives the space back to the filesystem.
  int keep_trials_days = 0;
  int keep_top = RetentionPolicy{}.keep_top;
  // HTTP side port (HOST:PORT; port 0 picks one) for /healthz, /readyz, /metrics and the
  // dashboard (server/dashboard.h). Empty: none.
  std::string http;
};

// True when `listen` (HOST:PORT) names a loopback host: 127.0.0.0/8, ::1 or localhost.
bool IsLoopbackAddress(const std::string& listen);

class Server {
 public:
  // Opens the store (applying migrations), recovers jobs left running by a previous process, and
  // starts serving. Fails when the database cannot be opened or the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();  // Shutdown()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port, 0 when not listening on the network.
  int port() const;
  // The bound HTTP port, 0 without ServerOptions::http.
  int http_port() const;
  // A channel to this server that does not touch the network.
  std::shared_ptr<grpc::Channel> InProcessChannel(const grpc::ChannelArguments& args = {});
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  // Stops accepting calls, cancels open streams and closes the store. Idempotent, thread-safe.
  void Shutdown();
  // A graceful stop (SIGTERM): health says NOT_SERVING, no new job or lease is given out, and
  // trials already leased may report until none is outstanding or `drain_s` has passed; then
  // Shutdown(). A Shutdown() from another thread ends the wait early. Jobs still running resume
  // when a server opens the same database.
  void Drain();

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SERVER_H_

// tessel-server: the central gRPC server (jobs, search, scheduling, SQLite store).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "schema/cli_checks.h"
#include "schema/logging.h"
#include "schema/process.h"
#include "server/server.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tessel-server: runs tile-size and schedule search for ML kernels, leases trials to "
      "tessel-worker processes and keeps every measurement and best config in SQLite."};
  tessel::server::ServerOptions options;
  app.add_option("--listen", options.listen, "gRPC address to listen on (port 0 picks one)")
      ->capture_default_str();
  app.add_option("--db", options.db_path, "SQLite database (created when absent)")
      ->capture_default_str();
  std::string log_format = "text", log_level = "info";
  app.add_option("--log-format", log_format,
                 "log lines as text or json (one object per line: time, level, logger, msg)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--lease-ms", options.lease_ms,
                 "re-queue a leased trial not reported within this time")
      ->capture_default_str()
      ->check(tessel::PositiveInteger());
  app.add_option("--heartbeat-ms", options.heartbeat_interval_ms, "worker heartbeat interval")
      ->capture_default_str()
      ->check(tessel::PositiveInteger());
  app.add_option("--repeats", options.repeats,
                 "measured runs per trial, median kept (default: 1 without noise, 5 with)")
      ->check(tessel::PositiveInteger());
  app.add_option("--warmup", options.warmup,
                 "discarded runs per trial (default: 0 without noise, 1 with)")
      ->check(tessel::NonNegativeNumber());
  app.add_option("--noise", options.noise_sigma, "simulated run-to-run noise (relative sigma)")
      ->capture_default_str()
      ->check(tessel::NonNegativeNumber());
  app.add_option("--promote-top", options.promote_top,
                 "with noise, this many top candidates race on re-measures, not charged to the "
                 "budget; the lowest 10%-trimmed mean is published (0 = off)")
      ->capture_default_str()
      ->check(tessel::NonNegativeNumber());
  app.add_option("--promote-repeats", options.promote_repeats,
                 "runs per candidate in each round of the race")
      ->capture_default_str()
      ->check(tessel::PositiveInteger());
  app.add_option("--promote-rounds", options.promote_rounds,
                 "most rounds of the race; after each, a candidate whose 95% interval lies above "
                 "the leader's leaves")
      ->capture_default_str()
      ->check(tessel::PositiveInteger());
  app.add_option("--verify", options.verify,
                 "verification policy for ordinary trials: always, never or sample:P "
                 "(a job's published best is always verified)")
      ->capture_default_str();
  app.add_option("--token-file", options.token_file,
                 "who may call: one 'ROLE TOKEN [NAME]' per line (roles reader, tuner, worker; "
                 "'#' comments; a NAME marks a token as one holder's, quarantined with a lying "
                 "worker). Without it the server listens on loopback only");
  app.add_flag("--open-lookups", options.open_lookups, "Lookup needs no token");
  app.add_flag("--insecure", options.insecure,
               "allow listening beyond loopback without --token-file (anyone may call)");
  app.add_option("--tls-cert", options.tls_cert, "PEM certificate chain: serve TLS");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA certificates: require client certificates signed by them (mutual TLS)");
  app.add_option("--drain-s", options.drain_s,
                 "on SIGTERM, wait up to this long for leased trials to be reported before "
                 "exiting (a second signal exits at once)")
      ->capture_default_str()
      ->check(tessel::NonNegativeNumber());
  std::string port_file;
  app.add_option("--port-file", port_file,
                 "write the bound port to this file once listening (useful with port 0)");
  app.add_option("--http", options.http,
                 "HTTP address for /healthz, /readyz, /metrics and the dashboard, e.g. "
                 "127.0.0.1:8080 (port 0 picks one; default: none)");
  app.add_option("--keep-trials-days", options.keep_trials_days,
                 "retention: delete trials older than this many days (of finished jobs; every "
                 "published best and each workload's --keep-top fastest are kept), at start and "
                 "hourly; 0 keeps every trial")
      ->capture_default_str()
      ->check(CLI::Range(0, tessel::server::kMaxKeepTrialsDays));
  app.add_option("--keep-top", options.keep_top,
                 "retention keeps this many fastest OK trials of each workload")
      ->capture_default_str()
      ->check(CLI::Range(1, tessel::server::kMaxKeepTop));
  std::string http_port_file;
  app.add_option("--http-port-file", http_port_file,
                 "write the bound HTTP port to this file once serving (with --http)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  tessel::StopMutexDeadlockDetection();
  tessel::KeepFreedHeapMemory();  // the dashboard and embedded workers evaluate programs

  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (absl::Status s = tessel::ConfigureLogging(log_format, log_level); !s.ok()) {
    std::fprintf(stderr, "tessel-server: error: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  auto server = tessel::server::Server::Create(options);
  if (!server.ok()) {
    std::fprintf(stderr, "tessel-server: error: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  // Written whole, then renamed: a reader never sees a partial number.
  auto write_port = [](const std::string& path, int port) {
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "tessel-server: error: cannot write %s\n", path.c_str());
      return false;
    }
    std::fprintf(f, "%d\n", port);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
    return true;
  };
  if (!port_file.empty() && !write_port(port_file, (*server)->port())) return 1;
  if (!http_port_file.empty() && !write_port(http_port_file, (*server)->http_port())) return 1;
  // The first signal drains; a second one, during the drain, stops at once.
  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    spdlog::info("signal {} received: draining (send it again to stop at once)", signal);
    std::atomic<bool> drained{false};
    std::thread drain([&] {
      (*server)->Drain();
      drained = true;
    });
    const timespec tick{0, 100'000'000};
    while (!drained) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        spdlog::info("signal received again: shutting down");
        (*server)->Shutdown();
        break;
      }
    }
    drain.join();
  });
  (*server)->Wait();
  signal_thread.join();
  return 0;
}

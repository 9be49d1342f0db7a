// tessel-worker: registers with a tessel server, leases trials, measures them on the simulator and
// reports. Exits 0 on SIGINT/SIGTERM after finishing and reporting the trials in progress; exits 1
// with a message when the server cannot be reached.
#include <grpcpp/grpcpp.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "schema/cli_checks.h"
#include "schema/credentials.h"
#include "schema/logging.h"
#include "schema/process.h"
#include "schema/strings.h"
#include "sim/api.h"
#include "spdlog/spdlog.h"
#include "worker/agent.h"

namespace {

int RealMain(int argc, char** argv) {
  CLI::App app{"tessel-worker: measures tuning trials for a tessel server"};
  std::string server;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string targets;
  std::string name;
  int timeout_s = 30;
  bool verbose = false;
  app.add_option("--server", server, "tessel server address, HOST:PORT")->required();
  app.add_option("--threads", threads, "trials measured at once (default: hardware threads)")
      ->check(tessel::PositiveInteger());
  app.add_option("--targets", targets,
                 "comma-separated targets this worker offers (default: all built-in)");
  app.add_option("--name", name, "name shown by `tessel workers` (default: host:pid)");
  app.add_option("--unreachable-timeout", timeout_s,
                 "seconds without an answer from the server before giving up")
      ->check(tessel::PositiveInteger());
  int nice = tessel::worker::AgentOptions{}.measure_nice;
  app.add_option("--nice", nice,
                 "CPU priority (nice) of the measuring threads, so a server on the same machine "
                 "answers first; 0 keeps the process's")
      ->capture_default_str()
      ->check(CLI::Range(0, 19));
  app.add_flag("-v,--verbose", verbose, "log every trial (--log-level debug)");
  std::string log_format = "text", log_level = "info";
  app.add_option("--log-format", log_format, "log lines as text or json (one object per line)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  std::string token_file;
  tessel::ClientTlsFiles tls;
  app.add_option("--token-file", token_file,
                 "file holding this worker's token (a `worker` role token of the server's "
                 "--token-file); default: $TESSEL_TOKEN_FILE");
  app.add_option("--tls-ca", tls.ca_file,
                 "PEM root certificates to verify a TLS server (default: plaintext)");
  app.add_option("--tls-cert", tls.cert_file,
                 "PEM client certificate chain for a server that requires one (mutual TLS; with "
                 "--tls-ca and --tls-key)");
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  tessel::StopMutexDeadlockDetection();
  tessel::KeepFreedHeapMemory();
  if (absl::Status s = tessel::ConfigureLogging(log_format, verbose ? "debug" : log_level);
      !s.ok()) {
    std::fprintf(stderr, "tessel-worker: error: %s\n", std::string(s.message()).c_str());
    return 2;
  }

  tessel::worker::AgentOptions options;
  options.name = name;
  options.threads = threads;
  options.measure_nice = nice;
  options.unreachable_timeout_ms = timeout_s * 1000;
  if (!targets.empty()) {
    for (std::string_view target : tessel::StrSplit(targets, ',')) {
      target = tessel::StripWhitespace(target);
      if (!target.empty()) options.targets.emplace_back(target);
    }
  }

  absl::StatusOr<std::optional<std::string>> token = tessel::ClientToken(token_file);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      tessel::ChannelCredentials(tls);
  for (const absl::Status& status :
       {tessel::CheckGrpcAddress(server, "--server"), token.status(), credentials.status()}) {
    if (!status.ok()) {
      std::fprintf(stderr, "tessel-worker: error: %s\n", std::string(status.message()).c_str());
      return 2;
    }
  }
  options.token = *token;

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  auto channel = grpc::CreateCustomChannel(server, *credentials, args);
  absl::StatusOr<std::unique_ptr<tessel::worker::Agent>> agent =
      tessel::worker::Agent::Create(channel, options);
  if (!agent.ok()) {
    std::fprintf(stderr, "tessel-worker: error: %s\n",
                 std::string(agent.status().message()).c_str());
    return 2;
  }

  // SIGINT/SIGTERM are handled on a dedicated thread; the handler only asks the agent to stop, and
  // Run() then finishes and reports the trials in progress.
  boost::asio::io_context signal_context;
  boost::asio::signal_set stop_signals(signal_context, SIGINT, SIGTERM);
  stop_signals.async_wait([&agent](const boost::system::error_code& error, int signal) {
    if (error) return;  // cancelled: Run ended on its own
    spdlog::info("received {}; finishing trials in progress",
                 signal == SIGINT ? "SIGINT" : "SIGTERM");
    (*agent)->Stop();
  });
  std::thread signal_thread([&signal_context] { signal_context.run(); });

  spdlog::info("tessel-worker {} connecting to {} with {} threads",
               options.name.empty() ? "(host:pid)" : options.name, server, threads);
  absl::Status status = (*agent)->Run();
  signal_context.stop();
  signal_thread.join();

  if (absl::IsUnavailable(status)) {
    std::fprintf(stderr,
                 "tessel-worker: error: cannot reach tessel server at %s (is it running?): %s\n",
                 server.c_str(), std::string(status.message()).c_str());
    return 1;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tessel-worker: error: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return RealMain(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel-worker: error: %s\n", e.what());
    return 1;
  }
}

// `tessel health --server ADDR`: asks the standard gRPC health service (grpc.health.v1), as
// grpc_health_probe and Kubernetes gRPC probes do; exits 0 only when the server is SERVING. The
// container image's HEALTHCHECK runs it.
#include <iostream>
#include <memory>
#include <string>

#include "client/cli/command.h"
#include "client/cli/common.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"

namespace tessel::cli {
namespace {

class HealthCommand final : public Command {
 public:
  HealthCommand()
      : Command("health",
                "ask a server's gRPC health service; exit 0 when SERVING, 1 otherwise (no token "
                "needed)",
                "tessel health --server localhost:7878") {}

  absl::Status Run(int& exit_code) override {
    if (args_.server.empty()) return absl::InvalidArgumentError("health needs --server HOST:PORT");
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(args_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(std::string status, backend->client->Health(service_));
    exit_code = status == "SERVING" ? 0 : 1;
    if (json_) {
      PrintJson({{"server", args_.server}, {"service", service_}, {"status", status}});
    } else {
      std::cout << fmt::format("{}: {}\n", args_.server, status);
    }
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    AddServerOptions(command, args_);
    command.add_option("--service", service_,
                       "a service name, e.g. tessel.v1.TesselService (default: the whole server)");
  }

  ServerArgs args_;
  std::string service_;
};

}  // namespace

std::unique_ptr<Command> NewHealthCommand() { return std::make_unique<HealthCommand>(); }

}  // namespace tessel::cli

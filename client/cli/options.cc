#include "client/cli/options.h"

#include <string>
#include <vector>

#include "schema/credentials.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/target.h"

namespace tessel::cli {

void AddPositiveOption(CLI::App& command, const std::string& name, int& value,
                       const std::string& help) {
  command.add_option(name, value, help)->capture_default_str()->check(PositiveInteger());
}

void AddServerOptions(CLI::App& command, ServerArgs& args) {
  auto* server = command.add_option("--server", args.server, "tessel server address HOST:PORT");
  auto* db = command.add_option(
      "--db", args.db, StrCat("SQLite database of the embedded server (default ", kDefaultDb, ")"));
  server->excludes(db);
  command.add_option(
      "--token-file", args.token_file,
      StrCat("file holding the token sent to --server (default: $", kTokenFileEnv, ")"));
  command.add_option("--tls-ca", args.tls_ca,
                     "PEM root certificates to verify a TLS --server (default: plaintext)");
  command.add_option("--tls-cert", args.tls_cert,
                     "PEM client certificate chain for a --server that requires one (mutual TLS; "
                     "with --tls-ca and --tls-key)");
  command.add_option("--tls-key", args.tls_key, "PEM private key of --tls-cert");
}

absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(const ServerArgs& args, bool must_exist) {
  client::ClientOptions remote;
  if (!args.server.empty()) {
    TESSEL_ASSIGN_OR_RETURN(remote.token, ClientToken(args.token_file));
    remote.tls_ca_file = args.tls_ca;
    remote.tls_cert_file = args.tls_cert;
    remote.tls_key_file = args.tls_key;
  }
  return OpenBackend(args.server, args.DbPath(), must_exist, remote, args.noise, args.promote_top);
}

void AddWorkloadOptions(CLI::App& command, WorkloadArgs& args) {
  command.add_option("kernel", args.kernel, "kernel name (see `tessel kernels`)")->required();
  command.add_option("--shape", args.shape, "named dims, e.g. M=4096,N=4096,K=4096")->required();
  std::vector<std::string> dtypes;
  for (int d = 0; d < sim::kNumDTypes; ++d) dtypes.emplace_back(sim::DTypeName(sim::DType(d)));
  command.add_option("--dtype", args.dtype, "element type (what a kernel takes: `tessel kernels`)")
      ->capture_default_str()
      ->check(CLI::IsMember(dtypes));
  command.add_option("--target", args.target, "target (see `tessel targets`)")
      ->capture_default_str();
}

absl::StatusOr<Workload> ValidateWorkload(const WorkloadArgs& args) {
  return ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
}

}  // namespace tessel::cli

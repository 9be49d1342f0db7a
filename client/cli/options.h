// Option structs and flag helpers that several `tessel` commands share. A command's own options
// are fields of its Command class in <command>.cc; what sits here is used by more than one.
#ifndef TESSEL_CLIENT_CLI_OPTIONS_H_
#define TESSEL_CLIENT_CLI_OPTIONS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/cli/common.h"
#include "schema/cli_checks.h"

namespace tessel::cli {

// Where a command finds its server: --server HOST:PORT, or an embedded server on --db (the two
// exclude each other). An empty `db` means kDefaultDb.
struct ServerArgs {
  std::string server;
  std::string db;
  std::string token_file;  // --token-file (else $TESSEL_TOKEN_FILE), sent to a remote server
  std::string tls_ca;      // --tls-ca: verify a TLS server against these roots
  std::string tls_cert;    // --tls-cert, --tls-key: the client certificate for mutual TLS
  std::string tls_key;
  // The embedded server's measurement settings (tune only; a remote server has its own).
  double noise = 0;
  int promote_top = -1;  // -1: the server's default

  // The embedded server's database file: --db, or kDefaultDb.
  std::string DbPath() const { return db.empty() ? kDefaultDb : db; }
};

// Adds an integer option that must be positive, its default shown in --help.
void AddPositiveOption(CLI::App& command, const std::string& name, int& value,
                       const std::string& help);

// Adds --server, --db, --token-file, --tls-ca, --tls-cert and --tls-key to `command`, filling
// `args`.
void AddServerOptions(CLI::App& command, ServerArgs& args);

// Connects to --server when given (with the token and TLS files named), else opens an embedded
// server on DbPath() (OpenBackend). InvalidArgument for an unreadable token or TLS file.
absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(const ServerArgs& args, bool must_exist);

// The workload a per-workload command names: KERNEL --shape DIMS [--dtype D] [--target T].
struct WorkloadArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
};

// Adds the positional KERNEL and --shape (both required), --dtype and --target to `command`.
void AddWorkloadOptions(CLI::App& command, WorkloadArgs& args);

// ValidateWorkload() of the parsed options.
absl::StatusOr<Workload> ValidateWorkload(const WorkloadArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_OPTIONS_H_

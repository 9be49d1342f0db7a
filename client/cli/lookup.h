// `tessel lookup KERNEL --shape DIMS`: the best known config for a workload, from a server (remote
// or embedded on --db) or, with --snapshot, from an exported snapshot file through libtessel.
#ifndef TESSEL_CLIENT_CLI_LOOKUP_H_
#define TESSEL_CLIENT_CLI_LOOKUP_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

struct LookupArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  ServerArgs backend;
  std::string snapshot;  // read this snapshot file instead of asking a server
  bool json = false;
};

// Adds the `lookup` subcommand to `app`, filling `args` when parsed.
CLI::App* AddLookupCommand(CLI::App& app, LookupArgs& args);
// Prints the answer (config, match level, time, provenance): one JSON object with --json.
// InvalidArgument for a bad workload; NotFound when nothing is known of the kernel.
absl::Status RunLookup(const LookupArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_LOOKUP_H_

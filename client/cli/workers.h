// `tessel workers`: list the workers registered with a server.
#ifndef TESSEL_CLIENT_CLI_WORKERS_H_
#define TESSEL_CLIENT_CLI_WORKERS_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

// Adds the `workers` subcommand to `app`, filling `args` when parsed.
CLI::App* AddWorkersCommand(CLI::App& app, ListArgs& args);
// Prints the workers as a table, or one JSON object {"workers": [...]} with --json.
absl::Status RunWorkers(const ListArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_WORKERS_H_

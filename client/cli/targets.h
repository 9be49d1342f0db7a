// `tessel targets`: the built-in targets (no server needed).
#ifndef TESSEL_CLIENT_CLI_TARGETS_H_
#define TESSEL_CLIENT_CLI_TARGETS_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

// Adds the `targets` subcommand to `app`, filling `args` when parsed.
CLI::App* AddTargetsCommand(CLI::App& app, JsonOnlyArgs& args);
// Prints each target file's name, version and description; one JSON object {"targets": [...]}
// with --json. The error of a target file that does not load.
absl::Status RunTargets(const JsonOnlyArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_TARGETS_H_

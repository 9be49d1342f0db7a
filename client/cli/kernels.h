// `tessel kernels`: the kernel registry (no server needed).
#ifndef TESSEL_CLIENT_CLI_KERNELS_H_
#define TESSEL_CLIENT_CLI_KERNELS_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

// Adds the `kernels` subcommand to `app`, filling `args` when parsed.
CLI::App* AddKernelsCommand(CLI::App& app, JsonOnlyArgs& args);
// Prints each kernel's version, description, dims, dtypes and the params of its example problem
// on the default target (kernels::DescribeKernel); one JSON object {"kernels": [...]} with --json.
absl::Status RunKernels(const JsonOnlyArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_KERNELS_H_

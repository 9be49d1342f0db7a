// `tessel simulate KERNEL --shape DIMS [--config ...]`: lower and simulate one config locally (no
// server).
#ifndef TESSEL_CLIENT_CLI_SIMULATE_H_
#define TESSEL_CLIENT_CLI_SIMULATE_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/common.h"

namespace tessel::cli {

struct SimulateArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  std::string config;  // empty: the kernel's default for the workload
  std::string trace;   // a Chrome trace-event file to write, when set
  double noise = 0;
  uint64_t seed = 0;
  bool exact = false;
  bool json = false;
};

// Adds the `simulate` subcommand to `app`, filling `args` when parsed.
CLI::App* AddSimulateCommand(CLI::App& app, SimulateArgs& args);
// Prints the simulated time, bound, roofline, engine use and memory peaks (sim::ResultJson's
// fields, one JSON object with --json). A config the kernel rejects is a result ("valid": false
// with the reason), not an error; InvalidArgument for a bad workload or --config.
absl::Status RunSimulate(const SimulateArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_SIMULATE_H_

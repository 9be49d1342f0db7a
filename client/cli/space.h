// `tessel space KERNEL --shape DIMS`: the size of a kernel's schedule space for one workload.
#ifndef TESSEL_CLIENT_CLI_SPACE_H_
#define TESSEL_CLIENT_CLI_SPACE_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tessel::cli {

struct SpaceArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = "bf16";
  std::string target = "snc2";
  // Spaces up to this many points are enumerated; larger ones are estimated by sampling.
  uint64_t enumerate_limit = 5'000'000;
  int samples = 200'000;
  bool json = false;
};

// Adds the `space` subcommand to `app`, filling `args` when parsed.
CLI::App* AddSpaceCommand(CLI::App& app, SpaceArgs& args);
// Prints size (full product), valid (exact count, or an estimate with "valid_estimated": true)
// and the params: one JSON object with --json, a short table otherwise. InvalidArgument for a bad
// kernel, shape, dtype or target.
absl::Status RunSpace(const SpaceArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_SPACE_H_

// `tessel replay`: benchmark search strategies on a recorded tuning space (Kernel Tuner cache).
#ifndef TESSEL_CLIENT_CLI_REPLAY_H_
#define TESSEL_CLIENT_CLI_REPLAY_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tessel::cli {

struct ReplayArgs {
  std::string cache;
  std::string strategy;  // empty: every strategy
  int budget = 200;
  int runs = 50;
  uint64_t seed = 1;
  std::string protocol = "constrained";
  bool noisy = false;
  std::string variant = "plain";
  int batch = 1;
  int threads = 1;
  bool json = false;
};

// Adds the `replay` subcommand to `app`, filling `args` when parsed.
CLI::App* AddReplayCommand(CLI::App& app, ReplayArgs& args);
// Runs it: one JSON object (or a table) on stdout. InvalidArgument / NotFound for bad input.
absl::Status RunReplay(const ReplayArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_REPLAY_H_

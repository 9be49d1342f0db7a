// `tessel tune KERNEL --shape DIMS`: submit a tuning job and follow it to its end (embedded server
// and worker threads unless --server).
#ifndef TESSEL_CLIENT_CLI_TUNE_H_
#define TESSEL_CLIENT_CLI_TUNE_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/common.h"
#include "search/stopping.h"

namespace tessel::cli {

struct TuneArgs {
  std::string kernel;
  std::string shape;
  std::string dtype = kDefaultDtype;
  std::string target = kDefaultTarget;
  std::string strategy;
  std::string effort = std::string(search::kDefaultEffort);  // a row of search::kEffortPresets
  int budget = 0;                                            // 0 = the effort's
  bool budget_set = false;  // --budget was given (then it must be positive)
  uint64_t seed = 1;
  std::string server;
  std::string db = kDefaultDb;
  int workers = 0;
  bool quiet = false;
  bool json = false;
  bool no_wait = false;          // submit, print the job, return (needs --server)
  bool cold_start = false;       // no warm start from earlier jobs of the kernel
  std::string time_limit = "0";  // early stops (0 = none); --time-limit as given
  int patience = 0;              // 0 = the effort's
  double target_ns = 0;
};

// Adds the `tune` subcommand to `app`, filling `args` when parsed.
CLI::App* AddTuneCommand(CLI::App& app, TuneArgs& args);
// Validates everything before any work, submits, follows the job and prints it (one JSON object
// with --json). Sets `exit_code` to 1 when the job does not complete.
absl::Status RunTune(const TuneArgs& args, int& exit_code);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_TUNE_H_

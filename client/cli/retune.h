// `tessel retune --stale`: re-measure the stored top configs of workloads whose published result
// was tuned under an older kernel or target version, instead of tuning them from zero.
#ifndef TESSEL_CLIENT_CLI_RETUNE_H_
#define TESSEL_CLIENT_CLI_RETUNE_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tessel::cli {

struct RetuneArgs {
  bool stale = false;
  int top_k = 8;
  std::vector<std::string> kernels;
  std::string server;
  std::string db;
  int workers = 0;
  bool quiet = false;
  bool json = false;
};

CLI::App* AddRetuneCommand(CLI::App& app, RetuneArgs& args);
// Fails when no workload was re-validated successfully while some were stale.
absl::Status RunRetune(const RetuneArgs& args, int& exit_code);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_RETUNE_H_

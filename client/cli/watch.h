// `tessel watch JOB`: follow an existing job to its end and print it as `tune` does.
#ifndef TESSEL_CLIENT_CLI_WATCH_H_
#define TESSEL_CLIENT_CLI_WATCH_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

struct WatchArgs {
  int64_t job = 0;
  ServerArgs backend;
  int workers = 0;  // embedded worker threads with --db (0 = hardware threads)
  bool quiet = false;
  bool json = false;
};

// Adds the `watch` subcommand to `app`, filling `args` when parsed.
CLI::App* AddWatchCommand(CLI::App& app, WatchArgs& args);
// With --db it runs embedded workers, so a job left unfinished by an earlier embedded run
// resumes. Sets `exit_code` to 1 when the job does not complete.
absl::Status RunWatch(const WatchArgs& args, int& exit_code);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_WATCH_H_

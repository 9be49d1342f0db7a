// `tessel jobs`: list tuning jobs, newest first.
#ifndef TESSEL_CLIENT_CLI_JOBS_H_
#define TESSEL_CLIENT_CLI_JOBS_H_

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cli/options.h"

namespace tessel::cli {

// Adds the `jobs` subcommand to `app`, filling `args` when parsed.
CLI::App* AddJobsCommand(CLI::App& app, ListArgs& args);
// Prints the jobs as a table, or one JSON object {"jobs": [...]} with --json.
absl::Status RunJobs(const ListArgs& args);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_JOBS_H_

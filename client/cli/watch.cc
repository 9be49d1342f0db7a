#include "client/cli/watch.h"

#include <memory>

#include "client/cli/common.h"
#include "client/cli/job_report.h"

namespace tessel::cli {

namespace v1 = tessel::v1;

CLI::App* AddWatchCommand(CLI::App& app, WatchArgs& args) {
  CLI::App* cmd =
      app.add_subcommand("watch", "follow a job to its end and print it as `tune` does");
  cmd->add_option("job", args.job, "job id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--workers", args.workers,
                  "embedded worker threads with --db (default: hardware threads)");
  cmd->add_flag("-q,--quiet", args.quiet, "no progress on stderr");
  cmd->add_flag("--json", args.json, "print one JSON object");
  AddServerOptions(cmd, args.backend);
  return cmd;
}

absl::Status RunWatch(const WatchArgs& args, int& exit_code) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.backend.server, args.backend.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  EmbeddedWorkers embedded;
  if (absl::Status started = embedded.Start(**backend, args.workers); !started.ok()) {
    return started;
  }
  absl::StatusOr<v1::Job> job =
      SubmitAndWatch(*(*backend)->client, v1::SubmitJobRequest(), !args.quiet, args.job);
  embedded.Stop();
  if (!job.ok()) return job.status();
  if (args.json) {
    PrintJson(JobJson(*job));
  } else {
    PrintTuneSummary(*job);
  }
  if (job->state() != v1::JOB_COMPLETED) exit_code = kExitFailure;
  return absl::OkStatus();
}

}  // namespace tessel::cli

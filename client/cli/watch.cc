// `tessel watch JOB`: follow an existing job to its end and print it as `tune` does.
#include <cstdint>
#include <memory>

#include "client/cli/command.h"
#include "client/cli/job_report.h"
#include "client/cli/options.h"
#include "schema/status_macros.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;

class WatchCommand final : public Command {
 public:
  WatchCommand()
      : Command("watch", "follow a job to its end and print it as `tune` does",
                "tessel watch 12 --server localhost:7070") {}

  // With --db it runs embedded workers, so a job left unfinished by an earlier embedded run
  // resumes. Sets `exit_code` to 1 when the job does not complete.
  absl::Status Run(int& exit_code) override {
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    EmbeddedWorkers embedded;
    TESSEL_RETURN_IF_ERROR(embedded.Start(*backend, workers_));
    absl::StatusOr<v1::Job> job =
        SubmitAndWatch(*backend->client, v1::SubmitJobRequest(), !quiet_, job_);
    embedded.Stop();
    if (!job.ok()) return job.status();
    if (json_) {
      PrintJson(JobJson(*job));
    } else {
      PrintTuneSummary(*job);
    }
    if (job->state() != v1::JOB_COMPLETED) exit_code = kExitFailure;
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("job", job_, "job id")->required()->check(PositiveInteger());
    command.add_option("--workers", workers_,
                       "embedded worker threads with --db (default: hardware threads)");
    command.add_flag("-q,--quiet", quiet_, "no progress on stderr");
    AddServerOptions(command, backend_);
  }

  int64_t job_ = 0;
  ServerArgs backend_;
  int workers_ = 0;  // embedded worker threads with --db (0 = hardware threads)
  bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> NewWatchCommand() { return std::make_unique<WatchCommand>(); }

}  // namespace tessel::cli

// `tessel cancel JOB`: cancel a queued or running job; its running trials stop on their workers.
#include <cstdint>
#include <iostream>
#include <memory>

#include "client/cli/command.h"
#include "client/cli/job_report.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;

class CancelCommand final : public Command {
 public:
  CancelCommand()
      : Command("cancel", "cancel a queued or running job",
                "tessel cancel 12 --server localhost:7070") {}

  // Prints the cancelled job (one JSON object with --json). A finished job is an error naming
  // its state (FailedPrecondition), an unknown one NotFound.
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const v1::Job job, backend->client->CancelJob(job_));
    if (json_) {
      PrintJson(JobJson(job));
    } else {
      std::cout << fmt::format("job {} {}: {} of {} trials were charged\n", job.id(),
                               client::JobStateName(job.state()), job.trials().total(),
                               job.budget());
    }
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("job", job_, "job id")->required()->check(PositiveInteger());
    AddServerOptions(command, backend_);
  }

  int64_t job_ = 0;
  ServerArgs backend_;
};

}  // namespace

std::unique_ptr<Command> NewCancelCommand() { return std::make_unique<CancelCommand>(); }

}  // namespace tessel::cli

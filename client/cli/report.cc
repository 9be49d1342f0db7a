// `tessel report JOB --html FILE`: a job's page (convergence, trial times, the best config's
// bottleneck and engine timeline, fastest trials) as one standalone HTML file to attach to a
// review.
#include <cstdio>
#include <fstream>
#include <string>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "server/dashboard.h"

namespace tessel::cli {
namespace {

class ReportCommand final : public Command {
 public:
  ReportCommand()
      : Command("report", "write a job's page as one standalone HTML file",
                "tessel report 12 --html job12.html --server localhost:7070") {}

  // Writes the file (atomically) and prints its path ({"job_id", "html"} with --json).
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const v1::Job job, backend->client->GetJob(job_));
    TESSEL_ASSIGN_OR_RETURN(const std::vector<v1::TrialResult> trials,
                            backend->client->ListTrials(job_));
    server::TrialDigest digest;
    for (const v1::TrialResult& trial : trials) digest.Add(trial);
    const std::string page = server::StandaloneJobPage(server::JobPageData(job, digest));
    const std::string tmp = html_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
      if (!out) return absl::UnavailableError(StrCat("cannot write ", tmp));
      out << page;
      if (!out.flush()) return absl::DataLossError(StrCat("failed writing ", tmp));
    }
    if (std::rename(tmp.c_str(), html_.c_str()) != 0) {
      std::remove(tmp.c_str());
      return absl::UnavailableError(StrCat("cannot rename ", tmp, " to ", html_));
    }
    if (json_) {
      PrintJson({{"job_id", job_}, {"html", html_}, {"bytes", page.size()}});
    } else {
      std::printf("wrote %s (%zu bytes; opens offline in any browser)\n", html_.c_str(),
                  page.size());
    }
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command.add_option("job", job_, "job id")->required()->check(PositiveInteger());
    command.add_option("--html", html_, "the HTML file to write")->required();
    AddServerOptions(command, backend_);
  }

  ServerArgs backend_;
  int64_t job_ = 0;
  std::string html_;
};

}  // namespace

std::unique_ptr<Command> NewReportCommand() { return std::make_unique<ReportCommand>(); }

}  // namespace tessel::cli

// How `tessel tune` and `tessel watch` report a job: its JSON object, the human summary, progress
// lines on stderr, and following a job to its end.
#ifndef TESSEL_CLIENT_CLI_JOB_REPORT_H_
#define TESSEL_CLIENT_CLI_JOB_REPORT_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "nlohmann/json.hpp"
#include "schema/tessel.pb.h"

namespace tessel::cli {

// The job as the CLI contract's JSON object (job_id, kernel, shape, ..., best, default, trials,
// speedup_vs_default, roofline_fraction; null where unknown).
nlohmann::json JobJson(const tessel::v1::Job& job);

// Prints the job's human summary on stdout (state, counts, best, default, speedup, roofline).
void PrintTuneSummary(const tessel::v1::Job& job);

// Shows a job's progress on stderr. On a terminal: one live bar redrawn in place (trials/budget,
// best so far, speedup over the default, trials/s, ETA), ended with a newline at the final state.
// Elsewhere (a pipe, a file, TERM=dumb): a plain line when the counts change, at most four per
// second, and always the final state. Prints nothing when disabled.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool enabled);
  void Update(const tessel::v1::Job& job);

 private:
  void Bar(const tessel::v1::Job& job, bool final);

  bool enabled_;
  bool tty_;
  std::string last_line_;
  std::chrono::steady_clock::time_point last_print_{};
  std::chrono::steady_clock::time_point first_seen_{};
  int64_t first_total_ = -1;  // trials when first seen (the rate counts this run's only)
};

// Submits `request` on `client` and watches the job to a final state, with progress on stderr
// when `progress`. With `existing_job` > 0 nothing is submitted: that job is watched instead.
// Unavailable when the stream ends before a final state and the job is still not final. With
// `stop_when_paused`, ResourceExhausted with the reason as soon as the server says the job is
// paused (its database cannot be written); otherwise the pause is shown and watching goes on.
absl::StatusOr<tessel::v1::Job> SubmitAndWatch(client::Client& client,
                                               const tessel::v1::SubmitJobRequest& request,
                                               bool progress, int64_t existing_job = 0,
                                               bool stop_when_paused = false);

}  // namespace tessel::cli

#endif  // TESSEL_CLIENT_CLI_JOB_REPORT_H_

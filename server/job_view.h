// The job view: the one fold that turns a job's record and its measured trials into the v1::Job
// clients see, for a job the scheduler holds in memory and for one read back from the store alike.
// The rules of counting live here once: how a result is counted (with the budget rule of
// schema/vocab.h) and when a job's results are stale. Depends on the wire and the store's records
// only.
#ifndef TESSEL_SERVER_JOB_VIEW_H_
#define TESSEL_SERVER_JOB_VIEW_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"
#include "schema/vocab.h"
#include "server/store.h"

namespace tessel::server {

namespace v1 = ::tessel::v1;

// Adds one result of an ordinary (not verification) trial to `counts`: retried when not charged,
// else total and one of ok, invalid or failed.
void CountResult(TrialStatus status, v1::TrialCounts& counts);

// One measured config as a job view shows it.
struct MeasuredConfig {
  std::string config;
  double time_ns = 0;
  int64_t trial_id = 0;
  double time_ci_ns = 0;  // after noise-aware promotion (v1::Measurement)
  int samples = 0;
};

// What a job's trials add up to so far.
struct JobProgress {
  v1::TrialCounts counts;                        // pending included
  std::optional<MeasuredConfig> best;            // the job's best (the published one once final)
  std::optional<MeasuredConfig> default_result;  // the default config's measurement, when OK
};

// The view of a job: its record, its progress and whether its versions are stale (the kernel or
// target changed version since the job measured).
v1::Job JobView(const JobRecord& record, const JobProgress& progress);

// The progress of a job that is not in memory, folded from its stored trials: a completed job's
// best is its fastest verified config, as published; otherwise its fastest OK config.
// A completed job that `published` a best (Store::BestsPublishedBy) shows that one, as its live
// view did: the promoted winner with its interval, not the fastest search result.
JobProgress ProgressFromTrials(const JobRecord& record, std::span<const TrialSummary> trials,
                               const BestRecord* published = nullptr);

// The view of a job as stored: from its record and trials. NotFound when absent.
absl::StatusOr<v1::Job> StoredJobView(Store& store, int64_t job_id);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_JOB_VIEW_H_

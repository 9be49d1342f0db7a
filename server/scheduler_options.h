// The options and callback types that the scheduler and its parts (job manager, lease table,
// watchers) share. Plain data; depends on the wire types only.
#ifndef TESSEL_SERVER_SCHEDULER_OPTIONS_H_
#define TESSEL_SERVER_SCHEDULER_OPTIONS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"

namespace tessel::server {

namespace v1 = ::tessel::v1;

class Metrics;

struct SchedulerOptions {
  // Metrics to feed (trial times, lookups), when set; must outlive the scheduler.
  Metrics* metrics = nullptr;
  int lease_ms = 60000;              // a leased trial not reported by then is WORKER_LOST
  int heartbeat_interval_ms = 1000;  // a worker silent for 3 intervals is lost
  // Queued + leased trials of one job at a time, at most. A job keeps one proposal ready per
  // alive slot beyond what workers hold, and workers hold as many as cover a report's round
  // trip (2 per slot for trials of 10 ms or more, up to kMaxLeaseDepthPerSlot for short ones).
  // Proposing further ahead would make the strategy choose configs without the results it
  // could have had.
  int max_in_flight_per_job = 64;
  int repeats = 3;  // measurement protocol sent to workers
  int warmup = 1;
  double noise_sigma = 0;
  std::string verify = "never";  // policy for ordinary trials; the best is always verified
  // Noise-aware promotion: with noise (noise_sigma > 0, or a best whose samples spread more than
  // kNoisySpread), the top this-many candidates race: each round re-measures every candidate
  // still racing with promote_repeats runs, and a candidate whose 95% confidence interval lies
  // above the leader's leaves; after promote_rounds rounds (or one survivor) the lowest trimmed
  // mean wins. promote_top 0 turns it off.
  int promote_top = 12;
  int promote_repeats = 10;
  int promote_rounds = 8;
  int housekeeping_ms = 50;  // how often expired leases and parked calls are checked
};

using LeaseCallback = std::function<void(absl::StatusOr<v1::LeaseResponse>)>;
using ReportCallback = std::function<void(absl::StatusOr<v1::ReportResponse>)>;
// Receives job events; returns false to stop watching. Called from scheduler threads, one event
// at a time per watch, never with internal locks held.
using JobListener = std::function<bool(const v1::JobEvent&)>;

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SCHEDULER_OPTIONS_H_

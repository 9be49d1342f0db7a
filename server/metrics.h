// Prometheus metrics of a tessel-server (issue 18): what the process observes as it runs (RPC
// latency by method, SQLite commit latency, trial times, lookups by match level and source) and
// what it reads at scrape time (trials by status and target, jobs by state, ready trials, leases
// outstanding, workers alive), rendered in the Prometheus text exposition format 0.0.4.
// Depends on nothing else of server/, so the store, the catalog and the services can all feed it.
#ifndef TESSEL_SERVER_METRICS_H_
#define TESSEL_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessel::server {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends NAME_bucket{LABELS,le="..."}, NAME_sum and NAME_count lines; `labels` is empty or
  // `key="value",...` without braces.
  void Render(std::string_view name, std::string_view labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// Values read at scrape time.
struct MetricsSnapshot {
  std::map<std::pair<std::string, std::string>, int64_t> trials;  // (target, status) -> count
  std::map<std::string, int64_t> jobs;                            // state -> count
  int64_t ready_trials = 0;                                       // proposed, waiting for a worker
  int64_t leases_outstanding = 0;                                 // leased, not yet reported
  int64_t workers_alive = 0;
};

class Metrics {
 public:
  Metrics();
  // An RPC's handling time; `method` is the short name ("Lookup"), `code` its gRPC code name.
  void ObserveRpc(std::string_view method, std::string_view code, double seconds);
  void ObserveCommit(double seconds);     // one SQLite write transaction's commit
  void ObserveTrialTime(double seconds);  // an OK trial's measured kernel time
  void CountLookup(std::string_view match, std::string_view source);  // source: cache | store
  // Every metric, with `now`'s values, as Prometheus text.
  std::string Render(const MetricsSnapshot& now) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, Histogram> rpc_ ABSL_GUARDED_BY(mu_);
  Histogram commit_ ABSL_GUARDED_BY(mu_);
  Histogram trial_time_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int64_t> lookups_ ABSL_GUARDED_BY(mu_);
};

// A label value escaped for the text format (backslash, double quote and newline).
std::string EscapeLabel(std::string_view value);

}  // namespace tessel::server

#endif  // TESSEL_SERVER_METRICS_H_

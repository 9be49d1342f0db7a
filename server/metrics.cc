#include "server/metrics.h"

#include <algorithm>

#include "fmt/format.h"

namespace tessel::server {
namespace {

// 10 us .. ~10 s, x~3 per step: RPCs and commits.
std::vector<double> LatencyBounds() {
  return {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10};
}
// 1 us .. 1 s simulated kernel times, x~3 per step.
std::vector<double> TrialBounds() {
  return {1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1};
}

void Header(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t at =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[at];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string_view name, std::string_view labels, std::string* out) const {
  const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, sep, bounds_[i], cumulative);
  }
  *out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, sep, count_);
  const std::string braces = labels.empty() ? "" : fmt::format("{{{}}}", labels);
  *out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_, name, braces, count_);
}

Metrics::Metrics() : commit_(LatencyBounds()), trial_time_(TrialBounds()) {}

void Metrics::ObserveRpc(std::string_view method, std::string_view code, double seconds) {
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(std::string(method), std::string(code));
  auto it = rpc_.find(key);
  if (it == rpc_.end()) it = rpc_.emplace(std::move(key), Histogram(LatencyBounds())).first;
  it->second.Observe(seconds);
}

void Metrics::ObserveCommit(double seconds) {
  absl::MutexLock lock(&mu_);
  commit_.Observe(seconds);
}

void Metrics::ObserveTrialTime(double seconds) {
  absl::MutexLock lock(&mu_);
  trial_time_.Observe(seconds);
}

void Metrics::CountLookup(std::string_view match, std::string_view source) {
  absl::MutexLock lock(&mu_);
  ++lookups_[{std::string(match), std::string(source)}];
}

std::string Metrics::Render(const MetricsSnapshot& now) const {
  std::string out;
  Header(&out, "tessel_trials_total", "counter",
         "Trials stored, by the job's target and the trial's status.");
  for (const auto& [key, count] : now.trials) {
    out += fmt::format("tessel_trials_total{{target=\"{}\",status=\"{}\"}} {}\n",
                       EscapeLabel(key.first), EscapeLabel(key.second), count);
  }
  Header(&out, "tessel_jobs", "gauge", "Jobs by state.");
  for (const auto& [state, count] : now.jobs) {
    out += fmt::format("tessel_jobs{{state=\"{}\"}} {}\n", EscapeLabel(state), count);
  }
  Header(&out, "tessel_queue_depth", "gauge", "Proposed trials waiting for a worker.");
  out += fmt::format("tessel_queue_depth {}\n", now.ready_trials);
  Header(&out, "tessel_leases_outstanding", "gauge", "Trials leased to workers, not reported.");
  out += fmt::format("tessel_leases_outstanding {}\n", now.leases_outstanding);
  Header(&out, "tessel_workers_alive", "gauge", "Workers heard from recently.");
  out += fmt::format("tessel_workers_alive {}\n", now.workers_alive);
  absl::MutexLock lock(&mu_);
  Header(&out, "tessel_trial_time_seconds", "histogram",
         "Measured kernel time of OK trials (simulated), in seconds.");
  trial_time_.Render("tessel_trial_time_seconds", "", &out);
  Header(&out, "tessel_lookups_total", "counter",
         "Lookups answered, by match level and source (cache or store).");
  for (const auto& [key, count] : lookups_) {
    out += fmt::format("tessel_lookups_total{{match=\"{}\",source=\"{}\"}} {}\n",
                       EscapeLabel(key.first), EscapeLabel(key.second), count);
  }
  Header(&out, "tessel_sqlite_commit_seconds", "histogram",
         "Time to commit one SQLite write transaction (a batch of writes).");
  commit_.Render("tessel_sqlite_commit_seconds", "", &out);
  Header(&out, "tessel_rpc_seconds", "histogram", "gRPC handling time by method and status code.");
  for (const auto& [key, histogram] : rpc_) {
    histogram.Render(
        "tessel_rpc_seconds",
        fmt::format("method=\"{}\",code=\"{}\"", EscapeLabel(key.first), EscapeLabel(key.second)),
        &out);
  }
  return out;
}

}  // namespace tessel::server

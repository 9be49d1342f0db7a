#include "server/watchers.h"

#include <utility>

#include "server/wire.h"

namespace tessel::server {

absl::StatusOr<int64_t> Watchers::Watch(int64_t job_id, bool follow, JobListener listener,
                                        const ViewFn& view) {
  int64_t watch_id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("server is shutting down");
    watch_id = next_watch_id_++;
    if (follow) watches_[watch_id] = Entry{job_id, listener};
  }
  absl::StatusOr<v1::Job> first = view();
  if (!first.ok()) {
    Unwatch(watch_id);
    return first.status();
  }
  absl::MutexLock notify_lock(&notify_mu_);
  // Re-read under notify_mu_ so this first event is never older than one already sent.
  absl::StatusOr<v1::Job> latest = view();
  v1::JobEvent event;
  *event.mutable_job() = latest.ok() ? *std::move(latest) : *std::move(first);
  if (!listener(event) || IsFinal(event.job().state())) Unwatch(watch_id);
  return watch_id;
}

void Watchers::Unwatch(int64_t watch_id) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch_id);
}

void Watchers::Notify(int64_t job_id, const std::function<std::optional<v1::Job>()>& view,
                      const std::vector<v1::TrialResult>& new_trials) {
  absl::MutexLock notify_lock(&notify_mu_);
  std::optional<v1::Job> job = view();
  if (!job) return;
  std::vector<std::pair<int64_t, JobListener>> listeners;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [watch_id, watch] : watches_) {
      if (watch.job_id == job_id) listeners.emplace_back(watch_id, watch.listener);
    }
  }
  v1::JobEvent event;
  *event.mutable_job() = *std::move(job);
  for (const v1::TrialResult& t : new_trials) *event.add_new_trials() = t;
  const bool final_state = IsFinal(event.job().state());
  std::vector<int64_t> done;
  for (auto& [watch_id, listener] : listeners) {
    if (!listener(event) || final_state) done.push_back(watch_id);
  }
  if (done.empty()) return;
  absl::MutexLock lock(&mu_);
  for (int64_t id : done) watches_.erase(id);
}

void Watchers::Close() {
  std::map<int64_t, Entry> dropped;
  absl::MutexLock lock(&mu_);
  closed_ = true;
  dropped.swap(watches_);
}

}  // namespace tessel::server

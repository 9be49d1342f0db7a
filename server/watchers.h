// Watch fan-out: who watches which job, and the delivery of job events to them in order. Knows no
// jobs: the caller passes a function that reads a job's current view. Thread-safe.
//
// Lock order: notify_mu_ (held while events are delivered, so each watch sees events in order)
// before whatever the view function locks, before mu_ (the registry).
#ifndef TESSEL_SERVER_WATCHERS_H_
#define TESSEL_SERVER_WATCHERS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "schema/tessel.pb.h"
#include "server/scheduler_options.h"

namespace tessel::server {

class Watchers {
 public:
  // Reads a job's current view; nullopt (or an error) when there is nothing to send.
  using ViewFn = std::function<absl::StatusOr<v1::Job>()>;

  Watchers() = default;
  Watchers(const Watchers&) = delete;
  Watchers& operator=(const Watchers&) = delete;

  // Sends `listener` the job's view at once, and keeps it for the events Notify sends for
  // `job_id` when `follow` (the job may still change) and the first event was not final and the
  // listener did not return false. Returns the watch id, the view's error (nothing kept), or
  // Unavailable after Close.
  absl::StatusOr<int64_t> Watch(int64_t job_id, bool follow, JobListener listener,
                                const ViewFn& view) ABSL_LOCKS_EXCLUDED(notify_mu_, mu_);
  void Unwatch(int64_t watch_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Sends the job's view (skipped when `view` gives nullopt) with `new_trials` to every watch of
  // `job_id`; a watch ends when its listener returns false or the event is final.
  void Notify(int64_t job_id, const std::function<std::optional<v1::Job>()>& view,
              const std::vector<v1::TrialResult>& new_trials) ABSL_LOCKS_EXCLUDED(notify_mu_, mu_);

  // Drops every watch without calling it; later Watch calls fail. Idempotent.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    int64_t job_id = 0;
    JobListener listener;
  };

  absl::Mutex notify_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // serialises listener calls
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Entry> watches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_WATCHERS_H_

// The scheduler: turns jobs into trials, leases them to workers, records what comes back, and
// finishes a job (verifying and publishing its best config) when its budget is spent.
//
//   Submit -> job (default config first, then strategy proposals) -> queue -> Lease -> worker
//   worker -> Report -> store (committed) -> strategy.Observe -> more proposals ... -> verify best
//   -> Publish -> job completed
//
// Trials that a worker lost (lease expired, worker silent) or that were cancelled are recorded
// with that status, re-queued under a new trial id, and not charged to the budget.
//
// A facade over its parts (server/*.h, one-way, lowest first): wire (conversions), job_view (the
// one fold from a job to its v1::Job), watchers (watch fan-out), catalog (lookup, export, import,
// publication), lease_table (workers, leases, heartbeats, parked calls; knows no jobs) and
// job_manager (job lifecycle; knows no workers). The facade alone joins the last two: it takes
// trials from the job manager into the lease table and hands results back to the job manager.
// All public methods are thread-safe. Callbacks passed in are called without internal locks held.
#ifndef TESSEL_SERVER_SCHEDULER_H_
#define TESSEL_SERVER_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "schema/tessel.pb.h"
#include "server/scheduler_options.h"

namespace tessel::server {

class Store;

class Scheduler {
 public:
  // Recovers jobs the store has as queued or running (replaying their stored trials into a fresh
  // strategy and early-stop tracker; a job whose early stop was reached finishes) and starts the
  // housekeeping thread. `store` must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(Store* store,
                                                           const SchedulerOptions& options);
  ~Scheduler();  // Shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Drain (SIGTERM): from here Lease and SubmitJob answer UNAVAILABLE (parked leases at once),
  // while reports of trials already leased are still taken and committed. Everything else
  // serves as before.
  void BeginDrain();
  // Trials leased and not yet reported or expired: the drain waits for this to reach 0.
  size_t OutstandingLeases();
  // Live figures for metrics and the dashboard.
  struct Stats {
    int64_t queued_trials = 0;       // proposed, waiting for a worker
    int64_t leases_outstanding = 0;  // leased, not yet reported
    int64_t workers_alive = 0;
  };
  Stats CurrentStats();

  // ---- client side ----
  // InvalidArgument for an unknown kernel, target, strategy, dtype or effort, a bad shape or
  // budget, or a negative early stop (each message names the field). An effort preset
  // (search::kEffortPresets) fills the budget and stop_after_no_improvement where they are 0.
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::Job> GetJob(int64_t job_id);  // NotFound when absent
  // Newest first, at most `limit`; with `before_id` > 0, only jobs older than it (a page).
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit, int64_t before_id = 0);
  // Cancels a queued or running job (its pending trials become CANCELLED); a finished job is
  // returned unchanged with FailedPrecondition.
  absl::StatusOr<v1::Job> Cancel(int64_t job_id);
  // The job's trials by id ascending: those above `after_id`, at most `limit` (all when 0).
  // NotFound for an unknown job.
  absl::StatusOr<std::vector<v1::TrialResult>> ListTrials(int64_t job_id, int64_t after_id = 0,
                                                          int limit = 0);
  // Graded lookup (see Catalog::Lookup).
  absl::StatusOr<v1::LookupResponse> Lookup(const v1::LookupRequest& request);
  // The newest publication of every workload (of the named kernels; all when none), with the
  // current kernel/target versions and each kernel's default configs. InvalidArgument for an
  // unknown kernel name.
  absl::StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request);
  // Publishes imported results. Idempotent: a record equal (config, versions, time) to the newest
  // publication of its workload is left alone. InvalidArgument (nothing imported) when any record
  // names an unknown kernel or target, or has an empty config or a non-positive time.
  absl::StatusOr<v1::ImportResponse> Import(const v1::ImportRequest& request);
  // Sends the job's current state at once, then every change until the job is final (the last
  // event carries the final state) or the listener returns false. Returns a watch id for Unwatch.
  absl::StatusOr<int64_t> Watch(int64_t job_id, JobListener listener);
  void Unwatch(int64_t watch_id);
  std::vector<v1::WorkerInfo> ListWorkers();

  // ---- worker side ----
  // `credential`: the fingerprint of the caller's named token (server/auth.h, Caller; '' for an
  // unnamed token or without tokens). A credential that a quarantined worker registered with
  // registers no new worker (PERMISSION_DENIED), also after a restart.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request,
                                                const std::string& credential = "");
  // Answers at once when trials are ready, else when some arrive or wait_ms passes (empty).
  void Lease(const v1::LeaseRequest& request, LeaseCallback done);
  // Answers after every accepted result is committed to the store.
  void Report(const v1::ReportRequest& request, ReportCallback done);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);

  // Answers parked calls, ends watches, stops background work. Idempotent.
  void Shutdown();

 private:
  class Impl;
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SCHEDULER_H_

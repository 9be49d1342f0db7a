// The scheduler: turns jobs into trials, leases them to workers, records what comes back, and
// finishes a job (verifying and publishing its best config) when its budget is spent.
//
//   Submit -> job (default config first, then strategy proposals) -> queue -> Lease -> worker
//   worker -> Report -> store (committed) -> strategy.Observe -> more proposals ... -> verify best
//   -> Publish -> job completed
//
// Trials that a worker lost (lease expired, worker silent) or that were cancelled are recorded
// with that status, re-queued under a new trial id, and not charged to the budget.
// All public methods are thread-safe. Callbacks passed in are called without internal locks held.
#ifndef TESSEL_SERVER_SCHEDULER_H_
#define TESSEL_SERVER_SCHEDULER_H_

#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "schema/tessel.pb.h"
#include "search/stopping.h"
#include "search/strategy.h"
#include "server/convert.h"
#include "server/store.h"
#include "sim/target.h"

namespace tessel::server {

struct SchedulerOptions {
  int lease_ms = 60000;              // a leased trial not reported by then is WORKER_LOST
  int heartbeat_interval_ms = 1000;  // a worker silent for 3 intervals is lost
  // Queued + leased trials of one job at a time: twice the alive workers' slots (one running and
  // one ready per slot), at least 2, at most this. Proposing further ahead would make the
  // strategy choose configs without the results it could have had.
  int max_in_flight_per_job = 64;
  int repeats = 3;  // measurement protocol sent to workers
  int warmup = 1;
  double noise_sigma = 0;
  std::string verify = "never";  // policy for ordinary trials; the best is always verified
  int housekeeping_ms = 50;      // how often expired leases and parked calls are checked
};

using LeaseCallback = std::function<void(absl::StatusOr<v1::LeaseResponse>)>;
using ReportCallback = std::function<void(absl::StatusOr<v1::ReportResponse>)>;
// Receives job events; returns false to stop watching. Called from scheduler threads, one event
// at a time per watch, never with internal locks held.
using JobListener = std::function<bool(const v1::JobEvent&)>;

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

  // ---- client side ----
  // InvalidArgument for an unknown kernel, target, strategy, dtype or effort, a bad shape or
  // budget, or a negative early stop (each message names the field). An effort preset
  // (search::kEffortPresets) fills the budget and stop_after_no_improvement where they are 0.
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::Job> GetJob(int64_t job_id);  // NotFound when absent
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit);
  // Cancels a queued or running job (its pending trials become CANCELLED); a finished job is
  // returned unchanged with FailedPrecondition.
  absl::StatusOr<v1::Job> Cancel(int64_t job_id);
  absl::StatusOr<std::vector<v1::TrialResult>> ListTrials(int64_t job_id);
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
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  // Answers at once when trials are ready, else when some arrive or wait_ms passes (empty).
  void Lease(const v1::LeaseRequest& request, LeaseCallback done);
  // Answers after every accepted result is committed to the store.
  void Report(const v1::ReportRequest& request, ReportCallback done);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);

  // Answers parked calls, ends watches, stops background work. Idempotent.
  void Shutdown();

 private:
  struct PendingTrial {
    int64_t id = 0;
    Config config;
    bool is_default = false;
    bool verify_final = false;  // re-measure of a best candidate with verification forced
  };
  struct LeasedTrial {
    PendingTrial trial;
    int64_t job_id = 0;
    std::string worker_id;
    int64_t deadline_ms = 0;
  };
  struct Candidate {  // an OK measurement that may become the job's best
    double time_ns = 0;
    Config config;
    int64_t trial_id = 0;
    bool verified = false;
  };
  // The order candidates are published in: faster first; of equal times, the one proposed first
  // (trial ids follow proposal order), so the result does not depend on which worker reported
  // first.
  static bool Faster(const Candidate& a, const Candidate& b);
  enum class Phase { kSearching, kVerifying, kDone };
  struct Job {
    JobRecord record;
    const kernels::Kernel* kernel = nullptr;
    sim::Target target;
    kernels::Problem problem;
    std::unique_ptr<kernels::Space> space;
    std::unique_ptr<search::Strategy> strategy;
    Phase phase = Phase::kSearching;
    std::deque<PendingTrial> queue;
    int leased = 0;
    int charged = 0;  // results charged to the budget
    v1::TrialCounts counts;
    absl::flat_hash_set<std::string> tried;  // configs queued or measured
    std::vector<Candidate> candidates;       // OK results, best first once finishing
    std::optional<Candidate> best;           // best OK result so far
    std::optional<Candidate> default_result;
    std::optional<Candidate> published;
    bool running_persisted = false;
    bool strategy_exhausted = false;  // Propose returned nothing
    bool cancelled = false;
    int rejected = 0;                         // best candidates that failed verification
    std::string default_message;              // why the default config failed, if it did
    std::optional<search::StopTracker> stop;  // early-stop rules of the record, if any
    std::string stop_reason;                  // set when an early stop ended the search
  };
  struct ParkedLease {
    v1::LeaseRequest request;
    LeaseCallback done;
    int64_t deadline_ms = 0;
  };
  struct Worker {
    v1::WorkerInfo info;
    bool lost = false;
  };
  struct Watcher {
    int64_t job_id = 0;
    JobListener listener;
  };
  // Work to do after the lock is released.
  struct Effects {
    std::vector<std::pair<LeaseCallback, v1::LeaseResponse>> leases;
    std::vector<TrialRecord> trials_to_store;
    std::vector<int64_t> finished_jobs;
    std::vector<int64_t> changed_jobs;
    std::vector<int64_t> running_jobs;  // persist queued -> running
  };

  Scheduler(Store* store, const SchedulerOptions& options);
  absl::Status Recover();
  // A job with nothing measured yet: its space, strategy and early-stop tracker (time limit
  // counted from record.created_ms).
  absl::StatusOr<std::unique_ptr<Job>> BuildJob(const JobRecord& record);
  // As BuildJob(record), with the workload already resolved (Submit resolved it to check it).
  absl::StatusOr<std::unique_ptr<Job>> BuildJob(const JobRecord& record, ResolvedWorkload resolved);
  // Seeds the job's strategy with the measured trials of recent completed neighbour jobs (same
  // kernel, dtype and kernel version). Returns how many neighbours were used.
  int WarmStart(Job& job);

  // REQUIRES: mu_ held.
  void Refill(Job& job, Effects& effects);
  // Trials one job may have queued or leased now (see Options::max_in_flight_per_job).
  int InFlightLimit() const;
  void Finalize(Job& job, Effects& effects);
  void ServeParked(Effects& effects);
  std::vector<v1::TrialSpec> TakeTrials(const std::string& worker_id, int max_trials,
                                        Effects& effects);
  void ApplyResult(Job& job, const PendingTrial& trial, const v1::TrialResult& result,
                   Effects& effects);
  // As ApplyResult; with refill false (replaying stored trials) it neither proposes nor re-queues.
  void ApplyResultLocked(Job& job, const PendingTrial& trial, const v1::TrialResult& result,
                         Effects& effects, bool refill);
  TrialRecord RecordFor(const Job& job, const PendingTrial& trial, const std::string& status,
                        const std::string& message) const;
  void ExpireLease(int64_t trial_id, const std::string& why, Effects& effects);
  v1::Job JobView(const Job& job) const;
  // The view of a job held in memory (running, or finished while this server ran); mu_ held.
  std::optional<v1::Job> MemoryJobViewLocked(int64_t job_id) const;
  v1::TrialSpec SpecFor(const Job& job, const PendingTrial& trial) const;

  // Runs effects: store writes, publication, callbacks, watcher notifications. Not under mu_.
  void Apply(Effects effects);
  void FinishJob(int64_t job_id);
  void Notify(int64_t job_id, const std::vector<v1::TrialResult>& new_trials);
  void Housekeeping();
  // A job that is not in memory, as stored (NotFound when absent); from its record and trials.
  absl::StatusOr<v1::Job> StoredJobView(int64_t job_id);
  static v1::Job StoredJobView(const JobRecord& record, const std::vector<TrialRecord>& trials);

  absl::StatusOr<v1::LookupResponse> LookupUncached(const ResolvedWorkload& resolved,
                                                    const WorkloadRecord& workload,
                                                    int64_t snapshot_id);
  // Call after every store Publish: drops cached lookup answers.
  void InvalidateLookups();

  Store* const store_;
  const SchedulerOptions options_;
  boost::asio::thread_pool pool_{2};  // report commits and notifications

  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_ = false;                         // guarded by mu_
  int64_t next_trial_id_ = 1;                     // guarded by mu_
  int64_t next_watch_id_ = 1;                     // guarded by mu_
  int64_t next_worker_seq_ = 1;                   // guarded by mu_
  std::map<int64_t, std::unique_ptr<Job>> jobs_;  // active jobs; guarded by mu_
  std::map<int64_t, v1::Job> finished_;           // final views; guarded by mu_
  std::map<int64_t, LeasedTrial> leases_;         // by trial id; guarded by mu_
  std::deque<ParkedLease> parked_;                // guarded by mu_
  std::map<std::string, Worker> workers_;         // guarded by mu_
  std::map<int64_t, Watcher> watchers_;           // guarded by mu_
  std::mutex notify_mu_;                          // serialises listener calls
  std::mutex lookup_mu_;
  std::map<std::string, v1::LookupResponse> lookup_cache_;  // guarded by lookup_mu_
  uint64_t publish_generation_ = 0;                         // guarded by lookup_mu_
  std::thread housekeeping_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_SCHEDULER_H_

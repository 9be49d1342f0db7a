// The job manager: the life of every job the scheduler holds in memory. It builds a job from its
// record (space, strategy, early stops), warm-starts it from neighbours, recovers unfinished jobs
// after a restart, turns strategy proposals into queued trials, applies results (retrying the
// ones not charged to the budget), verifies the best before it is published, and says how a job
// ended. It knows no workers: the scheduler takes trials from it for the lease table and hands it
// the results. Not thread-safe: the scheduler calls it under its mutex; what must happen outside
// the lock (store writes, publication, notification) comes back as JobEffects.
#ifndef TESSEL_SERVER_JOB_MANAGER_H_
#define TESSEL_SERVER_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/tessel.pb.h"
#include "schema/vocab.h"
#include "search/stopping.h"
#include "search/strategy.h"
#include "server/scheduler_options.h"
#include "server/store.h"
#include "server/wire.h"
#include "sim/target.h"

namespace tessel::server {

// Work to do after the scheduler's lock is released.
struct JobEffects {
  std::vector<TrialRecord> trials_to_store;
  std::vector<int64_t> finished_jobs;  // to conclude and publish
  std::vector<int64_t> changed_jobs;   // to notify watchers of
  std::vector<int64_t> running_jobs;   // to persist queued -> running
  // Workers whose reports a re-measurement contradicted, with why: the scheduler stops leasing
  // to them and hands their results back to DropWorkerResults.
  std::vector<std::pair<std::string, std::string>> quarantine;
};

// Two workers disagree on a candidate's time: the measurer's time and the verifier's.
struct Dispute {
  std::string measurer;
  double measured_ns = 0;
  std::string verifier;
  double verified_ns = 0;
};

// A trial of a job, queued or leased.
struct PendingTrial {
  int64_t id = 0;
  Config config;
  bool is_default = false;
  bool verify_final = false;  // re-measure of a best candidate with verification forced
  // A verify_final trial goes to another worker than the ones named here (the candidate's
  // measurer; for a tie-break also its first verifier) while enough workers are alive: a
  // worker's word is not verification.
  std::vector<std::string> avoid_workers;
  // Set on a tie-break: the verify_final trial a third worker runs when two disagreed.
  std::optional<Dispute> dispute;
  // A re-measure of a top candidate with more repeats before the winner is chosen (noise-aware
  // promotion); not charged to the budget.
  bool promote = false;
  int repeats = 0;  // runs kept; 0 = the scheduler's protocol
  // Who proposed it (Strategy::ProposedBy); empty for seeds and warm-start configs.
  std::string arm = {};
};

// A submission checked and turned into a record (id not yet assigned), with its resolved
// workload and the request's seed configs.
struct Submission {
  JobRecord record;
  kernels::ResolvedWorkload resolved;
  std::vector<Config> seeds;
};

// How a job ended: what to store and, for a completed job, what to publish.
struct JobEnd {
  JobState state = JobState::kFailed;
  std::string message;
  std::string stopped_by;
  std::optional<BestRecord> publish;
};

// An OK measurement that may become the job's best.
struct Candidate {
  double time_ns = 0;
  Config config;
  int64_t trial_id = 0;
  // Set only by a verify_final re-measure that passed numerics and agreed on the time, never by
  // the measuring worker's own claim.
  bool verified = false;
  std::string measured_by;  // worker id
  // Relative spread (sample standard deviation / median) of the samples it was measured with.
  double spread = 0;
  // After noise-aware promotion: the half-width of the 95% confidence interval of time_ns, and
  // the samples it rests on (0 when not promoted).
  double ci_ns = 0;
  int samples = 0;
  // During promotion: the re-measured samples (all rounds), their trimmed mean, and whether the
  // candidate is still in the race.
  std::vector<double> race_samples;
  double race_mean_ns = 0;
  bool racing = false;
};

// A job held in memory: its record, what the search needs and how far it got.
struct Job {
  // kPromoting: the top candidates are re-measured with more repeats (noisy measurements only).
  enum class Phase { kSearching, kPromoting, kVerifying, kDone };

  JobRecord record;
  const kernels::Kernel* kernel = nullptr;
  sim::Target target;
  kernels::Problem problem;
  std::unique_ptr<kernels::Space> space;
  std::unique_ptr<search::Strategy> strategy;
  Phase phase = Phase::kSearching;
  std::deque<PendingTrial> queue;
  std::map<int64_t, PendingTrial> leased;  // by trial id
  uint64_t last_served = 0;                // when it last had a trial leased (JobManager order)
  int charged = 0;                         // results charged to the budget
  v1::TrialCounts counts;
  absl::flat_hash_set<std::string> tried;  // configs queued or measured
  std::vector<Candidate> candidates;       // OK results, best first once finishing
  // Charged results that were not OK, by the worker that reported them (re-queued when that
  // worker is quarantined).
  std::map<std::string, std::vector<std::pair<PendingTrial, TrialStatus>>> failed_by;
  std::optional<Candidate> best;  // best OK result so far
  std::optional<Candidate> default_result;
  std::optional<Candidate> published;
  bool running_persisted = false;
  bool strategy_exhausted = false;  // Propose returned nothing
  bool cancelled = false;
  int rejected = 0;                         // best candidates that failed verification
  std::set<int64_t> promoting;              // trial ids of the promotion round not back yet
  int promote_round = 0;                    // rounds of the race queued so far
  std::string default_message;              // why the default config failed, if it did
  std::optional<search::StopTracker> stop;  // early-stop rules of the record, if any
  std::string stop_reason;                  // set when an early stop ended the search
  // Lockstep (record.lockstep > 0): the charged results of the batch in flight, by trial id,
  // held from the strategy until the batch is in.
  std::map<int64_t, search::Observation> held;
};

// Checks a SubmitJobRequest: InvalidArgument for an unknown kernel, target, strategy, dtype or
// effort, a bad shape or budget, a negative early stop or an invalid seed config (each message
// names the field). An effort preset (search::kEffortPresets) fills the budget and
// stop_after_no_improvement where they are 0.
absl::StatusOr<Submission> PrepareSubmission(const v1::SubmitJobRequest& request);

class JobManager {
 public:
  // `store` must outlive the manager; it is read (recovery, warm start, cancel of stored jobs).
  JobManager(Store* store, const SchedulerOptions& options);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Resumes the jobs the store has as queued or running: their stored trials are replayed into a
  // fresh strategy and early-stop tracker (a job whose early stop was reached finishes). A job
  // that cannot resume (e.g. its kernel changed version) is marked failed in the store.
  absl::Status Recover(JobEffects& effects);

  // A job with nothing measured yet: its space, strategy and early-stop tracker (time limit
  // counted from record.created_ms). Reads no state: callable without the scheduler's lock.
  static absl::StatusOr<std::unique_ptr<Job>> BuildJob(const JobRecord& record,
                                                       kernels::ResolvedWorkload resolved);
  // Seeds the job's strategy with the measured trials of recent completed neighbour jobs (same
  // kernel, dtype and kernel version; none without `neighbours`), one prior per neighbouring
  // workload (all its recent jobs' trials together), the most recently tuned workloads first.
  // With `continue_search`, first every recent completed job of the exact workload and versions:
  // the strategy observes their trials and their configs count as tried (not measured again).
  // Returns how many of those jobs and neighbouring workloads were used. Reads only the store:
  // callable without the scheduler's lock.
  static int WarmStart(Store& store, Job& job, bool continue_search = false,
                       bool neighbours = true);
  // Takes in a built job: queues its default config first, then its seeds (up to the budget),
  // then the strategy's proposals.
  void Add(std::unique_ptr<Job> job, std::vector<Config> seeds, JobEffects& effects);

  // The view of a job held in memory (running, or finished while this server ran).
  std::optional<v1::Job> View(int64_t job_id) const;
  // Whether the job is held in memory and not final.
  bool IsActive(int64_t job_id) const;
  // The ids of the active jobs.
  std::vector<int64_t> ActiveJobIds() const;
  // Proposed trials of active jobs waiting for a worker (for metrics).
  int64_t QueuedTrials() const;
  // The oldest active job (queued or running, not cancelled) of `workload`, for single-flight.
  std::optional<int64_t> ActiveJobFor(const WorkloadRecord& workload) const;

  // OK when the job can be cancelled; FailedPrecondition naming its state otherwise (or the
  // store's NotFound).
  absl::Status CheckCancellable(int64_t job_id) const;
  // Records a leased trial of a cancelled job as CANCELLED (held by `worker_id`).
  void CancelLeased(int64_t job_id, int64_t trial_id, const std::string& worker_id,
                    JobEffects& effects);
  // Cancels the job (after CheckCancellable): its queued and leased trials are dropped.
  void Cancel(int64_t job_id, JobEffects& effects);

  // The trial specs (up to `max_trials`, of jobs on the targets `worker` offers) to lease now:
  // the highest priority first, shared fairly (fewest in flight first) among equal priorities.
  std::vector<v1::TrialSpec> TakeTrials(const v1::WorkerInfo& worker, int max_trials,
                                        JobEffects& effects);
  // The stored form of a reported result of a leased trial, or nullopt when the job no longer
  // waits for it (ignored then).
  // A report no honest measurement could produce is recorded as RUNTIME_ERROR with the reason,
  // which is also written to `*rejected` (when given): its worker is then quarantined.
  std::optional<TrialRecord> ResultRecord(int64_t job_id, int64_t trial_id,
                                          const v1::TrialResult& result,
                                          const std::string& worker_id,
                                          std::string* rejected = nullptr) const;
  // Applies the stored result of a leased trial: counts it, tells the strategy, proposes more.
  void ApplyResult(int64_t job_id, const v1::TrialResult& result, JobEffects& effects);
  // A leased trial that came back without a result (`why`): recorded as WORKER_LOST, retried.
  void LoseTrial(int64_t job_id, int64_t trial_id, const std::string& worker_id,
                 const std::string& why, JobEffects& effects);

  // Drops the unverified results `worker_id` measured in every active job and re-queues their
  // configs (not charged again), after the worker was quarantined.
  void DropWorkerResults(const std::string& worker_id, JobEffects& effects);

  // The alive workers and their slots: the slots set how many trials each job keeps in flight
  // (Refill); with more than one worker, a verification avoids the worker it checks.
  void SetAliveWorkers(int workers, int slots);
  // Proposes for every searching job (after the in-flight limit grew).
  void RefillAll(JobEffects& effects);
  // Applies early stops (a time limit) even while no results arrive.
  void CheckStops(JobEffects& effects);

  // How the job ended (for a job in finished_jobs); nullopt when it is not held any more.
  std::optional<JobEnd> Conclude(int64_t job_id) const;
  // Moves the job from the active jobs to the finished views, with how it ended.
  void MarkFinished(int64_t job_id, const JobEnd& end);

 private:
  void Refill(Job& job, JobEffects& effects);
  // A charged search result, to the strategy and the early-stop tracker.
  static void Observe(Job& job, const search::Observation& observation);
  // Proposed trials a job keeps ready for the next Lease: the alive workers' slots, at least 2;
  // a lockstep job, its whole batch (whatever the workers' slots).
  int ReadyTarget(const Job& job) const;
  // Trials a job may have proposed and not yet measured (queued or leased): two per alive slot
  // (one running, one ready), or more for a large budget (a 1/kBlindBudgetShare part of it), so
  // workers can lease ahead of short trials; at most max_in_flight_per_job. A lockstep job: its
  // batch.
  int InFlightLimit(const Job& job) const;
  void Finalize(Job& job, JobEffects& effects);
  // Whether the job's measurements are noisy enough for the promotion race.
  bool Noisy(const Job& job) const;
  // Enters the job's top candidates into the promotion race and queues its first round; false
  // when there is nothing to promote.
  bool StartPromotion(Job& job);
  // Queues one round of the race: promote_repeats more runs of each candidate still racing.
  void QueueRaceRound(Job& job);
  // Applies one promotion re-measure. When the round is back, candidates whose confidence
  // interval lies above the leader's leave the race (StillRacing); the race goes on while more
  // than one is left and rounds remain, then FinishPromotion.
  void ApplyPromotion(Job& job, const PendingTrial& trial, TrialStatus status,
                      const v1::TrialResult& result);
  // Orders the candidates for verification: the race's survivors by trimmed mean, then the
  // eliminated, then the unpromoted by search median. Promoted times rest on the re-measures.
  void FinishPromotion(Job& job);
  // Applies a verify_final result to the job's best candidate: verified when it agrees, else a
  // tie-break on a third worker, a quarantine of the outlier, or the candidate dropped.
  void ApplyVerification(Job& job, const PendingTrial& trial, TrialStatus status,
                         const v1::TrialResult& result, JobEffects& effects);
  // With refill false (replaying stored trials) it neither proposes nor re-queues.
  void Apply(Job& job, const PendingTrial& trial, const v1::TrialResult& result,
             JobEffects& effects, bool refill);
  TrialRecord RecordFor(const Job& job, const PendingTrial& trial, TrialStatus status,
                        const std::string& message) const;
  v1::TrialSpec SpecFor(const Job& job, const PendingTrial& trial) const;
  v1::Job ViewOf(const Job& job) const;
  Job* Find(int64_t job_id) const;

  Store* const store_;
  const SchedulerOptions options_;
  int64_t next_trial_id_ = 1;
  int worker_slots_ = 0;
  int alive_workers_ = 0;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;  // active jobs
  uint64_t lease_seq_ = 0;                        // counts trials leased, for last_served
  std::map<int64_t, v1::Job> finished_;           // final views
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_JOB_MANAGER_H_

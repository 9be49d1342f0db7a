// The scheduler facade: owns the parts and the one mutex that guards the job manager and the lease
// table together, and runs what they leave to do (store writes, lease answers, finishing and
// publishing jobs, notifying watchers) after that mutex is released.
//
// Lock order (a thread holding one may take the ones after it, never one before):
//   Watchers::notify_mu_ -> Scheduler::Impl::mu_ -> Watchers::mu_, Catalog::mu_, the store's locks
#include "server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <set>
#include <span>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/workload.h"
#include "schema/strings.h"
#include "schema/vocab.h"
#include "schema/workload_key.h"
#include "server/catalog.h"
#include "server/job_manager.h"
#include "server/job_view.h"
#include "server/lease_table.h"
#include "server/store.h"
#include "server/watchers.h"
#include "server/wire.h"

namespace tessel::server {
namespace {

// Longest a Lease call is held open.
constexpr int kMaxLeaseWaitMs = 30'000;

// Worker rows (not quarantined) older than this are deleted when a server starts.
constexpr int64_t kWorkerRowRetentionMs = 24 * 3'600'000;

// What Lease and SubmitJob answer while the server drains.
absl::Status Draining() {
  return absl::UnavailableError("server is draining for a restart; retry after it is back");
}

void LogIfError(const absl::Status& status, const std::string& what) {
  if (!status.ok()) spdlog::error("store: {}: {}", what, std::string(status.message()));
}

}  // namespace

class Scheduler::Impl {
 public:
  Impl(Store* store, const SchedulerOptions& options)
      : store_(store),
        options_(options),
        catalog_(store, options.metrics),
        jobs_(store, options),
        leases_(options) {}

  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_) {
    Effects effects;
    {
      absl::MutexLock lock(&mu_);
      if (absl::Status s = jobs_.Recover(effects.jobs); !s.ok()) return s;
      auto credentials = store_->QuarantinedCredentials();
      if (!credentials.ok()) return credentials.status();
      quarantined_credentials_.clear();
      for (const auto& [credential, why] : *credentials)
        quarantined_credentials_.insert(credential);
    }
    Apply(std::move(effects));
    // Workers register again after a restart: rows not heard from in a day are history.
    if (auto purged = store_->PurgeWorkers(NowUnixMs() - kWorkerRowRetentionMs); !purged.ok()) {
      LogIfError(purged.status(), "purging old worker rows");
    } else if (*purged > 0) {
      spdlog::info("forgot {} worker row(s) not heard from in a day", *purged);
    }
    housekeeping_ = std::thread([this] { Housekeeping(); });
    return absl::OkStatus();
  }

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<LeaseCallback> parked;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
      parked = leases_.DropParked();
    }
    watchers_.Close();
    if (housekeeping_.joinable()) housekeeping_.join();
    for (LeaseCallback& done : parked) done(absl::UnavailableError("server is shutting down"));
    pool_.join();
  }

  void BeginDrain() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<LeaseCallback> parked;
    {
      absl::MutexLock lock(&mu_);
      draining_ = true;
      parked = leases_.DropParked();
    }
    for (LeaseCallback& done : parked) done(Draining());
  }

  size_t OutstandingLeases() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return leases_.Outstanding();
  }

  // ---- jobs ----
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (draining_) return Draining();
      if (!store_fault_.ok()) return store_fault_;
    }
    auto submission = PrepareSubmission(request);
    if (!submission.ok()) return submission.status();
    JobRecord& record = submission->record;
    // Single-flight per workload: while one submission of a workload builds its job (auto's
    // prior ranking takes up to ~2 s), another of the same workload waits for it and then
    // attaches to it, so two concurrent submissions make one job; other workloads go on.
    const std::string workload =
        WorkloadKeyFromCanonical(record.workload.kernel, record.workload.dims,
                                 record.workload.dtype, record.workload.target);
    {
      absl::MutexLock single_flight(&submit_mu_);
      const auto idle = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {  // Await holds submit_mu_
        return !building_.contains(workload);
      };
      submit_mu_.Await(absl::Condition(&idle));
      if (!request.new_job()) {
        std::optional<v1::Job> running;
        {
          absl::MutexLock lock(&mu_);
          if (std::optional<int64_t> id = jobs_.ActiveJobFor(record.workload)) {
            running = jobs_.View(*id);
          }
        }
        if (running) {
          running->set_attached(true);
          return *running;
        }
      }
      building_.insert(workload);
    }
    absl::Cleanup built = [&] {
      absl::MutexLock single_flight(&submit_mu_);
      building_.erase(workload);
    };
    auto id = store_->CreateJob(record);
    if (!id.ok()) return id.status();
    record.id = *id;
    auto job = JobManager::BuildJob(record, std::move(submission->resolved));
    if (!job.ok()) {
      (void)store_->UpdateJobState(record.id, JobState::kFailed,
                                   std::string(job.status().message()));
      return job.status();
    }
    const int neighbours = JobManager::WarmStart(*store_, **job, request.continue_search(),
                                                 /*neighbours=*/!request.cold_start());
    // The strategy's one-off work (auto ranks a sample of the space: up to ~1 s) before mu_ is
    // taken, so heartbeats, leases and reports do not wait for it.
    (*job)->strategy->Prepare();
    Effects effects;
    std::optional<v1::Job> view;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return absl::UnavailableError("server is shutting down");
      jobs_.Add(*std::move(job), std::move(submission->seeds), effects.jobs);
      ServeParked(effects);
      view = jobs_.View(record.id);
    }
    spdlog::info(
        "job {}: {} {} {} on {}, strategy {}, budget {}, warm start from {} job(s) or neighbouring "
        "workload(s)",
        record.id, record.workload.kernel, record.dims_display, record.workload.dtype,
        record.workload.target, record.strategy, record.budget, neighbours);
    Apply(std::move(effects));
    return *std::move(view);
  }

  std::optional<v1::Job> MemoryView(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::optional<v1::Job> view = jobs_.View(job_id);
    if (view && !store_fault_.ok()) view->set_paused(std::string(store_fault_.message()));
    return view;
  }

  absl::StatusOr<v1::Job> GetJob(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_) {
    if (std::optional<v1::Job> view = MemoryView(job_id)) return *std::move(view);
    return StoredJobView(*store_, job_id);
  }

  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit, int64_t before_id)
      ABSL_LOCKS_EXCLUDED(mu_) {
    auto records = store_->ListJobs(limit, before_id);
    if (!records.ok()) return records.status();
    // Jobs in memory answer from there; the others from their stored trials, read in one query.
    std::vector<std::optional<v1::Job>> views(records->size());
    std::vector<int64_t> stored;
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < records->size(); ++i) {
        views[i] = jobs_.View((*records)[i].id);
        if (!views[i]) stored.push_back((*records)[i].id);
      }
    }
    if (!stored.empty()) {
      auto trials = store_->TrialSummariesForJobs(stored);
      if (!trials.ok()) return trials.status();
      auto published = store_->BestsPublishedBy(stored);
      if (!published.ok()) return published.status();
      static const std::vector<TrialSummary> kNone;
      for (size_t i = 0; i < records->size(); ++i) {
        if (views[i]) continue;
        auto it = trials->find((*records)[i].id);
        auto best = published->find((*records)[i].id);
        views[i] =
            JobView((*records)[i],
                    ProgressFromTrials((*records)[i], it == trials->end() ? kNone : it->second,
                                       best == published->end() ? nullptr : &best->second));
      }
    }
    std::vector<v1::Job> jobs;
    jobs.reserve(views.size());
    for (std::optional<v1::Job>& view : views) jobs.push_back(std::move(*view));
    return jobs;
  }

  absl::StatusOr<v1::Job> Cancel(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_) {
    Effects effects;
    {
      absl::MutexLock lock(&mu_);
      if (absl::Status s = jobs_.CheckCancellable(job_id); !s.ok()) return s;
      for (const auto& [trial_id, lease] : leases_.ReleaseJob(job_id)) {
        jobs_.CancelLeased(job_id, trial_id, lease.worker_id, effects.jobs);
      }
      jobs_.Cancel(job_id, effects.jobs);
    }
    Apply(std::move(effects));
    return GetJob(job_id);
  }

  absl::StatusOr<std::vector<v1::TrialResult>> ListTrials(int64_t job_id, int64_t after_id,
                                                          int limit) {
    auto record = store_->GetJob(job_id);
    if (!record.ok()) return record.status();
    auto trials = store_->TrialsForJobPage(job_id, after_id, limit);
    if (!trials.ok()) return trials.status();
    std::vector<v1::TrialResult> out;
    out.reserve(trials->size());
    for (const TrialRecord& t : *trials) out.push_back(TrialResultFromRecord(t));
    return out;
  }

  absl::StatusOr<int64_t> Watch(int64_t job_id, JobListener listener) ABSL_LOCKS_EXCLUDED(mu_) {
    bool follow = false;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return absl::UnavailableError("server is shutting down");
      follow = jobs_.IsActive(job_id);
    }
    return watchers_.Watch(job_id, follow, std::move(listener),
                           [this, job_id] { return GetJob(job_id); });
  }

  // ---- workers ----
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request,
                                                const std::string& credential)
      ABSL_LOCKS_EXCLUDED(mu_) {
    for (const std::string& target : request.targets()) {  // the shape is request_check's
      if (auto t = kernels::CachedTarget(target); !t.ok()) {
        return absl::InvalidArgumentError(StrCat("targets: ", std::string(t.status().message())));
      }
    }
    WorkerRecord record;
    Effects effects;
    {
      absl::MutexLock lock(&mu_);
      // Not logged: a refused caller could fill the log (the quarantine itself was logged).
      if (!credential.empty() && quarantined_credentials_.contains(credential)) {
        return absl::PermissionDeniedError(
            "this worker's token is quarantined: a worker that registered with it reported times "
            "the server rejected; register with another token");
      }
      record = leases_.Register(request, credential);
      // The in-flight limit grows with the workers' slots: propose for it now, so this worker's
      // first lease finds work.
      jobs_.SetAliveWorkers(leases_.AliveWorkers(), leases_.AliveSlots());
      jobs_.RefillAll(effects.jobs);
      ServeParked(effects);
    }
    Apply(std::move(effects));
    if (absl::Status s = store_->UpsertWorker(record); !s.ok()) {
      spdlog::warn("store: worker {}: {}", record.id, std::string(s.message()));
    }
    spdlog::info("worker {} registered ({}, {} slot(s))", record.id, record.name, record.slots);
    v1::RegisterResponse response;
    response.set_worker_id(record.id);
    response.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
    response.set_lease_ms(options_.lease_ms);
    return response;
  }

  void Lease(const v1::LeaseRequest& request, LeaseCallback done) ABSL_LOCKS_EXCLUDED(mu_) {
    if (request.max_trials() <= 0 || request.max_trials() > kMaxTrialsPerLease) {
      done(absl::InvalidArgumentError(StrCat("max_trials must be between 1 and ",
                                             kMaxTrialsPerLease, ", got ", request.max_trials())));
      return;
    }
    Effects effects;
    v1::LeaseResponse response;
    absl::Status refused;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) {
        refused = absl::UnavailableError("server is shutting down");
      } else if (draining_) {
        refused = Draining();
      } else if (!store_fault_.ok()) {
        refused = store_fault_;
      } else if (auto why = leases_.QuarantineReason(request.worker_id())) {
        refused = absl::PermissionDeniedError(
            StrCat("worker ", request.worker_id(), " is quarantined: ", *why));
      } else if (!leases_.Touch(request.worker_id())) {
        refused = absl::NotFoundError(
            StrCat("unknown worker id '", Shown(request.worker_id()), "'; register again"));
      } else {
        std::vector<v1::TrialSpec> specs =
            leases_.Take(request.worker_id(), request.max_trials(), TakeFn(effects));
        if (specs.empty() && request.wait_ms() > 0) {
          leases_.Park(request, std::move(done),
                       NowUnixMs() + std::min(request.wait_ms(), kMaxLeaseWaitMs));
          return;
        }
        for (auto& spec : specs) *response.add_trials() = std::move(spec);
        response.set_lease_deadline_unix_ms(NowUnixMs() + options_.lease_ms);
      }
    }
    if (!refused.ok()) {
      done(refused);
      return;
    }
    Apply(std::move(effects));
    done(std::move(response));
  }

  void Report(const v1::ReportRequest& request, ReportCallback done) ABSL_LOCKS_EXCLUDED(mu_) {
    boost::asio::post(pool_, [this, request, done = std::move(done)] {
      struct Claimed {
        int64_t trial_id = 0;
        LeaseTable::Lease lease;
      };
      std::vector<Claimed> claimed;
      std::vector<TrialRecord> rows;
      std::vector<std::pair<std::string, std::string>> suspects;  // worker, why
      v1::ReportResponse response;
      Effects early;
      {
        absl::MutexLock lock(&mu_);
        for (const v1::TrialResult& result : request.results()) {
          std::optional<LeaseTable::Lease> lease =
              leases_.HeldBy(result.trial_id(), request.worker_id());
          std::optional<TrialRecord> row;
          if (lease) {
            std::string rejected;
            row = jobs_.ResultRecord(lease->job_id, result.trial_id(), result, request.worker_id(),
                                     &rejected);
            // The simulator never beats the roofline nor reports a time its samples deny: a
            // report that does is a lie, and its worker is quarantined.
            if (!rejected.empty()) suspects.emplace_back(request.worker_id(), rejected);
          }
          if (!row) {
            response.set_ignored(response.ignored() + 1);
            continue;
          }
          rows.push_back(*std::move(row));
          claimed.push_back(Claimed{result.trial_id(), *leases_.Release(result.trial_id())});
        }
        // The worker holds fewer trials now: its parked Lease need not wait for the commit.
        if (!claimed.empty()) ServeParked(early);
      }
      Apply(std::move(early));
      // Commit before acknowledging: a result the worker saw acknowledged is never lost.
      if (absl::Status s = store_->InsertTrials(rows); !s.ok()) {
        absl::Status answer;
        std::vector<int64_t> paused;
        {
          absl::MutexLock lock(&mu_);
          for (Claimed& c : claimed) leases_.Restore(c.trial_id, std::move(c.lease));
          answer = NoteStoreFault(s, &paused);
        }
        done(answer);
        for (int64_t job_id : paused) Notify(job_id, {});  // watchers see the job paused
        return;
      }
      Committed(rows);
      Effects effects;
      std::map<int64_t, std::vector<v1::TrialResult>> by_job;
      {
        absl::MutexLock lock(&mu_);
        for (size_t i = 0; i < claimed.size(); ++i) {
          leases_.Completed(request.worker_id());
          const int64_t job_id = claimed[i].lease.job_id;
          if (!jobs_.IsActive(job_id)) continue;
          v1::TrialResult result = TrialResultFromRecord(rows[i]);
          jobs_.ApplyResult(job_id, result, effects.jobs);
          by_job[job_id].push_back(std::move(result));
        }
        for (auto& suspect : suspects) {
          effects.jobs.quarantine.emplace_back(suspect.first, "report rejected: " + suspect.second);
        }
        QuarantineWorkers(effects);
        ServeParked(effects);
        response.set_accepted(static_cast<int>(claimed.size()));
      }
      Apply(std::move(effects));
      for (auto& [job_id, results] : by_job) Notify(job_id, results);
      done(response);
    });
  }

  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    v1::HeartbeatResponse response = leases_.Heartbeat(request);
    jobs_.SetAliveWorkers(leases_.AliveWorkers(),
                          leases_.AliveSlots());  // a lost worker may be back
    return response;
  }

  std::vector<v1::WorkerInfo> ListWorkers() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return leases_.ListWorkers();
  }

  Scheduler::Stats CurrentStats() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    Scheduler::Stats stats;
    stats.queued_trials = jobs_.QueuedTrials();
    stats.leases_outstanding = int64_t(leases_.Outstanding());
    for (const v1::WorkerInfo& w : leases_.ListWorkers())
      stats.workers_alive += w.state() == "alive";
    return stats;
  }

  // Feeds the metrics with trials just committed.
  void Committed(std::span<const TrialRecord> rows) {
    if (options_.metrics == nullptr) return;
    for (const TrialRecord& row : rows) {
      if (row.status == TrialStatus::kOk && row.time_ns) {
        options_.metrics->ObserveTrialTime(*row.time_ns * 1e-9);
      }
    }
  }

  void Unwatch(int64_t watch_id) { watchers_.Unwatch(watch_id); }
  Catalog& catalog() { return catalog_; }

 private:
  // What the parts leave to do once mu_ is released.
  struct Effects {
    JobEffects jobs;
    LeaseTable::Replies leases;
    std::vector<std::pair<std::string, std::string>> quarantined;  // to persist: worker, why
  };

  // The workers the job manager found lying (JobEffects::quarantine): no more leases, their
  // leased trials re-queued as lost, their unverified results measured again elsewhere.
  void QuarantineWorkers(Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::pair<std::string, std::string>> suspects;
    suspects.swap(effects.jobs.quarantine);
    for (const auto& [worker_id, why] : suspects) {
      if (leases_.QuarantineReason(worker_id)) continue;
      spdlog::warn("worker {} quarantined: {}", worker_id, Shown(why, 512));
      // Its token registers no new worker: a liar does not come back under a new worker id.
      if (std::string credential = leases_.CredentialOf(worker_id); !credential.empty()) {
        spdlog::warn("worker {}'s named token {} (fingerprint) registers no new worker", worker_id,
                     credential);
        quarantined_credentials_.insert(std::move(credential));
      }
      for (const LeaseTable::Expired& e : leases_.Quarantine(worker_id, why)) {
        jobs_.LoseTrial(e.lease.job_id, e.trial_id, worker_id, e.why, effects.jobs);
      }
      jobs_.SetAliveWorkers(leases_.AliveWorkers(), leases_.AliveSlots());
      jobs_.DropWorkerResults(worker_id, effects.jobs);
      effects.quarantined.emplace_back(worker_id, why);
    }
  }

  // Takes trials from the job manager for the lease table.
  LeaseTable::TakeFn TakeFn(Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return [this, &effects](const v1::WorkerInfo& worker, int max_trials)
               ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called by leases_, under mu_
                 return jobs_.TakeTrials(worker, max_trials, effects.jobs);
               };
  }

  void ServeParked(Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    leases_.ServeParked(TakeFn(effects), effects.leases);
  }

  // Runs effects: store writes, lease answers, finishing jobs, watcher notifications.
  void Apply(Effects effects) ABSL_LOCKS_EXCLUDED(mu_) {
    JobEffects& jobs = effects.jobs;
    for (const auto& [worker_id, why] : effects.quarantined) {
      LogIfError(store_->QuarantineWorker(worker_id, why), StrCat("worker ", worker_id));
    }
    if (!jobs.trials_to_store.empty()) {
      const absl::Status stored = store_->InsertTrials(jobs.trials_to_store);
      LogIfError(stored, StrCat("cannot record ", jobs.trials_to_store.size(), " trial(s)"));
      if (stored.ok()) Committed(jobs.trials_to_store);
    }
    for (int64_t job_id : jobs.running_jobs) {
      LogIfError(store_->UpdateJobState(job_id, JobState::kRunning, ""), StrCat("job ", job_id));
    }
    for (auto& [done, response] : effects.leases) done(std::move(response));
    for (int64_t job_id : jobs.finished_jobs) FinishJob(job_id);
    std::sort(jobs.changed_jobs.begin(), jobs.changed_jobs.end());
    jobs.changed_jobs.erase(std::unique(jobs.changed_jobs.begin(), jobs.changed_jobs.end()),
                            jobs.changed_jobs.end());
    for (int64_t job_id : jobs.changed_jobs) Notify(job_id, {});
  }

  // Stores how the job ended, publishes its best, and moves it to the finished views.
  void FinishJob(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<JobEnd> end;
    {
      absl::MutexLock lock(&mu_);
      end = jobs_.Conclude(job_id);
    }
    if (!end) return;
    if (end->publish) {
      auto snapshot = catalog_.Publish(*end->publish);
      if (!snapshot.ok()) {
        end->state = JobState::kFailed;
        end->message =
            StrCat("cannot publish the best config: ", std::string(snapshot.status().message()));
      }
    }
    LogIfError(store_->UpdateJobState(job_id, end->state, end->message, end->stopped_by),
               StrCat("job ", job_id));
    {
      absl::MutexLock lock(&mu_);
      if (!jobs_.IsActive(job_id)) return;
      jobs_.MarkFinished(job_id, *end);
    }
    spdlog::info("job {} {}{}{}", job_id, JobStateName(end->state),
                 end->message.empty() ? "" : ": ", Shown(end->message, 512));
    Notify(job_id, {});
  }

  void Notify(int64_t job_id, const std::vector<v1::TrialResult>& new_trials)
      ABSL_LOCKS_EXCLUDED(mu_) {
    watchers_.Notify(
        job_id, [this, job_id] { return MemoryView(job_id); }, new_trials);
  }

  // A failed store write. A lasting fault (disk full, read-only or corrupt database) pauses the
  // server: no lease and no new job until ProbeStore sees a write succeed; `paused` gets the
  // active jobs when the fault is new. Returns what the writer's caller is answered.
  absl::Status NoteStoreFault(const absl::Status& s, std::vector<int64_t>* paused)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool lasting =
        absl::IsResourceExhausted(s) || absl::IsPermissionDenied(s) || absl::IsDataLoss(s);
    if (!lasting) {
      return absl::UnavailableError(
          StrCat("cannot store results, retry: ", std::string(s.message())));
    }
    if (store_fault_.ok()) {
      spdlog::error("store: cannot write the database ({}): jobs are paused until it can",
                    std::string(s.message()));
      *paused = jobs_.ActiveJobIds();
    }
    store_fault_ = absl::ResourceExhaustedError(
        StrCat("the server cannot write its database (", std::string(s.message()),
               "); jobs are paused and resume once it can"));
    return store_fault_;
  }

  // While the store is faulted, a probe write once a second; when one succeeds the jobs resume.
  void ProbeStore(Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto now = std::chrono::steady_clock::now();
    if (store_fault_.ok() || now < next_probe_) return;
    next_probe_ = now + std::chrono::seconds(1);
    mu_.Unlock();
    const absl::Status probe = store_->ProbeWrite();
    mu_.Lock();
    if (!probe.ok() || store_fault_.ok()) return;
    store_fault_ = absl::OkStatus();
    spdlog::info("store: the database can be written again: jobs resume");
    for (int64_t job_id : jobs_.ActiveJobIds()) effects.jobs.changed_jobs.push_back(job_id);
    ServeParked(effects);
  }

  void Housekeeping() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (!shutdown_) {
      mu_.AwaitWithTimeout(absl::Condition(&shutdown_),
                           absl::Milliseconds(options_.housekeeping_ms));
      if (shutdown_) break;
      Effects effects;
      const int64_t now = NowUnixMs();
      leases_.ExpireParked(now, effects.leases);
      leases_.MarkSilentWorkersLost(now);
      leases_.ForgetLostWorkers(now);
      jobs_.SetAliveWorkers(leases_.AliveWorkers(), leases_.AliveSlots());
      const std::vector<LeaseTable::Expired> expired = leases_.ExpireLeases(now);
      for (const LeaseTable::Expired& e : expired) {
        jobs_.LoseTrial(e.lease.job_id, e.trial_id, e.lease.worker_id, e.why, effects.jobs);
      }
      jobs_.CheckStops(effects.jobs);  // applies a time limit even while no results arrive
      ProbeStore(effects);
      if (!expired.empty()) ServeParked(effects);
      mu_.Unlock();
      Apply(std::move(effects));
      mu_.Lock();
    }
  }

  Store* const store_;
  const SchedulerOptions options_;
  boost::asio::thread_pool pool_{2};  // report commits and notifications
  Watchers watchers_;
  Catalog catalog_;

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;     // BeginDrain
  absl::Status store_fault_ ABSL_GUARDED_BY(mu_);  // NoteStoreFault; OK when writes succeed
  std::chrono::steady_clock::time_point next_probe_ ABSL_GUARDED_BY(mu_);
  // Submit's single flight (taken before mu_): the workloads whose new job is being built, from
  // the check for a running job of the workload until the new job is added.
  absl::Mutex submit_mu_;
  std::set<std::string> building_ ABSL_GUARDED_BY(submit_mu_);
  JobManager jobs_ ABSL_GUARDED_BY(mu_);
  LeaseTable leases_ ABSL_GUARDED_BY(mu_);
  // Credentials of quarantined workers (server/auth.h), loaded from the store at Start (which
  // keeps why, shown by `tessel workers`).
  std::set<std::string> quarantined_credentials_ ABSL_GUARDED_BY(mu_);
  std::thread housekeeping_;
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Scheduler::~Scheduler() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Store* store,
                                                             const SchedulerOptions& options) {
  if (options.lease_ms <= 0 || options.heartbeat_interval_ms <= 0 ||
      options.max_in_flight_per_job <= 0 || options.repeats <= 0 || options.warmup < 0) {
    return absl::InvalidArgumentError(
        "scheduler options: lease_ms, heartbeat_interval_ms, max_in_flight_per_job and repeats "
        "must be positive, warmup non-negative");
  }
  auto impl = std::make_unique<Impl>(store, options);
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

void Scheduler::Shutdown() { impl_->Shutdown(); }

absl::StatusOr<v1::Job> Scheduler::Submit(const v1::SubmitJobRequest& request) {
  return impl_->Submit(request);
}
absl::StatusOr<v1::Job> Scheduler::GetJob(int64_t job_id) { return impl_->GetJob(job_id); }
absl::StatusOr<std::vector<v1::Job>> Scheduler::ListJobs(int limit, int64_t before_id) {
  return impl_->ListJobs(limit, before_id);
}
void Scheduler::BeginDrain() { impl_->BeginDrain(); }
size_t Scheduler::OutstandingLeases() { return impl_->OutstandingLeases(); }
Scheduler::Stats Scheduler::CurrentStats() { return impl_->CurrentStats(); }
absl::StatusOr<v1::Job> Scheduler::Cancel(int64_t job_id) { return impl_->Cancel(job_id); }
absl::StatusOr<std::vector<v1::TrialResult>> Scheduler::ListTrials(int64_t job_id, int64_t after_id,
                                                                   int limit) {
  return impl_->ListTrials(job_id, after_id, limit);
}
absl::StatusOr<v1::LookupResponse> Scheduler::Lookup(const v1::LookupRequest& request) {
  return impl_->catalog().Lookup(request);
}
absl::StatusOr<v1::ExportResponse> Scheduler::Export(const v1::ExportRequest& request) {
  return impl_->catalog().Export(request);
}
absl::StatusOr<v1::ImportResponse> Scheduler::Import(const v1::ImportRequest& request) {
  return impl_->catalog().Import(request);
}
absl::StatusOr<int64_t> Scheduler::Watch(int64_t job_id, JobListener listener) {
  return impl_->Watch(job_id, std::move(listener));
}
void Scheduler::Unwatch(int64_t watch_id) { impl_->Unwatch(watch_id); }
std::vector<v1::WorkerInfo> Scheduler::ListWorkers() { return impl_->ListWorkers(); }
absl::StatusOr<v1::RegisterResponse> Scheduler::Register(const v1::RegisterRequest& request,
                                                         const std::string& credential) {
  return impl_->Register(request, credential);
}
void Scheduler::Lease(const v1::LeaseRequest& request, LeaseCallback done) {
  impl_->Lease(request, std::move(done));
}
void Scheduler::Report(const v1::ReportRequest& request, ReportCallback done) {
  impl_->Report(request, std::move(done));
}
absl::StatusOr<v1::HeartbeatResponse> Scheduler::Heartbeat(const v1::HeartbeatRequest& request) {
  return impl_->Heartbeat(request);
}

}  // namespace tessel::server

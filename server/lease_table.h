// The lease table: the worker registry, which worker holds which trial until when, heartbeats, and
// the Lease calls parked until work arrives. It knows no jobs: trials come from a function the
// caller passes (the scheduler's job manager), and expired leases go back to the caller, which
// applies them to the jobs. Not thread-safe: the scheduler calls it under its mutex.
#ifndef TESSEL_SERVER_LEASE_TABLE_H_
#define TESSEL_SERVER_LEASE_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema/tessel.pb.h"
#include "server/scheduler_options.h"
#include "server/store.h"

namespace tessel::server {

class LeaseTable {
 public:
  // Takes up to `max_trials` trials that `worker` can run (the specs carry their job ids).
  using TakeFn =
      std::function<std::vector<v1::TrialSpec>(const v1::WorkerInfo& worker, int max_trials)>;
  // Lease answers to send once the caller's lock is released.
  using Replies = std::vector<std::pair<LeaseCallback, v1::LeaseResponse>>;
  struct Lease {
    int64_t job_id = 0;
    std::string worker_id;
    int64_t deadline_ms = 0;
    int64_t granted_ms = 0;
    // Set when a heartbeat showed the worker does not hold the trial: why it expires early.
    std::string released_why;
  };
  // A lease that ended without a result: the trial was lost, for the reason `why`.
  struct Expired {
    int64_t trial_id = 0;
    Lease lease;
    std::string why;
  };

  explicit LeaseTable(const SchedulerOptions& options) : options_(options) {}
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // ---- workers ----
  // Adds a worker (alive, heartbeat now); returns its stored form, with the new id.
  // `credential`: the fingerprint of the token it registered with ('' without tokens).
  WorkerRecord Register(const v1::RegisterRequest& request, const std::string& credential = "");
  // Slots of the workers not declared lost, and how many those workers are.
  int AliveSlots() const;
  int AliveWorkers() const;
  // Records a sign of life of a known worker; false for an unknown id.
  bool Touch(const std::string& worker_id);
  // Revives the worker, extends the leases it still holds and names the trials it runs that it
  // no longer holds (cancelled, or expired), so it stops them. A lease the worker does not list
  // although it was granted before the server answered the worker's heartbeat before last, never
  // reached it (the reply was lost with a broken link): it expires at the next housekeeping, so
  // the trial runs elsewhere and the worker's slot is free again, instead of both waiting for
  // lease_ms. (The worker's heartbeat is sent only after the previous answer arrived, and a lease
  // reply sent before that answer arrives before it on the same connection.)
  v1::HeartbeatResponse Heartbeat(const v1::HeartbeatRequest& request);
  std::vector<v1::WorkerInfo> ListWorkers() const;
  // Stops leasing to the worker for good (it reported times another worker contradicts; see
  // JobManager): it no longer counts as alive, its heartbeats do not revive it, and its leases
  // are removed and returned, to be re-queued. Nothing for an unknown or quarantined worker.
  std::vector<Expired> Quarantine(const std::string& worker_id, const std::string& why);
  // Why the worker is quarantined; nullopt when it is not (or unknown).
  std::optional<std::string> QuarantineReason(const std::string& worker_id) const;
  // The credential the worker registered with ('' when none, or unknown).
  std::string CredentialOf(const std::string& worker_id) const;

  // ---- leases ----
  // Leases to `worker_id` what `take` gives for it (nothing for an unknown or quarantined
  // worker).
  std::vector<v1::TrialSpec> Take(const std::string& worker_id, int max_trials, const TakeFn& take);
  // Holds a Lease call that found no trials until Serve gives it some or `deadline_ms` passes.
  void Park(const v1::LeaseRequest& request, LeaseCallback done, int64_t deadline_ms);
  // Gives trials to the parked calls that now have some (in the order they parked).
  void ServeParked(const TakeFn& take, Replies& replies);
  // Removes every parked call and returns its callback (to answer after the lock is released).
  std::vector<LeaseCallback> DropParked();
  // Trials leased and not yet reported, released or expired.
  size_t Outstanding() const { return leases_.size(); }

  // The lease on `trial_id` when `worker_id` holds it.
  std::optional<Lease> HeldBy(int64_t trial_id, const std::string& worker_id) const;
  // Removes the lease on `trial_id` as its result arrives: its worker no longer holds it, so the
  // worker may lease another while the result is being committed.
  std::optional<Lease> Release(int64_t trial_id);
  // Puts back a lease that Release removed (its result could not be stored).
  void Restore(int64_t trial_id, Lease lease);
  // Counts a released trial's result as done by its worker (once committed).
  void Completed(const std::string& worker_id);
  // Removes the leases of `job_id`; returns them by trial id.
  std::vector<std::pair<int64_t, Lease>> ReleaseJob(int64_t job_id);

  // ---- housekeeping ----
  // Answers parked calls whose wait is over with no trials.
  void ExpireParked(int64_t now_ms, Replies& replies);
  // Declares lost the workers silent for too many heartbeat intervals.
  void MarkSilentWorkersLost(int64_t now_ms);
  // Forgets lost workers silent for kForgetLostWorkerMs that hold no lease (quarantined workers
  // are kept: their reason still matters); one that comes back registers again.
  void ForgetLostWorkers(int64_t now_ms);
  static constexpr int64_t kForgetLostWorkerMs = 3'600'000;
  // Removes and returns the leases past their deadline or held by a lost worker.
  std::vector<Expired> ExpireLeases(int64_t now_ms);

 private:
  struct Worker {
    v1::WorkerInfo info;
    std::string credential;  // see Register
    bool lost = false;       // silent, or quarantined
    // When the server answered the worker's last heartbeat and the one before it (0: none yet).
    int64_t last_answer_ms = 0;
    int64_t previous_answer_ms = 0;
  };
  struct ParkedLease {
    v1::LeaseRequest request;
    LeaseCallback done;
    int64_t deadline_ms = 0;
  };
  void AddLeasedTrials(Worker& worker, int delta);

  const SchedulerOptions options_;
  int64_t next_worker_seq_ = 1;
  std::map<std::string, Worker> workers_;
  std::map<int64_t, Lease> leases_;  // by trial id
  std::deque<ParkedLease> parked_;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_LEASE_TABLE_H_

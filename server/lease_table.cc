#include "server/lease_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "schema/strings.h"
#include "schema/vocab.h"

namespace tessel::server {
namespace {

// A worker silent for this many heartbeat intervals is declared lost.
constexpr int kMissedHeartbeatsForLost = 3;

}  // namespace

WorkerRecord LeaseTable::Register(const v1::RegisterRequest& request,
                                  const std::string& credential) {
  const int64_t now = NowUnixMs();
  std::string id = StrCat("w", next_worker_seq_++, "-", now % 1'000'000);
  Worker worker;
  worker.info.set_worker_id(id);
  worker.info.set_name(request.name().empty() ? id : request.name());
  for (const std::string& t : request.targets()) worker.info.add_targets(t);
  worker.info.set_slots(std::max(1, request.slots()));
  worker.info.set_last_heartbeat_unix_ms(now);
  worker.info.set_state("alive");
  worker.credential = credential;
  WorkerRecord record;
  record.id = id;
  record.name = worker.info.name();
  record.targets = StrJoin(request.targets(), ",");
  record.slots = worker.info.slots();
  record.registered_ms = now;
  record.last_heartbeat_ms = now;
  record.credential = credential;
  workers_[id] = std::move(worker);
  return record;
}

int LeaseTable::AliveSlots() const {
  int slots = 0;
  for (const auto& [id, worker] : workers_) {
    if (!worker.lost) slots += worker.info.slots();
  }
  return slots;
}

int LeaseTable::AliveWorkers() const {
  int alive = 0;
  for (const auto& [id, worker] : workers_) alive += !worker.lost;
  return alive;
}

bool LeaseTable::Touch(const std::string& worker_id) {
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end()) return false;
  worker->second.info.set_last_heartbeat_unix_ms(NowUnixMs());
  return true;
}

v1::HeartbeatResponse LeaseTable::Heartbeat(const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  auto worker = workers_.find(request.worker_id());
  if (worker == workers_.end()) {
    response.set_known(false);
    return response;
  }
  response.set_known(true);
  worker->second.info.set_last_heartbeat_unix_ms(NowUnixMs());
  if (!worker->second.info.quarantine_reason().empty()) return response;  // holds no leases
  worker->second.info.set_state("alive");
  worker->second.lost = false;
  const int64_t now_ms = NowUnixMs();
  const int64_t lease_deadline = now_ms + options_.lease_ms;
  if (const int64_t answered = worker->second.previous_answer_ms; answered > 0) {
    const std::set<int64_t> held(request.running_trial_ids().begin(),
                                 request.running_trial_ids().end());
    for (auto& [trial_id, lease] : leases_) {
      if (lease.worker_id == request.worker_id() && lease.granted_ms < answered &&
          held.count(trial_id) == 0 && lease.released_why.empty()) {
        lease.deadline_ms = 0;
        lease.released_why = StrCat("worker ", request.worker_id(),
                                    " never received it (a lost reply; it does not hold it)");
      }
    }
  }
  worker->second.previous_answer_ms = worker->second.last_answer_ms;
  worker->second.last_answer_ms = now_ms;
  for (int64_t trial_id : request.running_trial_ids()) {
    auto lease = leases_.find(trial_id);
    if (lease == leases_.end() || lease->second.worker_id != request.worker_id()) {
      response.add_cancelled_trial_ids(trial_id);
    } else {
      lease->second.deadline_ms = lease_deadline;  // a heartbeat keeps long trials leased
    }
  }
  return response;
}

std::vector<v1::WorkerInfo> LeaseTable::ListWorkers() const {
  std::vector<v1::WorkerInfo> out;
  for (const auto& [id, worker] : workers_) out.push_back(worker.info);
  return out;
}

std::vector<LeaseTable::Expired> LeaseTable::Quarantine(const std::string& worker_id,
                                                        const std::string& why) {
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end() || !worker->second.info.quarantine_reason().empty()) return {};
  worker->second.lost = true;
  worker->second.info.set_state("quarantined");
  worker->second.info.set_quarantine_reason(why);
  std::vector<Expired> released;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.worker_id != worker_id) {
      ++it;
      continue;
    }
    released.push_back(
        Expired{it->first, std::move(it->second), StrCat("worker ", worker_id, " quarantined")});
    it = leases_.erase(it);
  }
  worker->second.info.set_leased_trials(0);
  return released;
}

std::optional<std::string> LeaseTable::QuarantineReason(const std::string& worker_id) const {
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end() || worker->second.info.quarantine_reason().empty()) {
    return std::nullopt;
  }
  return worker->second.info.quarantine_reason();
}

std::string LeaseTable::CredentialOf(const std::string& worker_id) const {
  auto worker = workers_.find(worker_id);
  return worker == workers_.end() ? std::string() : worker->second.credential;
}

void LeaseTable::AddLeasedTrials(Worker& worker, int delta) {
  worker.info.set_leased_trials(std::max(0, worker.info.leased_trials() + delta));
}

std::vector<v1::TrialSpec> LeaseTable::Take(const std::string& worker_id, int max_trials,
                                            const TakeFn& take) {
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end() || !worker->second.info.quarantine_reason().empty()) return {};
  // Slots are enforced: no worker holds more than kMaxLeaseDepthPerSlot trials per slot.
  const v1::WorkerInfo& info = worker->second.info;
  max_trials = std::min(max_trials, kMaxLeaseDepthPerSlot * info.slots() - info.leased_trials());
  if (max_trials <= 0) return {};
  std::vector<v1::TrialSpec> specs = take(info, max_trials);
  const int64_t now_ms = NowUnixMs();
  for (const v1::TrialSpec& spec : specs) {
    Lease& lease = leases_[spec.trial_id()];
    lease = Lease{};
    lease.job_id = spec.job_id();
    lease.worker_id = worker_id;
    lease.deadline_ms = now_ms + options_.lease_ms;
    lease.granted_ms = now_ms;
  }
  AddLeasedTrials(worker->second, static_cast<int>(specs.size()));
  return specs;
}

void LeaseTable::Park(const v1::LeaseRequest& request, LeaseCallback done, int64_t deadline_ms) {
  parked_.push_back(ParkedLease{request, std::move(done), deadline_ms});
}

void LeaseTable::ServeParked(const TakeFn& take, Replies& replies) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    std::vector<v1::TrialSpec> specs =
        Take(it->request.worker_id(), it->request.max_trials(), take);
    if (specs.empty()) {
      ++it;
      continue;
    }
    v1::LeaseResponse response;
    for (auto& spec : specs) *response.add_trials() = std::move(spec);
    response.set_lease_deadline_unix_ms(NowUnixMs() + options_.lease_ms);
    replies.emplace_back(std::move(it->done), std::move(response));
    it = parked_.erase(it);
  }
}

std::vector<LeaseCallback> LeaseTable::DropParked() {
  std::vector<LeaseCallback> dropped;
  for (ParkedLease& p : parked_) dropped.push_back(std::move(p.done));
  parked_.clear();
  return dropped;
}

std::optional<LeaseTable::Lease> LeaseTable::HeldBy(int64_t trial_id,
                                                    const std::string& worker_id) const {
  auto it = leases_.find(trial_id);
  if (it == leases_.end() || it->second.worker_id != worker_id) return std::nullopt;
  return it->second;
}

std::optional<LeaseTable::Lease> LeaseTable::Release(int64_t trial_id) {
  auto it = leases_.find(trial_id);
  if (it == leases_.end()) return std::nullopt;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  if (auto worker = workers_.find(lease.worker_id); worker != workers_.end()) {
    AddLeasedTrials(worker->second, -1);
  }
  return lease;
}

void LeaseTable::Restore(int64_t trial_id, Lease lease) {
  if (auto worker = workers_.find(lease.worker_id); worker != workers_.end()) {
    AddLeasedTrials(worker->second, 1);
  }
  leases_[trial_id] = std::move(lease);
}

void LeaseTable::Completed(const std::string& worker_id) {
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end()) return;
  worker->second.info.set_trials_done(worker->second.info.trials_done() + 1);
}

std::vector<std::pair<int64_t, LeaseTable::Lease>> LeaseTable::ReleaseJob(int64_t job_id) {
  std::vector<std::pair<int64_t, Lease>> released;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.job_id != job_id) {
      ++it;
      continue;
    }
    if (auto w = workers_.find(it->second.worker_id); w != workers_.end()) {
      AddLeasedTrials(w->second, -1);
    }
    released.emplace_back(it->first, std::move(it->second));
    it = leases_.erase(it);
  }
  return released;
}

void LeaseTable::ExpireParked(int64_t now_ms, Replies& replies) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->deadline_ms > now_ms) {
      ++it;
      continue;
    }
    replies.emplace_back(std::move(it->done), v1::LeaseResponse());
    it = parked_.erase(it);
  }
}

void LeaseTable::MarkSilentWorkersLost(int64_t now_ms) {
  const int64_t silent_limit =
      static_cast<int64_t>(kMissedHeartbeatsForLost) * options_.heartbeat_interval_ms;
  for (auto& [id, worker] : workers_) {
    if (!worker.lost && now_ms - worker.info.last_heartbeat_unix_ms() > silent_limit) {
      worker.lost = true;
      worker.info.set_state("lost");
      spdlog::warn("worker {} silent for {} ms: declared lost", id,
                   now_ms - worker.info.last_heartbeat_unix_ms());
    }
  }
}

void LeaseTable::ForgetLostWorkers(int64_t now_ms) {
  std::erase_if(workers_, [&](const auto& entry) {
    const Worker& w = entry.second;
    return w.lost && w.info.quarantine_reason().empty() && w.info.leased_trials() == 0 &&
           now_ms - w.info.last_heartbeat_unix_ms() > kForgetLostWorkerMs;
  });
}

std::vector<LeaseTable::Expired> LeaseTable::ExpireLeases(int64_t now_ms) {
  std::vector<Expired> expired;
  for (const auto& [trial_id, lease] : leases_) {
    auto worker = workers_.find(lease.worker_id);
    if (worker != workers_.end() && worker->second.lost) {
      expired.push_back(Expired{trial_id, lease, StrCat("worker ", lease.worker_id, " was lost")});
    } else if (!lease.released_why.empty()) {
      expired.push_back(Expired{trial_id, lease, lease.released_why});
    } else if (lease.deadline_ms < now_ms) {
      expired.push_back(
          Expired{trial_id, lease, StrCat("lease expired after ", options_.lease_ms, " ms")});
    }
  }
  for (const Expired& e : expired) {
    leases_.erase(e.trial_id);
    if (auto w = workers_.find(e.lease.worker_id); w != workers_.end()) {
      AddLeasedTrials(w->second, -1);
    }
  }
  return expired;
}

}  // namespace tessel::server

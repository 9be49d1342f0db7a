#include "server/job_manager.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "schema/measurement.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"
#include "server/job_view.h"
#include "server/report_check.h"

namespace tessel::server {
namespace {

// Largest budget a job may ask for; a guard against typos, not a limit of the design.
constexpr int kMaxBudget = 1'000'000;
// Proposal rounds per refill when a strategy returns configs that were already tried.
constexpr int kMaxProposalRounds = 3;
// A job with a large budget may have this part of it proposed before the results come back
// (1/32: 62 trials of 2,000, 6 of 200): enough for workers to lease ahead of sub-millisecond
// trials, little enough that the strategy still learns from nearly every result it could have.
constexpr int kBlindBudgetShare = 32;
// The largest lockstep batch (v1::SubmitJobRequest.lockstep): the default max_in_flight_per_job.
constexpr int kMaxLockstep = 64;
// Warm start: how many recent jobs are scanned for neighbours, and how many neighbouring
// workloads are used.
constexpr int kWarmStartScannedJobs = 200;
constexpr int kMaxWarmStartNeighbours = 4;

// The order candidates are published in: faster first; of equal times, the one proposed first
// (trial ids follow proposal order), so the result does not depend on which worker reported
// first.
// Relative spread of a result's samples (schema/measurement.h).
double RelativeSpread(const v1::TrialResult& result) {
  return tessel::RelativeSpread({result.samples_ns().begin(), result.samples_ns().end()});
}

// A candidate from an OK result: not verified, whatever the worker says, and not promoted.
Candidate MeasuredCandidate(const PendingTrial& trial, const v1::TrialResult& result) {
  Candidate candidate;
  candidate.time_ns = result.time_ns();
  candidate.config = trial.config;
  candidate.trial_id = trial.id;
  candidate.measured_by = result.worker_id();
  candidate.spread = RelativeSpread(result);
  return candidate;
}

// A best whose samples spread more than this (relative sigma) goes through the promotion race
// even when the server was not told of noise: about 4x the spread the simulator's rounding shows.
constexpr double kNoisySpread = 0.01;

bool Faster(const Candidate& a, const Candidate& b) {
  return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.trial_id < b.trial_id);
}

// The job's best among its candidates (after one was dropped or replaced).
void RecomputeBest(Job& job) {
  job.best.reset();
  for (const Candidate& c : job.candidates) {
    if (!job.best || Faster(c, *job.best)) job.best = c;
  }
}

// The tracker of the job's early stops, or nullopt when it has none. The time limit counts wall
// time since the job was created (server downtime included), so a job resumed after a restart
// starts with the time it has already used.
std::optional<search::StopTracker> StopTrackerFor(const JobRecord& record) {
  if (record.time_limit_s <= 0 && record.stop_after_no_improvement <= 0 &&
      record.target_time_ns <= 0) {
    return std::nullopt;
  }
  search::StopRule rule;
  rule.time_limit = std::chrono::seconds(record.time_limit_s);
  rule.no_improvement = record.stop_after_no_improvement;
  rule.target_time_ns = record.target_time_ns;
  const std::chrono::milliseconds elapsed(std::max<int64_t>(0, NowUnixMs() - record.created_ms));
  return search::StopTracker(rule, search::StopTracker::Clock::now() - elapsed);
}

std::optional<MeasuredConfig> Shown(const std::optional<Candidate>& candidate) {
  if (!candidate) return std::nullopt;
  return MeasuredConfig{candidate->config.ToString(), candidate->time_ns, candidate->trial_id,
                        candidate->ci_ns, candidate->samples};
}

// The workload of a stored job, resolved again as a request naming it would be.
absl::StatusOr<kernels::ResolvedWorkload> ResolveStored(const JobRecord& record) {
  TESSEL_ASSIGN_OR_RETURN(Dims dims, Dims::Parse(record.dims_display));
  return kernels::Resolve(kernels::WorkloadRequest{record.workload.kernel, std::move(dims),
                                                   record.workload.dtype, record.workload.target});
}

}  // namespace

absl::StatusOr<Submission> PrepareSubmission(const v1::SubmitJobRequest& request) {
  auto resolved = kernels::Resolve(request.workload());
  if (!resolved.ok()) return resolved.status();
  std::string strategy = request.strategy().empty() ? kDefaultStrategy : request.strategy();
  TESSEL_RETURN_IF_ERROR(search::CheckStrategyName(strategy));
  // The effort preset fills the budget and the no-improvement stop where the request left them 0.
  const search::EffortPreset* preset = nullptr;
  if (!request.effort().empty()) {
    preset = search::FindEffortPreset(request.effort());
    if (preset == nullptr) {
      return absl::InvalidArgumentError(StrCat("effort must be one of ",
                                               search::EffortPresetNames(), " (or empty), got '",
                                               tessel::Shown(request.effort()), "'"));
    }
  }
  const int budget = request.budget() == 0 && preset ? preset->budget : request.budget();
  if (budget <= 0 || budget > kMaxBudget) {
    return absl::InvalidArgumentError(StrCat("budget must be between 1 and ", kMaxBudget,
                                             preset ? " (or 0 for the effort's)" : "", ", got ",
                                             request.budget()));
  }
  if (request.time_limit_s() < 0) {
    return absl::InvalidArgumentError(
        StrCat("time_limit_s must be >= 0 (0 = none), got ", request.time_limit_s()));
  }
  if (request.stop_after_no_improvement() < 0) {
    return absl::InvalidArgumentError(
        StrCat("stop_after_no_improvement must be >= 0 (0 = none), got ",
               request.stop_after_no_improvement()));
  }
  if (!(request.target_time_ns() >= 0)) {  // NaN too
    return absl::InvalidArgumentError(
        StrCat("target_time_ns must be >= 0 (0 = none), got ", request.target_time_ns()));
  }
  if (request.lockstep() < 0 || request.lockstep() > kMaxLockstep) {
    return absl::InvalidArgumentError(StrCat("lockstep must be between 0 (off) and ", kMaxLockstep,
                                             ", got ", request.lockstep()));
  }
  const int no_improvement = request.stop_after_no_improvement() == 0 && preset
                                 ? preset->no_improvement
                                 : request.stop_after_no_improvement();
  Submission submission;
  if (request.seed_configs_size() > 0) {
    auto space = resolved->kernel->SpaceFor(resolved->problem, resolved->target);
    if (!space.ok()) return space.status();
    for (const std::string& text : request.seed_configs()) {
      auto config = Config::Parse(text);
      if (!config.ok()) {
        return absl::InvalidArgumentError(StrCat("seed_configs: '", tessel::Shown(text),
                                                 "': ", std::string(config.status().message())));
      }
      if (absl::Status valid = space->Validate(*config); !valid.ok()) {
        return absl::InvalidArgumentError(StrCat("seed_configs: '", tessel::Shown(text),
                                                 "' is invalid: ", std::string(valid.message())));
      }
      submission.seeds.push_back(*std::move(config));
    }
  }

  JobRecord& record = submission.record;
  record.workload = WorkloadRecordFor(*resolved);
  record.dims_display = resolved->problem.dims.ToString();
  record.kernel_version = resolved->kernel->version();
  record.target_version = resolved->target.version;
  record.strategy = strategy;
  record.budget = budget;
  record.seed = request.seed();
  record.priority = request.priority();
  record.model = request.model();
  record.lockstep = request.lockstep();
  record.state = JobState::kQueued;
  record.default_config = resolved->kernel->Default(resolved->problem, resolved->target).ToString();
  record.roofline_ns = kernels::RooflineNs(*resolved->kernel, resolved->problem, resolved->target);
  record.created_ms = NowUnixMs();
  record.time_limit_s = request.time_limit_s();
  record.stop_after_no_improvement = no_improvement;
  record.target_time_ns = request.target_time_ns();
  record.effort = request.effort();
  submission.resolved = *std::move(resolved);
  return submission;
}

JobManager::JobManager(Store* store, const SchedulerOptions& options)
    : store_(store), options_(options) {}

JobManager::~JobManager() = default;

// ---------------------------------------------------------------------------------------------
// Building, warm start, recovery

absl::StatusOr<std::unique_ptr<Job>> JobManager::BuildJob(const JobRecord& record,
                                                          kernels::ResolvedWorkload resolved) {
  auto job = std::make_unique<Job>();
  job->record = record;
  job->kernel = resolved.kernel;
  job->target = std::move(resolved.target);
  job->problem = std::move(resolved.problem);
  auto space = job->kernel->SpaceFor(job->problem, job->target);
  if (!space.ok()) return space.status();
  job->space = std::make_unique<kernels::Space>(std::move(*space));
  const WorkloadRecord& w = record.workload;
  job->space->set_identity(StrCat(w.kernel, " ", w.dims, " ", w.dtype, " ", w.target, " v",
                                  record.kernel_version, ".", record.target_version));
  auto strategy = search::MakeStrategy(record.strategy, *job->space, record.seed);
  if (!strategy.ok()) return strategy.status();
  job->strategy = std::move(*strategy);
  job->stop = StopTrackerFor(record);
  return job;
}

int JobManager::WarmStart(Store& store, Job& job, bool continue_search, bool neighbours) {
  auto recent = store.ListJobs(kWarmStartScannedJobs);
  if (!recent.ok()) return 0;
  int continued = 0, used = 0;
  auto same_workload = [&](const JobRecord& other) {
    const WorkloadRecord& a = other.workload;
    const WorkloadRecord& b = job.record.workload;
    return a.kernel == b.kernel && a.dims == b.dims && a.dtype == b.dtype && a.target == b.target &&
           other.kernel_version == job.record.kernel_version &&
           other.target_version == job.record.target_version;
  };
  if (continue_search) {
    std::vector<search::Observation> observations;
    for (const JobRecord& other : *recent) {
      if (other.id == job.record.id || other.state != JobState::kCompleted ||
          !same_workload(other)) {
        continue;
      }
      auto trials = store.TrialsForJob(other.id);
      if (!trials.ok()) continue;
      for (const TrialRecord& t : *trials) {
        if (t.is_verify || !IsChargedToBudget(t.status)) continue;
        auto config = Config::Parse(t.config);
        if (!config.ok() || !job.tried.insert(t.config).second) continue;
        observations.push_back(search::Observation{*std::move(config), t.status == TrialStatus::kOk,
                                                   t.time_ns.value_or(0)});
      }
      ++continued;
    }
    // Observed as this search's own results, not as a prior: the strategy then knows them as
    // measured and proposes none of them again (a prior's configs may be proposed, and a round
    // whose warm-start configs were all measured by its earlier rounds would end as exhausted).
    if (!observations.empty()) job.strategy->Observe(observations);
  }
  if (!neighbours) return continued;
  // The neighbours: up to kMaxWarmStartNeighbours workloads, the most recently tuned first, each
  // with the trials of its latest job and its published best (one prior group per workload, so a
  // neighbour's best config is offered whichever of its jobs found it, at two reads a workload).
  struct Neighbour {
    std::string key;  // dims, target and target version
    WorkloadRecord workload;
    std::vector<search::Observation> observations;
    std::set<std::string> configs;  // those observed (once each)
    void Add(const std::string& text, bool ok, double time_ns) {
      if (!configs.insert(text).second) return;
      auto config = Config::Parse(text);
      if (config.ok()) observations.push_back(search::Observation{*std::move(config), ok, time_ns});
    }
  };
  std::vector<Neighbour> found;  // most recent first
  for (const JobRecord& other : *recent) {
    if (found.size() >= kMaxWarmStartNeighbours) break;
    if (continue_search && same_workload(other)) continue;  // observed above
    if (other.id == job.record.id || other.state != JobState::kCompleted ||
        other.workload.kernel != job.record.workload.kernel ||
        other.workload.dtype != job.record.workload.dtype ||
        other.kernel_version != job.record.kernel_version) {
      continue;
    }
    std::string key =
        StrCat(other.workload.dims, "@", other.workload.target, "#", other.target_version);
    if (std::any_of(found.begin(), found.end(), [&](const Neighbour& n) { return n.key == key; })) {
      continue;  // its latest job is read already
    }
    Neighbour& neighbour = found.emplace_back(Neighbour{std::move(key), other.workload, {}, {}});
    auto trials = store.TrialsForJob(other.id);
    if (!trials.ok()) continue;
    for (const TrialRecord& t : *trials) {
      if (t.is_verify || !IsChargedToBudget(t.status)) continue;
      neighbour.Add(t.config, t.status == TrialStatus::kOk, t.time_ns.value_or(0));
    }
  }
  for (Neighbour& neighbour : found) {
    auto best = store.LatestBest(neighbour.workload);
    if (best.ok() && best->has_value()) neighbour.Add((*best)->config, true, (*best)->time_ns);
    if (neighbour.observations.empty()) continue;
    job.strategy->ObservePrior(neighbour.observations);
    ++used;
  }
  return continued + used;
}

absl::Status JobManager::Recover(JobEffects& effects) {
  auto max_id = store_->MaxTrialId();
  if (!max_id.ok()) return max_id.status();
  next_trial_id_ = *max_id + 1;

  // The results of a quarantined worker are measured again, not replayed.
  auto quarantined = store_->QuarantinedWorkers();
  if (!quarantined.ok()) return quarantined.status();
  std::vector<JobRecord> unfinished;
  for (JobState state : {JobState::kQueued, JobState::kRunning}) {
    auto jobs = store_->JobsInState(state);
    if (!jobs.ok()) return jobs.status();
    unfinished.insert(unfinished.end(), jobs->begin(), jobs->end());
  }
  for (const JobRecord& record : unfinished) {
    absl::StatusOr<kernels::ResolvedWorkload> resolved = ResolveStored(record);
    absl::StatusOr<std::unique_ptr<Job>> job =
        resolved.ok() ? BuildJob(record, *std::move(resolved)) : resolved.status();
    if (job.ok() && (*job)->kernel->version() != record.kernel_version) {
      job = absl::FailedPreconditionError(
          StrCat("kernel ", record.workload.kernel, " changed from version ", record.kernel_version,
                 " to ", (*job)->kernel->version(), " since the job started"));
    }
    if (!job.ok()) {
      spdlog::warn("job {} cannot be resumed: {}", record.id, std::string(job.status().message()));
      if (absl::Status s = store_->UpdateJobState(
              record.id, JobState::kFailed,
              StrCat("cannot resume after restart: ", std::string(job.status().message())));
          !s.ok()) {
        return s;
      }
      continue;
    }
    auto trials = store_->TrialsForJob(record.id);
    if (!trials.ok()) return trials.status();
    Job& j = **job;
    // Replay what was measured: the search continues where it stopped and never repeats a config,
    // and j.stop (built by BuildJob) counts every charged result again, so the Refill below ends
    // a job whose early stop was reached, before or during the downtime.
    std::vector<TrialRecord> verify_rows;
    bool default_measured = false;
    for (const TrialRecord& t : *trials) {
      auto config = Config::Parse(t.config);
      if (!config.ok()) continue;
      if (quarantined->count(t.worker_id) > 0) {
        if (!t.is_verify && IsChargedToBudget(t.status) && j.tried.insert(t.config).second) {
          j.queue.push_back(
              PendingTrial{next_trial_id_++, *config, t.is_default, false, {}, {}, false, 0});
        }
        continue;
      }
      if (t.is_verify) {
        verify_rows.push_back(t);
        continue;
      }
      PendingTrial trial{t.id, *config, t.is_default, false, {}, {}};
      if (IsChargedToBudget(t.status)) {
        // A lost trial's config was never measured: leave it free to be proposed again.
        j.tried.insert(t.config);
        default_measured |= t.is_default;
      }
      Apply(j, trial, TrialResultFromRecord(t), effects, /*refill=*/false);
    }
    if (!default_measured) {
      auto default_config = Config::Parse(record.default_config);
      if (default_config.ok()) {
        j.queue.push_front(
            PendingTrial{next_trial_id_++, *default_config, true, false, {}, {}, false, 0});
        j.tried.insert(record.default_config);
      }
    }
    for (const TrialRecord& t : verify_rows) {
      for (Candidate& c : j.candidates) {
        if (c.config.ToString() == t.config && t.status == TrialStatus::kOk && t.verified &&
            t.time_ns &&
            MediansAgree(c.time_ns, *t.time_ns, options_.noise_sigma, options_.repeats)) {
          c.verified = true;
        }
      }
    }
    j.running_persisted = record.state == JobState::kRunning;
    spdlog::info("resumed job {} ({} trials already measured)", record.id, trials->size());
    const int64_t id = record.id;
    jobs_[id] = std::move(*job);
    Refill(*jobs_[id], effects);
  }
  return absl::OkStatus();
}

void JobManager::Add(std::unique_ptr<Job> job, std::vector<Config> seeds, JobEffects& effects) {
  Job& j = *job;
  auto default_config = Config::Parse(j.record.default_config);
  // Every job measures the default first, so the tuned result is never worse than untuned.
  j.queue.push_back(PendingTrial{next_trial_id_++, *default_config, true, false, {}, {}, false, 0});
  j.tried.insert(j.record.default_config);
  for (Config& seed : seeds) {
    if (static_cast<int>(j.queue.size()) >= j.record.budget) break;
    if (!j.tried.insert(seed.ToString()).second) continue;
    j.queue.push_back(
        PendingTrial{next_trial_id_++, std::move(seed), false, false, {}, {}, false, 0});
  }
  const int64_t id = j.record.id;
  jobs_[id] = std::move(job);
  Refill(*jobs_[id], effects);
}

// ---------------------------------------------------------------------------------------------
// Views

Job* JobManager::Find(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

v1::Job JobManager::ViewOf(const Job& job) const {
  JobProgress progress;
  progress.counts = job.counts;
  progress.counts.set_pending(static_cast<int>(job.queue.size() + job.leased.size()));
  progress.best = Shown(job.published ? job.published : job.best);
  progress.default_result = Shown(job.default_result);
  return JobView(job.record, progress);
}

std::optional<v1::Job> JobManager::View(int64_t job_id) const {
  if (const Job* job = Find(job_id)) return ViewOf(*job);
  if (auto it = finished_.find(job_id); it != finished_.end()) return it->second;
  return std::nullopt;
}

bool JobManager::IsActive(int64_t job_id) const { return Find(job_id) != nullptr; }

int64_t JobManager::QueuedTrials() const {
  int64_t queued = 0;
  for (const auto& [id, job] : jobs_) queued += int64_t(job->queue.size());
  return queued;
}

std::vector<int64_t> JobManager::ActiveJobIds() const {
  std::vector<int64_t> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  return ids;
}

std::optional<int64_t> JobManager::ActiveJobFor(const WorkloadRecord& workload) const {
  for (const auto& [id, job] : jobs_) {  // by id: the oldest first
    const WorkloadRecord& w = job->record.workload;
    if (!job->cancelled && job->phase != Job::Phase::kDone && w.kernel == workload.kernel &&
        w.dims == workload.dims && w.dtype == workload.dtype && w.target == workload.target) {
      return id;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Cancelling

absl::Status JobManager::CheckCancellable(int64_t job_id) const {
  const Job* job = Find(job_id);
  if (job != nullptr && job->phase != Job::Phase::kDone) return absl::OkStatus();
  if (job == nullptr && !finished_.contains(job_id)) {
    auto stored = store_->GetJob(job_id);
    if (!stored.ok()) return stored.status();
    return absl::FailedPreconditionError(
        StrCat("job ", job_id, " is already ", JobStateName(stored->state)));
  }
  return absl::FailedPreconditionError(StrCat("job ", job_id, " has already finished"));
}

void JobManager::CancelLeased(int64_t job_id, int64_t trial_id, const std::string& worker_id,
                              JobEffects& effects) {
  Job* job = Find(job_id);
  if (job == nullptr) return;
  auto trial = job->leased.find(trial_id);
  if (trial == job->leased.end()) return;
  TrialRecord row = RecordFor(*job, trial->second, TrialStatus::kCancelled, "job cancelled");
  row.worker_id = worker_id;
  effects.trials_to_store.push_back(std::move(row));
}

void JobManager::Cancel(int64_t job_id, JobEffects& effects) {
  Job* job = Find(job_id);
  if (job == nullptr) return;
  job->queue.clear();
  job->leased.clear();
  job->cancelled = true;
  job->phase = Job::Phase::kDone;
  effects.finished_jobs.push_back(job_id);
}

// ---------------------------------------------------------------------------------------------
// Proposals, leases and results

void JobManager::SetAliveWorkers(int workers, int slots) {
  alive_workers_ = workers;
  worker_slots_ = slots;
}

int JobManager::ReadyTarget(const Job& job) const {
  return job.record.lockstep > 0 ? job.record.lockstep : std::max(2, worker_slots_);
}

int JobManager::InFlightLimit(const Job& job) const {
  if (job.record.lockstep > 0) return job.record.lockstep;
  const int floor = 2 * std::max(1, worker_slots_);
  return std::min(std::max(floor, job.record.budget / kBlindBudgetShare),
                  std::max(2, options_.max_in_flight_per_job));
}

void JobManager::RefillAll(JobEffects& effects) {
  for (auto& [job_id, job] : jobs_) Refill(*job, effects);
}

void JobManager::CheckStops(JobEffects& effects) {
  for (auto& [job_id, job] : jobs_) {
    if (job->stop && job->stop_reason.empty() && job->phase == Job::Phase::kSearching) {
      Refill(*job, effects);
    }
  }
}

void JobManager::Refill(Job& job, JobEffects& effects) {
  if (job.phase != Job::Phase::kSearching) return;
  if (job.stop && job.stop_reason.empty()) {
    if (search::StopReason reason = job.stop->Check(); reason != search::StopReason::kNone) {
      job.stop_reason = std::string(search::StopReasonName(reason));
      // Proposed but not leased: never measured, so nothing is lost. The default still runs.
      std::erase_if(job.queue, [](const PendingTrial& t) { return !t.is_default; });
    }
  }
  if (!job.stop_reason.empty()) {
    if (job.queue.empty() && job.leased.empty()) Finalize(job, effects);
    return;
  }
  // Lockstep: the next batch is proposed only once the last one is all back (and observed).
  if (job.record.lockstep > 0 && (!job.queue.empty() || !job.leased.empty())) return;
  int queued = 0;  // configs this call queued
  for (int round = 0; round < kMaxProposalRounds; ++round) {
    const int in_flight = static_cast<int>(job.queue.size() + job.leased.size());
    const int want = std::min({job.record.budget - job.charged - in_flight,
                               ReadyTarget(job) - static_cast<int>(job.queue.size()),
                               InFlightLimit(job) - in_flight});
    if (want <= 0) break;
    std::vector<Config> configs = job.strategy->Propose(want);
    if (configs.empty()) {
      job.strategy_exhausted = true;
      break;
    }
    for (Config& config : configs) {
      std::string key = config.ToString();
      if (!job.tried.insert(key).second) continue;  // e.g. the default, measured already
      ++queued;
      std::string arm = job.strategy->ProposedBy(config);
      job.queue.push_back(
          PendingTrial{next_trial_id_++, std::move(config), false, false, {}, {}, false, 0});
      job.queue.back().arm = std::move(arm);
    }
  }
  const bool in_flight = !job.queue.empty() || !job.leased.empty();
  // A strategy that proposes only configs measured already (continue_search, the default) would
  // otherwise leave a job with nothing in flight and no result to wake it: it has nothing left.
  if (!in_flight && queued == 0) job.strategy_exhausted = true;
  if (!in_flight && (job.charged >= job.record.budget || job.strategy_exhausted)) {
    Finalize(job, effects);
  }
}

void JobManager::Finalize(Job& job, JobEffects& effects) {
  if (job.phase == Job::Phase::kSearching) {
    std::sort(job.candidates.begin(), job.candidates.end(), Faster);
    job.phase = Noisy(job) && StartPromotion(job) ? Job::Phase::kPromoting : Job::Phase::kVerifying;
  }
  if (job.phase != Job::Phase::kVerifying) return;
  // A config is published only after its numerics were verified; candidates are tried fastest
  // first.
  if (!job.candidates.empty()) {
    const Candidate& best = job.candidates.front();
    if (best.verified) {
      job.published = best;
      job.phase = Job::Phase::kDone;
      effects.finished_jobs.push_back(job.record.id);
      return;
    }
    auto verifies_best = [&](const PendingTrial& t) {
      return t.verify_final && t.config == best.config;
    };
    if (std::any_of(job.queue.begin(), job.queue.end(), verifies_best) ||
        std::any_of(job.leased.begin(), job.leased.end(),
                    [&](const auto& leased) { return verifies_best(leased.second); })) {
      return;  // its verification (or a tie-break) is on its way
    }
    job.queue.push_back(
        PendingTrial{next_trial_id_++, best.config, false, true, {best.measured_by}, {}, false, 0});
    return;
  }
  job.phase = Job::Phase::kDone;
  effects.finished_jobs.push_back(job.record.id);
}

std::vector<v1::TrialSpec> JobManager::TakeTrials(const v1::WorkerInfo& worker, int max_trials,
                                                  JobEffects& effects) {
  std::vector<v1::TrialSpec> specs;
  const auto& offered = worker.targets();
  std::vector<Job*> open;  // jobs with queued trials on a target this worker runs
  for (auto& [job_id, job] : jobs_) {
    if (!job->queue.empty() &&
        (offered.empty() ||
         std::find(offered.begin(), offered.end(), job->record.workload.target) != offered.end())) {
      open.push_back(job.get());
    }
  }
  // One trial at a time to the job that comes first: the highest priority, then (fair share
  // among equal priorities) the fewest trials in flight, then the least recently served (round
  // robin), then the oldest.
  auto first = [](const Job* a, const Job* b) {
    if (a->record.priority != b->record.priority) return a->record.priority > b->record.priority;
    if (a->leased.size() != b->leased.size()) return a->leased.size() < b->leased.size();
    if (a->last_served != b->last_served) return a->last_served < b->last_served;
    return a->record.id < b->record.id;
  };
  while (static_cast<int>(specs.size()) < max_trials && !open.empty()) {
    auto next = std::min_element(open.begin(), open.end(), first);
    Job& job = **next;
    // A trial whose earlier measurers disagree goes to another worker while there is one.
    auto it = std::find_if(job.queue.begin(), job.queue.end(), [&](const PendingTrial& t) {
      return alive_workers_ <= static_cast<int>(t.avoid_workers.size()) ||
             std::find(t.avoid_workers.begin(), t.avoid_workers.end(), worker.worker_id()) ==
                 t.avoid_workers.end();
    });
    if (it == job.queue.end()) {
      open.erase(next);
      continue;
    }
    PendingTrial trial = std::move(*it);
    job.queue.erase(it);
    specs.push_back(SpecFor(job, trial));
    job.leased[trial.id] = std::move(trial);
    job.last_served = ++lease_seq_;
    if (!job.running_persisted) {
      job.running_persisted = true;
      job.record.state = JobState::kRunning;
      effects.running_jobs.push_back(job.record.id);
    }
    // Proposals follow the workers' demand: what was taken is proposed again now, not when the
    // next result is committed.
    if (job.queue.empty()) Refill(job, effects);
    if (job.queue.empty()) open.erase(next);
  }
  return specs;
}

std::optional<TrialRecord> JobManager::ResultRecord(int64_t job_id, int64_t trial_id,
                                                    const v1::TrialResult& result,
                                                    const std::string& worker_id,
                                                    std::string* rejected) const {
  const Job* job = Find(job_id);
  if (job == nullptr) return std::nullopt;
  auto trial = job->leased.find(trial_id);
  if (trial == job->leased.end()) return std::nullopt;
  // A report no honest measurement could produce (report_check.h) is a runtime error with the
  // reason; its time and its claim of verification are dropped.
  if (std::optional<std::string> why =
          ImplausibleReport(result, job->record.roofline_ns, options_.noise_sigma)) {
    spdlog::warn("job {} trial {}: report rejected: {}", job_id, trial_id, *why);
    if (rejected != nullptr) *rejected = *why;
    TrialRecord row = RecordFor(*job, trial->second, TrialStatus::kRuntimeError,
                                StrCat("report rejected: ", *why));
    row.worker_id = worker_id;
    return row;
  }
  const TrialStatus status = *TrialStatusFromProto(result.status());
  TrialRecord row = RecordFor(*job, trial->second, status, result.message());
  row.time_ns = status == TrialStatus::kOk ? std::optional<double>(result.time_ns()) : std::nullopt;
  row.samples_ns.assign(result.samples_ns().begin(), result.samples_ns().end());
  row.bound = result.bound();
  row.stats_json = result.stats_json().empty() ? "{}" : result.stats_json();
  row.verified = result.verified();
  row.worker_id = worker_id;
  return row;
}

void JobManager::ApplyResult(int64_t job_id, const v1::TrialResult& result, JobEffects& effects) {
  Job* job = Find(job_id);
  if (job == nullptr) return;
  auto it = job->leased.find(result.trial_id());
  if (it == job->leased.end()) return;
  const PendingTrial trial = std::move(it->second);
  job->leased.erase(it);
  Apply(*job, trial, result, effects, /*refill=*/true);
}

void JobManager::LoseTrial(int64_t job_id, int64_t trial_id, const std::string& worker_id,
                           const std::string& why, JobEffects& effects) {
  Job* job = Find(job_id);
  if (job == nullptr) return;
  auto it = job->leased.find(trial_id);
  if (it == job->leased.end()) return;
  const PendingTrial trial = std::move(it->second);
  job->leased.erase(it);
  TrialRecord row = RecordFor(*job, trial, TrialStatus::kWorkerLost, why);
  row.worker_id = worker_id;
  effects.trials_to_store.push_back(std::move(row));
  v1::TrialResult lost;
  lost.set_status(ToProto(TrialStatus::kWorkerLost));
  Apply(*job, trial, lost, effects, /*refill=*/true);
  effects.changed_jobs.push_back(job_id);
}

void JobManager::Apply(Job& job, const PendingTrial& trial, const v1::TrialResult& result,
                       JobEffects& effects, bool refill) {
  // A result without a status (or with one this build does not know) is a runtime error.
  const TrialStatus status =
      TrialStatusFromProto(result.status()).value_or(TrialStatus::kRuntimeError);
  if (!IsChargedToBudget(status)) {
    // Not the config's fault: measure it again elsewhere.
    CountResult(status, job.counts);
    if (refill && job.phase != Job::Phase::kDone) {
      PendingTrial again = trial;
      again.id = next_trial_id_++;
      job.queue.push_front(std::move(again));
    }
    return;
  }
  if (trial.verify_final) {
    ApplyVerification(job, trial, status, result, effects);
    if (refill) Finalize(job, effects);
    return;
  }
  if (trial.promote) {
    ApplyPromotion(job, trial, status, result);
    if (refill) Finalize(job, effects);
    return;
  }
  job.charged++;
  CountResult(status, job.counts);
  search::Observation observation{trial.config, status == TrialStatus::kOk, result.time_ns()};
  if (status == TrialStatus::kOk) {
    // Not verified, whatever the worker says: only a verify_final re-measure verifies.
    Candidate candidate = MeasuredCandidate(trial, result);
    job.candidates.push_back(candidate);
    if (!job.best || Faster(candidate, *job.best)) job.best = candidate;
    if (trial.is_default) job.default_result = candidate;
  }
  if (trial.is_default && status != TrialStatus::kOk) {
    job.default_message = result.message();
  }
  if (status != TrialStatus::kOk) job.failed_by[result.worker_id()].emplace_back(trial, status);
  if (job.record.lockstep > 0 && refill) {
    // Held until the batch is in, then observed in the order it was proposed (trial ids follow
    // proposal order), so what the strategy sees does not depend on which result came first.
    job.held.emplace(trial.id, std::move(observation));
    if (!job.queue.empty() || !job.leased.empty()) return;
    for (const auto& [id, held] : job.held) Observe(job, held);
    job.held.clear();
  } else {
    Observe(job, observation);
  }
  if (refill) Refill(job, effects);
}

void JobManager::Observe(Job& job, const search::Observation& observation) {
  job.strategy->Observe(std::span<const search::Observation>(&observation, 1));
  if (job.stop) job.stop->Record(observation.ok, observation.time_ns);
}

bool JobManager::Noisy(const Job& job) const {
  if (options_.promote_top <= 0 || job.candidates.size() < 2) return false;
  return options_.noise_sigma > 0 || job.candidates.front().spread > kNoisySpread;
}

bool JobManager::StartPromotion(Job& job) {
  // The top candidates by their search median race; the race starts afresh when a quarantine
  // sent the job back to searching.
  const size_t top = std::min(job.candidates.size(), static_cast<size_t>(options_.promote_top));
  for (size_t i = 0; i < job.candidates.size(); ++i) {
    Candidate& c = job.candidates[i];
    c.race_samples.clear();
    c.race_mean_ns = 0;
    c.racing = i < top;
  }
  job.promoting.clear();
  job.promote_round = 0;
  if (top == 0) return false;
  QueueRaceRound(job);
  return true;
}

void JobManager::QueueRaceRound(Job& job) {
  // Each run by another worker than the candidate's measurer while one is alive.
  const int repeats = std::max(options_.promote_repeats, options_.repeats);
  for (const Candidate& c : job.candidates) {
    if (!c.racing) continue;
    const int64_t id = next_trial_id_++;
    job.queue.push_back(
        PendingTrial{id, c.config, false, false, {c.measured_by}, {}, true, repeats});
    job.promoting.insert(id);
  }
  ++job.promote_round;
}

void JobManager::ApplyPromotion(Job& job, const PendingTrial& trial, TrialStatus status,
                                const v1::TrialResult& result) {
  if (job.phase != Job::Phase::kPromoting || job.promoting.erase(trial.id) == 0) return;
  auto candidate = std::find_if(job.candidates.begin(), job.candidates.end(),
                                [&](const Candidate& c) { return c.config == trial.config; });
  if (candidate != job.candidates.end()) {
    if (status == TrialStatus::kOk && result.samples_ns_size() > 0) {
      // The race rests on the re-measures alone: the search median of the fastest candidates is
      // biased low (the winner's curse).
      candidate->race_samples.insert(candidate->race_samples.end(), result.samples_ns().begin(),
                                     result.samples_ns().end());
    } else {
      job.candidates.erase(candidate);  // it no longer measures: not a winner
    }
  }
  if (!job.promoting.empty()) return;
  std::vector<Candidate*> racing;
  std::vector<Location> locations;
  for (Candidate& c : job.candidates) {
    if (!c.racing) continue;
    const Location location = TrimmedMean(c.race_samples);
    c.race_mean_ns = location.mean_ns;
    racing.push_back(&c);
    locations.push_back(location);
  }
  const std::vector<bool> still = StillRacing(locations);
  int left = 0;
  for (size_t i = 0; i < racing.size(); ++i) {
    racing[i]->racing = still[i];
    left += still[i] ? 1 : 0;
  }
  if (left > 1 && job.promote_round < options_.promote_rounds) {
    QueueRaceRound(job);
    return;
  }
  FinishPromotion(job);
}

void JobManager::FinishPromotion(Job& job) {
  for (Candidate& c : job.candidates) {
    if (c.race_samples.empty()) continue;
    const TimeEstimate estimate = EstimateTime(c.race_samples);
    c.time_ns = estimate.median_ns;
    c.ci_ns = estimate.ci_ns;
    c.samples = estimate.samples;
  }
  auto rank = [](const Candidate& c) { return c.racing ? 0 : c.race_samples.empty() ? 2 : 1; };
  std::stable_sort(job.candidates.begin(), job.candidates.end(),
                   [&](const Candidate& a, const Candidate& b) {
                     if (rank(a) != rank(b)) return rank(a) < rank(b);
                     if (rank(a) < 2) return a.race_mean_ns < b.race_mean_ns;
                     return Faster(a, b);
                   });
  job.best.reset();
  if (!job.candidates.empty()) job.best = job.candidates.front();
  job.phase = Job::Phase::kVerifying;
}

void JobManager::ApplyVerification(Job& job, const PendingTrial& trial, TrialStatus status,
                                   const v1::TrialResult& result, JobEffects& effects) {
  if (job.candidates.empty() || job.candidates.front().config != trial.config) return;
  Candidate& best = job.candidates.front();
  const bool measured = status == TrialStatus::kOk && result.verified();
  auto agrees = [&](double time_ns) {
    return MediansAgree(time_ns, result.time_ns(), options_.noise_sigma, options_.repeats);
  };
  auto quarantine = [&](const std::string& worker, double claimed_ns, double honest_ns) {
    // One worker contradicting itself (the only one alive) is noise, not a lie.
    if (worker.empty() || best.measured_by == result.worker_id()) return;
    effects.quarantine.emplace_back(
        worker, fmt::format("job {}: reported {} ns for {}, re-measured at {} ns", job.record.id,
                            claimed_ns, trial.config.ToString(), honest_ns));
  };
  if (measured && agrees(best.time_ns)) {
    best.verified = true;
    // A tie-break that sides with the measurer: the first verifier was the outlier.
    if (trial.dispute) {
      quarantine(trial.dispute->verifier, trial.dispute->verified_ns, result.time_ns());
    }
    return;
  }
  if (measured && !trial.dispute && alive_workers_ > 2) {
    // Two workers disagree: a third, neither of them, decides which one is the outlier.
    job.queue.push_front(
        PendingTrial{next_trial_id_++,
                     trial.config,
                     false,
                     true,
                     {best.measured_by, result.worker_id()},
                     Dispute{best.measured_by, best.time_ns, result.worker_id(), result.time_ns()},
                     false,
                     0});
    return;
  }
  const std::string why =
      measured ? fmt::format(
                     "its time {} ns (worker {}) disagrees with the re-measured {} ns "
                     "(worker {})",
                     best.time_ns, best.measured_by, result.time_ns(), result.worker_id())
               : result.message();
  spdlog::warn("job {}: best candidate {} failed verification: {}", job.record.id,
               trial.config.ToString(), tessel::Shown(why, 512));
  // The measurer is the outlier: its time is replaced by this honest measurement (still to be
  // verified by another worker), and its other results are measured again (DropWorkerResults).
  auto replace_measurer = [&] {
    quarantine(best.measured_by, best.time_ns, result.time_ns());
    best = MeasuredCandidate(trial, result);
    std::sort(job.candidates.begin(), job.candidates.end(), Faster);
    RecomputeBest(job);
  };
  // Two workers disagree and no third decides (or the tie-break sided with neither): without a
  // third opinion, the faster report is the suspect, since a time too fast is what would be
  // published. One worker contradicting itself is noise: the candidate is dropped.
  const bool two_workers = best.measured_by != result.worker_id();
  if (measured && trial.dispute && agrees(trial.dispute->verified_ns)) {
    replace_measurer();  // the tie-break sides with the first verifier
    return;
  }
  if (measured && !trial.dispute && two_workers) {
    if (best.time_ns < result.time_ns()) {
      replace_measurer();
    } else {
      // The verifier flattered the candidate: it is the suspect; the candidate stays, to be
      // verified again elsewhere.
      quarantine(result.worker_id(), result.time_ns(), best.time_ns);
    }
    return;
  }
  job.rejected++;
  job.candidates.erase(job.candidates.begin());
  if (job.best && job.best->config == trial.config) {
    RecomputeBest(job);
  }
}

void JobManager::DropWorkerResults(const std::string& worker_id, JobEffects& effects) {
  for (auto& [job_id, job_ptr] : jobs_) {
    Job& job = *job_ptr;
    if (job.phase == Job::Phase::kDone) continue;
    int dropped = 0;
    for (auto it = job.candidates.begin(); it != job.candidates.end();) {
      if (it->measured_by != worker_id || it->verified) {
        ++it;
        continue;
      }
      const bool is_default = job.default_result && job.default_result->trial_id == it->trial_id;
      if (is_default) job.default_result.reset();
      job.queue.push_back(
          PendingTrial{next_trial_id_++, it->config, is_default, false, {}, {}, false, 0});
      it = job.candidates.erase(it);
      ++dropped;
    }
    job.counts.set_ok(job.counts.ok() - dropped);
    // Its failures too: a liar can hide a good config by calling it invalid or failed.
    if (auto failed = job.failed_by.find(worker_id); failed != job.failed_by.end()) {
      for (auto& [trial, status] : failed->second) {
        if (status == TrialStatus::kInvalidConfig) {
          job.counts.set_invalid(job.counts.invalid() - 1);
        } else {
          job.counts.set_failed(job.counts.failed() - 1);
        }
        job.queue.push_back(PendingTrial{
            next_trial_id_++, trial.config, trial.is_default, false, {}, {}, false, 0});
        ++dropped;
      }
      job.failed_by.erase(failed);
    }
    if (dropped == 0) continue;
    // Measured again, not charged again (counted as retried); the order of candidates is rebuilt
    // when the job finishes.
    job.charged -= dropped;
    job.counts.set_total(job.counts.total() - dropped);
    job.counts.set_retried(job.counts.retried() + dropped);
    job.phase = Job::Phase::kSearching;
    // A race under way starts again once the re-queued trials are back.
    std::erase_if(job.queue, [](const PendingTrial& t) { return t.promote; });
    job.promoting.clear();
    RecomputeBest(job);
    spdlog::warn("job {}: {} result(s) of quarantined worker {} re-queued", job_id, dropped,
                 worker_id);
    effects.changed_jobs.push_back(job_id);
    Refill(job, effects);
  }
}

TrialRecord JobManager::RecordFor(const Job& job, const PendingTrial& trial, TrialStatus status,
                                  const std::string& message) const {
  TrialRecord row;
  row.id = trial.id;
  row.job_id = job.record.id;
  row.config = trial.config.ToString();
  row.status = status;
  row.message = message;
  row.is_default = trial.is_default;
  row.is_verify = trial.verify_final || trial.promote;  // neither is charged to the budget
  row.arm = trial.is_default     ? "default"
            : trial.verify_final ? "verify"
            : trial.promote      ? "promote"
            : trial.arm.empty()  ? "seed"
                                 : trial.arm;
  row.created_ms = NowUnixMs();
  return row;
}

v1::TrialSpec JobManager::SpecFor(const Job& job, const PendingTrial& trial) const {
  v1::TrialSpec spec;
  spec.set_trial_id(trial.id);
  spec.set_job_id(job.record.id);
  *spec.mutable_workload() = WorkloadProto(job.record);
  spec.set_config(trial.config.ToString());
  v1::MeasureProtocol* protocol = spec.mutable_protocol();
  protocol->set_warmup(options_.warmup);
  protocol->set_repeats(trial.repeats > 0 ? trial.repeats : options_.repeats);
  protocol->set_verify(trial.verify_final ? "always" : options_.verify);
  protocol->set_noise_sigma(options_.noise_sigma);
  spec.set_seed(job.record.seed * 1'000'003 + static_cast<uint64_t>(trial.id));
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Finishing

std::optional<JobEnd> JobManager::Conclude(int64_t job_id) const {
  const Job* found = Find(job_id);
  if (found == nullptr) return std::nullopt;
  const Job& job = *found;
  JobEnd end;
  if (job.cancelled) {
    end.stopped_by = JobStateName(JobState::kCancelled);  // a cancel is named by its state
  } else if (!job.stop_reason.empty()) {
    end.stopped_by = job.stop_reason;
  } else if (job.charged < job.record.budget && job.strategy_exhausted) {
    end.stopped_by = std::string(search::StopReasonName(search::StopReason::kExhausted));
  } else {
    end.stopped_by = std::string(search::StopReasonName(search::StopReason::kBudget));
  }
  if (job.cancelled) {
    end.state = JobState::kCancelled;
    end.message = "cancelled by request";
  } else if (job.published) {
    end.state = JobState::kCompleted;
    BestRecord best;
    best.workload = job.record.workload;
    best.kernel_version = job.record.kernel_version;
    best.target_version = job.record.target_version;
    best.config = job.published->config.ToString();
    best.time_ns = job.published->time_ns;
    best.time_ci_ns = job.published->ci_ns;
    best.samples = job.published->samples > 0 ? job.published->samples : options_.repeats;
    best.noise_sigma = options_.noise_sigma;
    best.job_id = job_id;
    best.trial_id = job.published->trial_id;
    best.published_ms = NowUnixMs();
    end.publish = best;
    if (job.rejected > 0) {
      end.message = StrCat(job.rejected, " faster config(s) failed verification");
    }
    if (!job.stop_reason.empty()) {
      end.message =
          StrCat(end.message, end.message.empty() ? "" : "; ", "stopped early: ", job.stop_reason);
    }
  } else if (job.counts.ok() == 0) {
    end.state = JobState::kFailed;
    end.message =
        StrCat("no config could be measured (", job.counts.total(), " trial(s) failed",
               job.default_message.empty() ? "" : "; default config: ", job.default_message, ")");
  } else {
    end.state = JobState::kFailed;
    end.message = "no measured config passed numerical verification";
  }
  return end;
}

void JobManager::MarkFinished(int64_t job_id, const JobEnd& end) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  JobRecord& record = it->second->record;
  record.state = end.state;
  record.message = end.message;
  record.stopped_by = end.stopped_by;
  record.finished_ms = NowUnixMs();
  finished_[job_id] = ViewOf(*it->second);
  jobs_.erase(it);
}

}  // namespace tessel::server

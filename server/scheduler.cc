#include "server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "schema/strings.h"
#include "server/convert.h"

namespace tessel::server {
namespace {

// Largest budget a job may ask for; a guard against typos, not a limit of the design.
constexpr int kMaxBudget = 1'000'000;
// Longest a Lease call is held open.
constexpr int kMaxLeaseWaitMs = 30'000;
// Most trials one Lease call may take.
constexpr int kMaxTrialsPerLease = 256;
// A worker silent for this many heartbeat intervals is declared lost.
constexpr int kMissedHeartbeatsForLost = 3;
// Proposal rounds per refill when a strategy returns configs that were already tried.
constexpr int kMaxProposalRounds = 3;
// Lookup answers kept in memory; the cache is dropped whole when it would grow past this.
constexpr size_t kMaxCachedLookups = 100'000;
// Warm start: how many recent jobs are scanned for neighbours, and how many are used.
constexpr int kWarmStartScannedJobs = 200;
constexpr int kMaxWarmStartNeighbours = 4;
constexpr char kDefaultStrategy[] = "auto";

bool IsFinalState(const std::string& state) {
  return state == "completed" || state == "cancelled" || state == "failed";
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

}  // namespace

Scheduler::Scheduler(Store* store, const SchedulerOptions& options)
    : store_(store), options_(options) {}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Store* store,
                                                             const SchedulerOptions& options) {
  if (options.lease_ms <= 0 || options.heartbeat_interval_ms <= 0 ||
      options.max_in_flight_per_job <= 0 || options.repeats <= 0 || options.warmup < 0) {
    return absl::InvalidArgumentError(
        "scheduler options: lease_ms, heartbeat_interval_ms, max_in_flight_per_job and repeats "
        "must be positive, warmup non-negative");
  }
  std::unique_ptr<Scheduler> scheduler(new Scheduler(store, options));
  if (absl::Status status = scheduler->Recover(); !status.ok()) return status;
  scheduler->housekeeping_ = std::thread([s = scheduler.get()] { s->Housekeeping(); });
  return scheduler;
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::Shutdown() {
  std::deque<ParkedLease> parked;
  std::map<int64_t, Watcher> watchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    parked.swap(parked_);
    watchers.swap(watchers_);
  }
  cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  for (ParkedLease& p : parked) p.done(absl::UnavailableError("server is shutting down"));
  pool_.join();
}

// ---------------------------------------------------------------------------------------------
// Jobs

absl::StatusOr<std::unique_ptr<Scheduler::Job>> Scheduler::BuildJob(const JobRecord& record) {
  v1::Workload workload;
  workload.set_kernel(record.workload.kernel);
  workload.set_dtype(record.workload.dtype);
  workload.set_target(record.workload.target);
  auto dims = Dims::Parse(record.dims_display);
  if (!dims.ok()) return dims.status();
  for (const auto& [name, value] : dims->items()) {
    v1::Dim* dim = workload.add_dims();
    dim->set_name(name);
    dim->set_value(value);
  }
  auto resolved = ResolveWorkload(workload);
  if (!resolved.ok()) return resolved.status();
  return BuildJob(record, std::move(*resolved));
}

absl::StatusOr<std::unique_ptr<Scheduler::Job>> Scheduler::BuildJob(const JobRecord& record,
                                                                    ResolvedWorkload resolved) {
  auto job = std::make_unique<Job>();
  job->record = record;
  job->kernel = resolved.kernel;
  job->target = std::move(resolved.target);
  job->problem = std::move(resolved.problem);
  auto space = job->kernel->SpaceFor(job->problem, job->target);
  if (!space.ok()) return space.status();
  job->space = std::make_unique<kernels::Space>(std::move(*space));
  auto strategy = search::MakeStrategy(record.strategy, *job->space, record.seed);
  if (!strategy.ok()) return strategy.status();
  job->strategy = std::move(*strategy);
  job->stop = StopTrackerFor(record);
  return job;
}

int Scheduler::WarmStart(Job& job) {
  auto recent = store_->ListJobs(kWarmStartScannedJobs);
  if (!recent.ok()) return 0;
  int used = 0;
  for (const JobRecord& other : *recent) {
    if (used >= kMaxWarmStartNeighbours) break;
    if (other.id == job.record.id || other.state != "completed" ||
        other.workload.kernel != job.record.workload.kernel ||
        other.workload.dtype != job.record.workload.dtype ||
        other.kernel_version != job.record.kernel_version) {
      continue;
    }
    auto trials = store_->TrialsForJob(other.id);
    if (!trials.ok()) continue;
    std::vector<search::Observation> observations;
    for (const TrialRecord& t : *trials) {
      if (t.is_verify || t.status == "WORKER_LOST" || t.status == "CANCELLED") continue;
      auto config = Config::Parse(t.config);
      if (!config.ok()) continue;
      observations.push_back(
          search::Observation{*std::move(config), t.status == "OK", t.time_ns.value_or(0)});
    }
    if (observations.empty()) continue;
    job.strategy->ObservePrior(observations);
    ++used;
  }
  return used;
}

absl::Status Scheduler::Recover() {
  auto max_id = store_->MaxTrialId();
  if (!max_id.ok()) return max_id.status();
  next_trial_id_ = *max_id + 1;

  std::vector<JobRecord> unfinished;
  for (const char* state : {"queued", "running"}) {
    auto jobs = store_->JobsInState(state);
    if (!jobs.ok()) return jobs.status();
    unfinished.insert(unfinished.end(), jobs->begin(), jobs->end());
  }
  Effects effects;
  for (const JobRecord& record : unfinished) {
    auto job = BuildJob(record);
    if (job.ok() && (*job)->kernel->version() != record.kernel_version) {
      job = absl::FailedPreconditionError(
          StrCat("kernel ", record.workload.kernel, " changed from version ", record.kernel_version,
                 " to ", (*job)->kernel->version(), " since the job started"));
    }
    if (!job.ok()) {
      spdlog::warn("job {} cannot be resumed: {}", record.id, std::string(job.status().message()));
      if (absl::Status s = store_->UpdateJobState(
              record.id, "failed",
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
      if (t.is_verify) {
        verify_rows.push_back(t);
        continue;
      }
      PendingTrial trial{t.id, *config, t.is_default, false};
      v1::TrialResult result = TrialResultFromRecord(t);
      const bool charged = t.status != "WORKER_LOST" && t.status != "CANCELLED";
      if (charged) {
        // A lost trial's config was never measured: leave it free to be proposed again.
        j.tried.insert(t.config);
        default_measured |= t.is_default;
      }
      ApplyResultLocked(j, trial, result, effects, /*refill=*/false);
    }
    if (!default_measured) {
      auto default_config = Config::Parse(record.default_config);
      if (default_config.ok()) {
        j.queue.push_front(PendingTrial{next_trial_id_++, *default_config, true, false});
        j.tried.insert(record.default_config);
      }
    }
    for (const TrialRecord& t : verify_rows) {
      for (Candidate& c : j.candidates) {
        if (c.config.ToString() == t.config && t.status == "OK" && t.verified) c.verified = true;
      }
    }
    j.running_persisted = record.state == "running";
    spdlog::info("resumed job {} ({} trials already measured)", record.id, trials->size());
    int64_t id = record.id;
    jobs_[id] = std::move(*job);
    Refill(*jobs_[id], effects);
  }
  Apply(std::move(effects));
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> Scheduler::Submit(const v1::SubmitJobRequest& request) {
  auto resolved = ResolveWorkload(request.workload());
  if (!resolved.ok()) return resolved.status();
  std::string strategy = request.strategy().empty() ? kDefaultStrategy : request.strategy();
  auto names = search::StrategyNames();
  if (std::find(names.begin(), names.end(), strategy) == names.end()) {
    return absl::InvalidArgumentError(
        StrCat("unknown strategy '", strategy, "'; known strategies: ", StrJoin(names, ", ")));
  }
  // The effort preset fills the budget and the no-improvement stop where the request left them 0.
  const search::EffortPreset* preset = nullptr;
  if (!request.effort().empty()) {
    preset = search::FindEffortPreset(request.effort());
    if (preset == nullptr) {
      return absl::InvalidArgumentError(StrCat("effort must be one of ",
                                               search::EffortPresetNames(), " (or empty), got '",
                                               request.effort(), "'"));
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
  const int no_improvement = request.stop_after_no_improvement() == 0 && preset
                                 ? preset->no_improvement
                                 : request.stop_after_no_improvement();
  std::vector<Config> seeds;
  if (request.seed_configs_size() > 0) {
    auto space = resolved->kernel->SpaceFor(resolved->problem, resolved->target);
    if (!space.ok()) return space.status();
    for (const std::string& text : request.seed_configs()) {
      auto config = Config::Parse(text);
      if (!config.ok()) return config.status();
      if (absl::Status valid = space->Validate(*config); !valid.ok()) {
        return absl::InvalidArgumentError(
            StrCat("seed config ", text, " is invalid: ", std::string(valid.message())));
      }
      seeds.push_back(*std::move(config));
    }
  }

  JobRecord record;
  record.workload = WorkloadRecordFor(*resolved);
  record.dims_display = resolved->problem.dims.ToString();
  record.kernel_version = resolved->kernel->version();
  record.target_version = resolved->target.version;
  record.strategy = strategy;
  record.budget = budget;
  record.seed = request.seed();
  record.state = "queued";
  record.default_config = resolved->kernel->Default(resolved->problem, resolved->target).ToString();
  record.roofline_ns = kernels::RooflineNs(*resolved->kernel, resolved->problem, resolved->target);
  record.created_ms = NowUnixMs();
  record.time_limit_s = request.time_limit_s();
  record.stop_after_no_improvement = no_improvement;
  record.target_time_ns = request.target_time_ns();
  record.effort = request.effort();
  auto id = store_->CreateJob(record);
  if (!id.ok()) return id.status();
  record.id = *id;

  auto job = BuildJob(record, *std::move(resolved));
  if (!job.ok()) {
    (void)store_->UpdateJobState(record.id, "failed", std::string(job.status().message()));
    return job.status();
  }
  const int neighbours = request.cold_start() ? 0 : WarmStart(**job);
  Effects effects;
  v1::Job view;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return absl::UnavailableError("server is shutting down");
    Job& j = **job;
    auto default_config = Config::Parse(record.default_config);
    // Every job measures the default first, so the tuned result is never worse than untuned.
    j.queue.push_back(PendingTrial{next_trial_id_++, *default_config, true, false});
    j.tried.insert(record.default_config);
    for (Config& seed : seeds) {
      if (static_cast<int>(j.queue.size()) >= record.budget) break;
      if (!j.tried.insert(seed.ToString()).second) continue;
      j.queue.push_back(PendingTrial{next_trial_id_++, std::move(seed), false, false});
    }
    jobs_[record.id] = std::move(*job);
    Refill(*jobs_[record.id], effects);
    ServeParked(effects);
    view = JobView(*jobs_[record.id]);
  }
  spdlog::info("job {}: {} {} {} on {}, strategy {}, budget {}, warm start from {} job(s)",
               record.id, record.workload.kernel, record.dims_display, record.workload.dtype,
               record.workload.target, strategy, record.budget, neighbours);
  Apply(std::move(effects));
  return view;
}

std::optional<v1::Job> Scheduler::MemoryJobViewLocked(int64_t job_id) const {
  if (auto it = jobs_.find(job_id); it != jobs_.end()) return JobView(*it->second);
  if (auto it = finished_.find(job_id); it != finished_.end()) return it->second;
  return std::nullopt;
}

absl::StatusOr<v1::Job> Scheduler::GetJob(int64_t job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::optional<v1::Job> view = MemoryJobViewLocked(job_id)) return *std::move(view);
  }
  return StoredJobView(job_id);
}

absl::StatusOr<std::vector<v1::Job>> Scheduler::ListJobs(int limit) {
  auto records = store_->ListJobs(limit);
  if (!records.ok()) return records.status();
  // Jobs in memory answer from there; the others from their stored trials, read in one query.
  std::vector<std::optional<v1::Job>> views(records->size());
  std::vector<int64_t> stored;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < records->size(); ++i) {
      views[i] = MemoryJobViewLocked((*records)[i].id);
      if (!views[i]) stored.push_back((*records)[i].id);
    }
  }
  if (!stored.empty()) {
    auto trials = store_->TrialsForJobs(stored);
    if (!trials.ok()) return trials.status();
    static const std::vector<TrialRecord> kNone;
    for (size_t i = 0; i < records->size(); ++i) {
      if (views[i]) continue;
      auto it = trials->find((*records)[i].id);
      views[i] = StoredJobView((*records)[i], it == trials->end() ? kNone : it->second);
    }
  }
  std::vector<v1::Job> jobs;
  jobs.reserve(views.size());
  for (std::optional<v1::Job>& view : views) jobs.push_back(std::move(*view));
  return jobs;
}

absl::StatusOr<v1::Job> Scheduler::StoredJobView(int64_t job_id) {
  auto record = store_->GetJob(job_id);
  if (!record.ok()) return record.status();
  auto trials = store_->TrialsForJob(job_id);
  if (!trials.ok()) return trials.status();
  return StoredJobView(*record, *trials);
}

v1::Job Scheduler::StoredJobView(const JobRecord& record, const std::vector<TrialRecord>& trials) {
  v1::Job view = JobViewFromRecord(record, trials);
  if (const kernels::Kernel* kernel = kernels::FindKernel(record.workload.kernel)) {
    auto target = sim::LoadTarget(record.workload.target);
    view.set_stale(kernel->version() != record.kernel_version ||
                   (target.ok() && target->version != record.target_version));
  }
  return view;
}

absl::StatusOr<v1::Job> Scheduler::Cancel(int64_t job_id) {
  Effects effects;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || it->second->phase == Phase::kDone) {
      if (it == jobs_.end() && !finished_.contains(job_id)) {
        auto stored = store_->GetJob(job_id);
        if (!stored.ok()) return stored.status();
        return absl::FailedPreconditionError(StrCat("job ", job_id, " is already ", stored->state));
      }
      return absl::FailedPreconditionError(StrCat("job ", job_id, " has already finished"));
    }
    Job& job = *it->second;
    job.queue.clear();
    for (auto lease = leases_.begin(); lease != leases_.end();) {
      if (lease->second.job_id != job_id) {
        ++lease;
        continue;
      }
      TrialRecord row = RecordFor(job, lease->second.trial, "CANCELLED", "job cancelled");
      row.worker_id = lease->second.worker_id;
      effects.trials_to_store.push_back(std::move(row));
      lease = leases_.erase(lease);
    }
    job.leased = 0;
    job.cancelled = true;
    job.phase = Phase::kDone;
    effects.finished_jobs.push_back(job_id);
  }
  Apply(std::move(effects));
  return GetJob(job_id);
}

absl::StatusOr<std::vector<v1::TrialResult>> Scheduler::ListTrials(int64_t job_id) {
  auto record = store_->GetJob(job_id);
  if (!record.ok()) return record.status();
  auto trials = store_->TrialsForJob(job_id);
  if (!trials.ok()) return trials.status();
  std::vector<v1::TrialResult> out;
  out.reserve(trials->size());
  for (const TrialRecord& t : *trials) out.push_back(TrialResultFromRecord(t));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Proposals, results, finishing. All REQUIRE mu_ held.

void Scheduler::Refill(Job& job, Effects& effects) {
  if (job.phase != Phase::kSearching) return;
  if (job.stop && job.stop_reason.empty()) {
    if (search::StopReason reason = job.stop->Check(); reason != search::StopReason::kNone) {
      job.stop_reason = std::string(search::StopReasonName(reason));
      // Proposed but not leased: never measured, so nothing is lost. The default still runs.
      std::erase_if(job.queue, [](const PendingTrial& t) { return !t.is_default; });
    }
  }
  if (!job.stop_reason.empty()) {
    if (job.queue.empty() && job.leased == 0) Finalize(job, effects);
    return;
  }
  for (int round = 0; round < kMaxProposalRounds; ++round) {
    const int in_flight = static_cast<int>(job.queue.size()) + job.leased;
    const int want =
        std::min(job.record.budget - job.charged - in_flight, InFlightLimit() - in_flight);
    if (want <= 0) break;
    std::vector<Config> configs = job.strategy->Propose(want);
    if (configs.empty()) {
      job.strategy_exhausted = true;
      break;
    }
    for (Config& config : configs) {
      std::string key = config.ToString();
      if (!job.tried.insert(key).second) continue;  // e.g. the default, measured already
      job.queue.push_back(PendingTrial{next_trial_id_++, std::move(config), false, false});
    }
  }
  const int in_flight = static_cast<int>(job.queue.size()) + job.leased;
  if (in_flight == 0 && (job.charged >= job.record.budget || job.strategy_exhausted)) {
    Finalize(job, effects);
  }
}

bool Scheduler::Faster(const Candidate& a, const Candidate& b) {
  return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.trial_id < b.trial_id);
}

int Scheduler::InFlightLimit() const {
  int slots = 0;
  for (const auto& [id, worker] : workers_) {
    if (!worker.lost) slots += worker.info.slots();
  }
  return std::clamp(2 * slots, 2, std::max(2, options_.max_in_flight_per_job));
}

void Scheduler::Finalize(Job& job, Effects& effects) {
  if (job.phase == Phase::kSearching) {
    job.phase = Phase::kVerifying;
    std::sort(job.candidates.begin(), job.candidates.end(), Faster);
  }
  if (job.phase != Phase::kVerifying) return;
  // A config is published only after its numerics were verified; candidates are tried fastest
  // first.
  if (!job.candidates.empty()) {
    const Candidate& best = job.candidates.front();
    if (best.verified) {
      job.published = best;
      job.phase = Phase::kDone;
      effects.finished_jobs.push_back(job.record.id);
      return;
    }
    PendingTrial verify{next_trial_id_++, best.config, false, true};
    job.queue.push_back(std::move(verify));
    return;
  }
  job.phase = Phase::kDone;
  effects.finished_jobs.push_back(job.record.id);
}

void Scheduler::ApplyResult(Job& job, const PendingTrial& trial, const v1::TrialResult& result,
                            Effects& effects) {
  ApplyResultLocked(job, trial, result, effects, /*refill=*/true);
}

void Scheduler::ApplyResultLocked(Job& job, const PendingTrial& trial,
                                  const v1::TrialResult& result, Effects& effects, bool refill) {
  const v1::TrialStatus status = result.status();
  if (status == v1::TRIAL_WORKER_LOST || status == v1::TRIAL_CANCELLED) {
    // Not the config's fault: measure it again elsewhere, without charging the budget.
    job.counts.set_retried(job.counts.retried() + 1);
    if (refill && job.phase != Phase::kDone) {
      job.queue.push_front(
          PendingTrial{next_trial_id_++, trial.config, trial.is_default, trial.verify_final});
    }
    return;
  }
  if (trial.verify_final) {
    if (!job.candidates.empty() && job.candidates.front().config == trial.config) {
      if (status == v1::TRIAL_OK && result.verified()) {
        job.candidates.front().verified = true;
      } else {
        spdlog::warn("job {}: best candidate {} failed verification: {}", job.record.id,
                     trial.config.ToString(), result.message());
        job.rejected++;
        job.candidates.erase(job.candidates.begin());
        if (job.best && job.best->config == trial.config) {
          job.best.reset();
          for (const Candidate& c : job.candidates) {
            if (!job.best || Faster(c, *job.best)) job.best = c;
          }
        }
      }
    }
    if (refill) Finalize(job, effects);
    return;
  }
  job.charged++;
  job.counts.set_total(job.counts.total() + 1);
  search::Observation observation{trial.config, status == v1::TRIAL_OK, result.time_ns()};
  if (status == v1::TRIAL_OK) {
    job.counts.set_ok(job.counts.ok() + 1);
    Candidate candidate{result.time_ns(), trial.config, trial.id, result.verified()};
    job.candidates.push_back(candidate);
    if (!job.best || Faster(candidate, *job.best)) job.best = candidate;
    if (trial.is_default) job.default_result = candidate;
  } else if (status == v1::TRIAL_INVALID_CONFIG) {
    job.counts.set_invalid(job.counts.invalid() + 1);
  } else {
    job.counts.set_failed(job.counts.failed() + 1);
  }
  if (trial.is_default && status != v1::TRIAL_OK) {
    job.default_message = result.message();
  }
  job.strategy->Observe(std::span<const search::Observation>(&observation, 1));
  if (job.stop) job.stop->Record(status == v1::TRIAL_OK, result.time_ns());
  if (refill) Refill(job, effects);
}

std::vector<v1::TrialSpec> Scheduler::TakeTrials(const std::string& worker_id, int max_trials,
                                                 Effects& effects) {
  std::vector<v1::TrialSpec> specs;
  auto worker = workers_.find(worker_id);
  if (worker == workers_.end()) return specs;
  const auto& offered = worker->second.info.targets();
  const int64_t deadline = NowUnixMs() + options_.lease_ms;
  for (auto& [job_id, job_ptr] : jobs_) {
    Job& job = *job_ptr;
    if (job.queue.empty()) continue;
    if (!offered.empty() &&
        std::find(offered.begin(), offered.end(), job.record.workload.target) == offered.end()) {
      continue;
    }
    while (!job.queue.empty() && static_cast<int>(specs.size()) < max_trials) {
      PendingTrial trial = std::move(job.queue.front());
      job.queue.pop_front();
      specs.push_back(SpecFor(job, trial));
      leases_[trial.id] = LeasedTrial{std::move(trial), job_id, worker_id, deadline};
      job.leased++;
    }
    if (!job.running_persisted) {
      job.running_persisted = true;
      job.record.state = "running";
      effects.running_jobs.push_back(job_id);
    }
    if (static_cast<int>(specs.size()) >= max_trials) break;
  }
  worker->second.info.set_leased_trials(worker->second.info.leased_trials() +
                                        static_cast<int>(specs.size()));
  return specs;
}

void Scheduler::ServeParked(Effects& effects) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    std::vector<v1::TrialSpec> specs =
        TakeTrials(it->request.worker_id(), it->request.max_trials(), effects);
    if (specs.empty()) {
      ++it;
      continue;
    }
    v1::LeaseResponse response;
    for (auto& spec : specs) *response.add_trials() = std::move(spec);
    response.set_lease_deadline_unix_ms(NowUnixMs() + options_.lease_ms);
    effects.leases.emplace_back(std::move(it->done), std::move(response));
    it = parked_.erase(it);
  }
}

void Scheduler::ExpireLease(int64_t trial_id, const std::string& why, Effects& effects) {
  auto it = leases_.find(trial_id);
  if (it == leases_.end()) return;
  LeasedTrial lease = std::move(it->second);
  leases_.erase(it);
  if (auto w = workers_.find(lease.worker_id); w != workers_.end()) {
    w->second.info.set_leased_trials(std::max(0, w->second.info.leased_trials() - 1));
  }
  auto job_it = jobs_.find(lease.job_id);
  if (job_it == jobs_.end()) return;
  Job& job = *job_it->second;
  job.leased--;
  TrialRecord row = RecordFor(job, lease.trial, "WORKER_LOST", why);
  row.worker_id = lease.worker_id;
  effects.trials_to_store.push_back(row);
  v1::TrialResult lost;
  lost.set_status(v1::TRIAL_WORKER_LOST);
  ApplyResult(job, lease.trial, lost, effects);
  effects.changed_jobs.push_back(lease.job_id);
}

TrialRecord Scheduler::RecordFor(const Job& job, const PendingTrial& trial,
                                 const std::string& status, const std::string& message) const {
  TrialRecord row;
  row.id = trial.id;
  row.job_id = job.record.id;
  row.config = trial.config.ToString();
  row.status = status;
  row.message = message;
  row.is_default = trial.is_default;
  row.is_verify = trial.verify_final;
  row.created_ms = NowUnixMs();
  return row;
}

v1::TrialSpec Scheduler::SpecFor(const Job& job, const PendingTrial& trial) const {
  v1::TrialSpec spec;
  spec.set_trial_id(trial.id);
  spec.set_job_id(job.record.id);
  *spec.mutable_workload() = WorkloadProto(job.record);
  spec.set_config(trial.config.ToString());
  v1::MeasureProtocol* protocol = spec.mutable_protocol();
  protocol->set_warmup(options_.warmup);
  protocol->set_repeats(options_.repeats);
  protocol->set_verify(trial.verify_final ? "always" : options_.verify);
  protocol->set_noise_sigma(options_.noise_sigma);
  spec.set_seed(job.record.seed * 1'000'003 + static_cast<uint64_t>(trial.id));
  return spec;
}

v1::Job Scheduler::JobView(const Job& job) const {
  v1::Job view;
  view.set_id(job.record.id);
  *view.mutable_workload() = WorkloadProto(job.record);
  view.set_strategy(job.record.strategy);
  view.set_budget(job.record.budget);
  view.set_seed(job.record.seed);
  view.set_kernel_version(job.record.kernel_version);
  view.set_target_version(job.record.target_version);
  view.set_roofline_ns(job.record.roofline_ns);
  view.set_created_unix_ms(job.record.created_ms);
  view.set_state(JobStateFromString(job.record.state));
  view.set_message(job.record.message);
  view.set_effort(job.record.effort);
  view.set_time_limit_s(job.record.time_limit_s);
  view.set_stop_after_no_improvement(job.record.stop_after_no_improvement);
  view.set_target_time_ns(job.record.target_time_ns);
  view.set_stopped_by(job.record.stopped_by);
  *view.mutable_trials() = job.counts;
  view.mutable_trials()->set_pending(static_cast<int>(job.queue.size()) + job.leased);
  const std::optional<Candidate>& best = job.published ? job.published : job.best;
  if (best) {
    view.mutable_best()->set_config(best->config.ToString());
    view.mutable_best()->set_time_ns(best->time_ns);
    view.mutable_best()->set_trial_id(best->trial_id);
  }
  view.mutable_default_config()->set_config(job.record.default_config);
  if (job.default_result) {
    view.mutable_default_config()->set_time_ns(job.default_result->time_ns);
    view.mutable_default_config()->set_trial_id(job.default_result->trial_id);
  }
  return view;
}

// ---------------------------------------------------------------------------------------------
// Effects, finishing and notification (never under mu_)

void Scheduler::Apply(Effects effects) {
  if (!effects.trials_to_store.empty()) {
    if (absl::Status s = store_->InsertTrials(effects.trials_to_store); !s.ok()) {
      spdlog::error("store: cannot record {} trial(s): {}", effects.trials_to_store.size(),
                    std::string(s.message()));
    }
  }
  for (int64_t job_id : effects.running_jobs) {
    if (absl::Status s = store_->UpdateJobState(job_id, "running", ""); !s.ok()) {
      spdlog::error("store: job {}: {}", job_id, std::string(s.message()));
    }
  }
  for (auto& [done, response] : effects.leases) done(std::move(response));
  for (int64_t job_id : effects.finished_jobs) FinishJob(job_id);
  std::sort(effects.changed_jobs.begin(), effects.changed_jobs.end());
  effects.changed_jobs.erase(std::unique(effects.changed_jobs.begin(), effects.changed_jobs.end()),
                             effects.changed_jobs.end());
  for (int64_t job_id : effects.changed_jobs) Notify(job_id, {});
}

void Scheduler::FinishJob(int64_t job_id) {
  std::string state;
  std::string message;
  std::string stopped_by;
  std::optional<BestRecord> publish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    Job& job = *it->second;
    if (job.cancelled) {
      stopped_by = "cancelled";
    } else if (!job.stop_reason.empty()) {
      stopped_by = job.stop_reason;
    } else if (job.charged < job.record.budget && job.strategy_exhausted) {
      stopped_by = std::string(search::StopReasonName(search::StopReason::kExhausted));
    } else {
      stopped_by = std::string(search::StopReasonName(search::StopReason::kBudget));
    }
    if (job.cancelled) {
      state = "cancelled";
      message = "cancelled by request";
    } else if (job.published) {
      state = "completed";
      BestRecord best;
      best.workload = job.record.workload;
      best.kernel_version = job.record.kernel_version;
      best.target_version = job.record.target_version;
      best.config = job.published->config.ToString();
      best.time_ns = job.published->time_ns;
      best.job_id = job_id;
      best.trial_id = job.published->trial_id;
      best.published_ms = NowUnixMs();
      publish = best;
      if (job.rejected > 0) {
        message = StrCat(job.rejected, " faster config(s) failed verification");
      }
      if (!job.stop_reason.empty()) {
        message = StrCat(message, message.empty() ? "" : "; ", "stopped early: ", job.stop_reason);
      }
    } else if (job.counts.ok() == 0) {
      state = "failed";
      message =
          StrCat("no config could be measured (", job.counts.total(), " trial(s) failed",
                 job.default_message.empty() ? "" : "; default config: ", job.default_message, ")");
    } else {
      state = "failed";
      message = "no measured config passed numerical verification";
    }
  }
  if (publish) {
    auto snapshot = store_->Publish(*publish);
    InvalidateLookups();
    if (!snapshot.ok()) {
      state = "failed";
      message =
          StrCat("cannot publish the best config: ", std::string(snapshot.status().message()));
    }
  }
  if (absl::Status s = store_->UpdateJobState(job_id, state, message, stopped_by); !s.ok()) {
    spdlog::error("store: job {}: {}", job_id, std::string(s.message()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    it->second->record.state = state;
    it->second->record.message = message;
    it->second->record.stopped_by = stopped_by;
    v1::Job view = JobView(*it->second);
    view.set_finished_unix_ms(NowUnixMs());
    finished_[job_id] = std::move(view);
    jobs_.erase(it);
  }
  spdlog::info("job {} {}{}{}", job_id, state, message.empty() ? "" : ": ", message);
  Notify(job_id, {});
}

void Scheduler::Notify(int64_t job_id, const std::vector<v1::TrialResult>& new_trials) {
  std::lock_guard<std::mutex> notify_lock(notify_mu_);
  v1::JobEvent event;
  std::vector<std::pair<int64_t, JobListener>> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      *event.mutable_job() = JobView(*it->second);
    } else if (auto f = finished_.find(job_id); f != finished_.end()) {
      *event.mutable_job() = f->second;
    } else {
      return;
    }
    for (const auto& [watch_id, watcher] : watchers_) {
      if (watcher.job_id == job_id) listeners.emplace_back(watch_id, watcher.listener);
    }
  }
  for (const v1::TrialResult& t : new_trials) *event.add_new_trials() = t;
  const bool final_state = IsFinalState(JobStateToString(event.job().state()));
  std::vector<int64_t> done;
  for (auto& [watch_id, listener] : listeners) {
    if (!listener(event) || final_state) done.push_back(watch_id);
  }
  if (!done.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : done) watchers_.erase(id);
  }
}

absl::StatusOr<int64_t> Scheduler::Watch(int64_t job_id, JobListener listener) {
  int64_t watch_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return absl::UnavailableError("server is shutting down");
    watch_id = next_watch_id_++;
    if (jobs_.count(job_id)) watchers_[watch_id] = Watcher{job_id, listener};
  }
  auto view = GetJob(job_id);
  if (!view.ok()) {
    Unwatch(watch_id);
    return view.status();
  }
  {
    std::lock_guard<std::mutex> notify_lock(notify_mu_);
    // Re-read under notify_mu_ so this first event is never older than one already sent.
    auto latest = GetJob(job_id);
    v1::JobEvent event;
    *event.mutable_job() = latest.ok() ? *latest : *view;
    bool keep = listener(event) && !IsFinalState(JobStateToString(event.job().state()));
    if (!keep) {
      std::lock_guard<std::mutex> lock(mu_);
      watchers_.erase(watch_id);
    }
  }
  return watch_id;
}

void Scheduler::Unwatch(int64_t watch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.erase(watch_id);
}

// ---------------------------------------------------------------------------------------------
// Workers

absl::StatusOr<v1::RegisterResponse> Scheduler::Register(const v1::RegisterRequest& request) {
  if (request.slots() < 0) {
    return absl::InvalidArgumentError(StrCat("slots must be >= 0, got ", request.slots()));
  }
  for (const std::string& target : request.targets()) {
    if (auto t = sim::LoadTarget(target); !t.ok()) {
      return absl::InvalidArgumentError(
          StrCat("worker offers unknown target: ", std::string(t.status().message())));
    }
  }
  WorkerRecord record;
  v1::RegisterResponse response;
  Effects effects;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = NowUnixMs();
    std::string id = StrCat("w", next_worker_seq_++, "-", now % 1'000'000);
    Worker worker;
    worker.info.set_worker_id(id);
    worker.info.set_name(request.name().empty() ? id : request.name());
    for (const std::string& t : request.targets()) worker.info.add_targets(t);
    worker.info.set_slots(std::max(1, request.slots()));
    worker.info.set_last_heartbeat_unix_ms(now);
    worker.info.set_state("alive");
    workers_[id] = worker;
    record.id = id;
    record.name = worker.info.name();
    record.targets = StrJoin(request.targets(), ",");
    record.slots = worker.info.slots();
    record.registered_ms = now;
    record.last_heartbeat_ms = now;
    response.set_worker_id(id);
    response.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
    response.set_lease_ms(options_.lease_ms);
    // The in-flight limit grows with the workers' slots (InFlightLimit): propose for it now, so
    // this worker's first lease finds work.
    for (auto& [job_id, job] : jobs_) Refill(*job, effects);
    ServeParked(effects);
  }
  Apply(std::move(effects));
  if (absl::Status s = store_->UpsertWorker(record); !s.ok()) {
    spdlog::warn("store: worker {}: {}", record.id, std::string(s.message()));
  }
  spdlog::info("worker {} registered ({}, {} slot(s))", record.id, record.name, record.slots);
  return response;
}

void Scheduler::Lease(const v1::LeaseRequest& request, LeaseCallback done) {
  if (request.max_trials() <= 0 || request.max_trials() > kMaxTrialsPerLease) {
    done(absl::InvalidArgumentError(StrCat("max_trials must be between 1 and ", kMaxTrialsPerLease,
                                           ", got ", request.max_trials())));
    return;
  }
  Effects effects;
  v1::LeaseResponse response;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) {
      done(absl::UnavailableError("server is shutting down"));
      return;
    }
    auto worker = workers_.find(request.worker_id());
    if (worker == workers_.end()) {
      done(absl::NotFoundError(
          StrCat("unknown worker id '", request.worker_id(), "'; register again")));
      return;
    }
    worker->second.info.set_last_heartbeat_unix_ms(NowUnixMs());
    std::vector<v1::TrialSpec> specs =
        TakeTrials(request.worker_id(), request.max_trials(), effects);
    if (specs.empty() && request.wait_ms() > 0) {
      parked_.push_back(ParkedLease{request, std::move(done),
                                    NowUnixMs() + std::min(request.wait_ms(), kMaxLeaseWaitMs)});
      return;
    }
    for (auto& spec : specs) *response.add_trials() = std::move(spec);
    response.set_lease_deadline_unix_ms(NowUnixMs() + options_.lease_ms);
  }
  Apply(std::move(effects));
  done(std::move(response));
}

void Scheduler::Report(const v1::ReportRequest& request, ReportCallback done) {
  boost::asio::post(pool_, [this, request, done = std::move(done)] {
    struct Claimed {
      LeasedTrial lease;
      v1::TrialResult result;
    };
    std::vector<Claimed> claimed;
    std::vector<TrialRecord> rows;
    v1::ReportResponse response;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::TrialResult& result : request.results()) {
        auto it = leases_.find(result.trial_id());
        if (it == leases_.end() || it->second.worker_id != request.worker_id()) {
          response.set_ignored(response.ignored() + 1);
          continue;
        }
        auto job = jobs_.find(it->second.job_id);
        if (job == jobs_.end()) {
          response.set_ignored(response.ignored() + 1);
          continue;
        }
        std::string status = TrialStatusToString(result.status());
        if (result.status() == v1::TRIAL_STATUS_UNSPECIFIED) status = "RUNTIME_ERROR";
        TrialRecord row = RecordFor(*job->second, it->second.trial, status, result.message());
        row.time_ns = result.status() == v1::TRIAL_OK ? std::optional<double>(result.time_ns())
                                                      : std::nullopt;
        row.samples_ns.assign(result.samples_ns().begin(), result.samples_ns().end());
        row.bound = result.bound();
        row.stats_json = result.stats_json().empty() ? "{}" : result.stats_json();
        row.verified = result.verified();
        row.worker_id = request.worker_id();
        rows.push_back(std::move(row));
        claimed.push_back(Claimed{std::move(it->second), result});
        leases_.erase(it);
      }
    }
    // Commit before acknowledging: a result the worker saw acknowledged is never lost.
    if (absl::Status s = store_->InsertTrials(rows); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (Claimed& c : claimed) leases_[c.lease.trial.id] = std::move(c.lease);
      done(absl::UnavailableError(
          StrCat("cannot store results, retry: ", std::string(s.message()))));
      return;
    }
    Effects effects;
    std::vector<std::pair<int64_t, v1::TrialResult>> stored;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto worker = workers_.find(request.worker_id());
      for (size_t i = 0; i < claimed.size(); ++i) {
        Claimed& c = claimed[i];
        if (worker != workers_.end()) {
          worker->second.info.set_trials_done(worker->second.info.trials_done() + 1);
          worker->second.info.set_leased_trials(
              std::max(0, worker->second.info.leased_trials() - 1));
        }
        auto job = jobs_.find(c.lease.job_id);
        if (job == jobs_.end()) continue;
        job->second->leased--;
        v1::TrialResult result = TrialResultFromRecord(rows[i]);
        ApplyResult(*job->second, c.lease.trial, result, effects);
        stored.emplace_back(c.lease.job_id, std::move(result));
      }
      ServeParked(effects);
      response.set_accepted(static_cast<int>(claimed.size()));
    }
    Apply(std::move(effects));
    std::map<int64_t, std::vector<v1::TrialResult>> by_job;
    for (auto& [job_id, result] : stored) by_job[job_id].push_back(std::move(result));
    for (auto& [job_id, results] : by_job) Notify(job_id, results);
    done(response);
  });
}

absl::StatusOr<v1::HeartbeatResponse> Scheduler::Heartbeat(const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  std::lock_guard<std::mutex> lock(mu_);
  auto worker = workers_.find(request.worker_id());
  if (worker == workers_.end()) {
    response.set_known(false);
    return response;
  }
  response.set_known(true);
  worker->second.info.set_last_heartbeat_unix_ms(NowUnixMs());
  worker->second.info.set_state("alive");
  worker->second.lost = false;
  const int64_t lease_deadline = NowUnixMs() + options_.lease_ms;
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

std::vector<v1::WorkerInfo> Scheduler::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::WorkerInfo> out;
  for (const auto& [id, worker] : workers_) out.push_back(worker.info);
  return out;
}

void Scheduler::Housekeeping() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.housekeeping_ms));
    if (shutdown_) break;
    Effects effects;
    const int64_t now = NowUnixMs();
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->deadline_ms > now) {
        ++it;
        continue;
      }
      v1::LeaseResponse empty;
      effects.leases.emplace_back(std::move(it->done), std::move(empty));
      it = parked_.erase(it);
    }
    const int64_t silent_limit =
        static_cast<int64_t>(kMissedHeartbeatsForLost) * options_.heartbeat_interval_ms;
    for (auto& [id, worker] : workers_) {
      if (!worker.lost && now - worker.info.last_heartbeat_unix_ms() > silent_limit) {
        worker.lost = true;
        worker.info.set_state("lost");
        spdlog::warn("worker {} silent for {} ms: declared lost", id,
                     now - worker.info.last_heartbeat_unix_ms());
      }
    }
    std::vector<std::pair<int64_t, std::string>> expired;
    for (const auto& [trial_id, lease] : leases_) {
      auto worker = workers_.find(lease.worker_id);
      if (worker != workers_.end() && worker->second.lost) {
        expired.emplace_back(trial_id, StrCat("worker ", lease.worker_id, " was lost"));
      } else if (lease.deadline_ms < now) {
        expired.emplace_back(trial_id, StrCat("lease expired after ", options_.lease_ms, " ms"));
      }
    }
    for (const auto& [trial_id, why] : expired) ExpireLease(trial_id, why, effects);
    for (auto& [job_id, job] : jobs_) {
      if (job->stop && job->stop_reason.empty() && job->phase == Phase::kSearching) {
        Refill(*job, effects);  // applies a time limit even while no results arrive
      }
    }
    if (!expired.empty()) ServeParked(effects);
    lock.unlock();
    Apply(std::move(effects));
    lock.lock();
  }
}

// ---------------------------------------------------------------------------------------------
// Lookup

absl::StatusOr<v1::LookupResponse> Scheduler::Lookup(const v1::LookupRequest& request) {
  auto resolved = ResolveWorkload(request.workload());
  if (!resolved.ok()) return resolved.status();
  if (request.snapshot_id() < 0) {
    return absl::InvalidArgumentError("snapshot_id must be >= 0");
  }
  const WorkloadRecord workload = WorkloadRecordFor(*resolved);
  // Answers are cached until the next publication (publications are the only thing that can
  // change an answer; versions are fixed for the life of the process).
  const std::string cache_key = StrCat(workload.kernel, "|", workload.dims, "|", workload.dtype,
                                       "|", workload.target, "|", request.snapshot_id());
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(lookup_mu_);
    if (auto it = lookup_cache_.find(cache_key); it != lookup_cache_.end()) return it->second;
    generation = publish_generation_;
  }
  auto answer = LookupUncached(*resolved, workload, request.snapshot_id());
  if (answer.ok()) {
    std::lock_guard<std::mutex> lock(lookup_mu_);
    if (generation == publish_generation_) {
      if (lookup_cache_.size() >= kMaxCachedLookups) lookup_cache_.clear();
      lookup_cache_.emplace(cache_key, *answer);
    }
  }
  return answer;
}

absl::StatusOr<v1::LookupResponse> Scheduler::LookupUncached(const ResolvedWorkload& resolved_ref,
                                                             const WorkloadRecord& workload,
                                                             int64_t snapshot_id) {
  const ResolvedWorkload* resolved = &resolved_ref;
  v1::LookupResponse response;
  auto fill = [&](const BestRecord& best, const std::string& match) {
    response.set_config(best.config);
    response.set_match(match);
    response.set_time_ns(best.time_ns);
    response.set_snapshot_id(best.snapshot_id);
    response.set_job_id(best.job_id);
    response.set_tuned_dims(best.workload.dims);
    response.set_tuned_target(best.workload.target);
    auto target = CachedTarget(best.workload.target);
    response.set_stale(best.kernel_version != resolved->kernel->version() ||
                       (target.ok() && best.target_version != target->version));
  };
  auto exact = store_->LatestBest(workload, snapshot_id);
  if (!exact.ok()) return exact.status();
  if (*exact) {
    fill(**exact, "exact");
    return response;
  }
  auto all = store_->BestForKernel(workload.kernel, snapshot_id);
  if (!all.ok()) return all.status();
  // nearest: same kernel, dtype and target; distance = sum over dims of |log2(tuned / wanted)|.
  const BestRecord* nearest = nullptr;
  double nearest_distance = std::numeric_limits<double>::infinity();
  const BestRecord* other_target = nullptr;
  for (const BestRecord& best : *all) {
    if (best.workload.dtype != workload.dtype) continue;
    if (best.workload.target != workload.target) {
      if (best.workload.dims == workload.dims && !other_target) other_target = &best;
      continue;
    }
    auto dims = Dims::Parse(best.workload.dims);
    if (!dims.ok()) continue;
    const double distance = DimsDistance(*dims, resolved->problem.dims);
    const bool comparable = std::isfinite(distance);
    if (comparable && distance < nearest_distance) {
      nearest_distance = distance;
      nearest = &best;
    }
  }
  if (nearest) {
    fill(*nearest, "nearest");
  } else if (other_target) {
    fill(*other_target, "other_target");
  } else {
    response.set_config(resolved->kernel->Default(resolved->problem, resolved->target).ToString());
    response.set_match("default");
  }
  return response;
}

// ---------------------------------------------------------------------------------------------
// Export / import

namespace {

v1::BestConfig BestProto(const BestRecord& best) {
  v1::BestConfig out;
  out.set_kernel(best.workload.kernel);
  out.set_dims(best.workload.dims);
  out.set_dtype(best.workload.dtype);
  out.set_target(best.workload.target);
  out.set_kernel_version(best.kernel_version);
  out.set_target_version(best.target_version);
  out.set_config(best.config);
  out.set_time_ns(best.time_ns);
  out.set_job_id(best.job_id);
  out.set_snapshot_id(best.snapshot_id);
  out.set_published_unix_ms(best.published_ms);
  return out;
}

}  // namespace

absl::StatusOr<v1::ExportResponse> Scheduler::Export(const v1::ExportRequest& request) {
  if (request.snapshot_id() < 0) return absl::InvalidArgumentError("snapshot_id must be >= 0");
  std::vector<const kernels::Kernel*> chosen;
  if (request.kernels_size() == 0) {
    chosen = kernels::AllKernels();
  } else {
    for (const std::string& name : request.kernels()) {
      const kernels::Kernel* kernel = kernels::FindKernel(name);
      if (kernel == nullptr) {
        std::vector<std::string> names;
        for (const kernels::Kernel* k : kernels::AllKernels()) names.emplace_back(k->name());
        return absl::InvalidArgumentError(
            StrCat("unknown kernel '", name, "'; known kernels: ", StrJoin(names, ", ")));
      }
      chosen.push_back(kernel);
    }
  }
  v1::ExportResponse response;
  std::vector<v1::BestConfig> best;
  for (const kernels::Kernel* kernel : chosen) {
    auto rows = store_->BestForKernel(std::string(kernel->name()), request.snapshot_id());
    if (!rows.ok()) return rows.status();
    for (const BestRecord& row : *rows) {
      best.push_back(BestProto(row));
      response.set_snapshot_id(std::max(response.snapshot_id(), row.snapshot_id));
    }
    v1::VersionInfo* version = response.add_kernels();
    version->set_name(std::string(kernel->name()));
    version->set_version(kernel->version());
  }
  // Deterministic files: sorted by the workload key.
  std::sort(best.begin(), best.end(), [](const v1::BestConfig& a, const v1::BestConfig& b) {
    return std::tie(a.kernel(), a.target(), a.dtype(), a.dims()) <
           std::tie(b.kernel(), b.target(), b.dtype(), b.dims());
  });
  for (v1::BestConfig& b : best) *response.add_best() = std::move(b);
  std::vector<sim::Target> targets;
  for (const std::string& name : sim::TargetNames()) {
    auto target = sim::LoadTarget(name);
    if (!target.ok() || target->systolic) continue;
    v1::VersionInfo* version = response.add_targets();
    version->set_name(target->name);
    version->set_version(target->version);
    targets.push_back(*std::move(target));
  }
  for (const kernels::Kernel* kernel : chosen) {
    for (const sim::Target& target : targets) {
      for (const std::string& dtype : kernel->dtypes()) {
        kernels::Problem problem;
        for (const std::string& dim : kernel->dims()) problem.dims.Set(dim, kRepresentativeDim);
        problem.dtype = dtype;
        if (!kernel->ValidateProblem(problem, target).ok()) continue;
        v1::DefaultConfig* d = response.add_defaults();
        d->set_kernel(std::string(kernel->name()));
        d->set_dtype(dtype);
        d->set_target(target.name);
        d->set_config(kernel->Default(problem, target).ToString());
      }
    }
  }
  return response;
}

absl::StatusOr<v1::ImportResponse> Scheduler::Import(const v1::ImportRequest& request) {
  std::vector<BestRecord> records;
  for (const v1::BestConfig& b : request.best()) {
    const std::string where = StrCat(b.kernel(), " ", b.dims(), " ", b.dtype(), " ", b.target());
    if (kernels::FindKernel(b.kernel()) == nullptr) {
      return absl::InvalidArgumentError(StrCat("import: unknown kernel in ", where));
    }
    if (!sim::LoadTarget(b.target()).ok()) {
      return absl::InvalidArgumentError(StrCat("import: unknown target in ", where));
    }
    if (!Dims::Parse(b.dims()).ok() || b.config().empty() || !Config::Parse(b.config()).ok() ||
        !(b.time_ns() > 0)) {
      return absl::InvalidArgumentError(
          StrCat("import: record for ", where, " needs dims, a config and a positive time"));
    }
    BestRecord record;
    record.workload = WorkloadRecord{b.kernel(), Dims::Parse(b.dims())->Canonical(),
                                     b.dtype().empty() ? "bf16" : b.dtype(), b.target()};
    record.kernel_version = b.kernel_version();
    record.target_version = b.target_version();
    record.config = b.config();
    record.time_ns = b.time_ns();
    records.push_back(std::move(record));
  }
  v1::ImportResponse response;
  for (BestRecord& record : records) {
    auto latest = store_->LatestBest(record.workload);
    if (!latest.ok()) return latest.status();
    if (*latest && (*latest)->config == record.config &&
        (*latest)->kernel_version == record.kernel_version &&
        (*latest)->target_version == record.target_version &&
        (*latest)->time_ns == record.time_ns) {
      response.set_unchanged(response.unchanged() + 1);
      continue;
    }
    record.published_ms = NowUnixMs();
    auto snapshot = store_->Publish(record);
    InvalidateLookups();
    if (!snapshot.ok()) return snapshot.status();
    response.set_imported(response.imported() + 1);
  }
  return response;
}

void Scheduler::InvalidateLookups() {
  std::lock_guard<std::mutex> lock(lookup_mu_);
  ++publish_generation_;
  lookup_cache_.clear();
}

}  // namespace tessel::server

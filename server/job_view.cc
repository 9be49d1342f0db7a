#include "server/job_view.h"

#include <set>

#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/vocab.h"
#include "server/wire.h"

namespace tessel::server {
namespace {

// Copies a measurement's time and trial id (not its config) into `out`.
void SetMeasured(const MeasuredConfig& measured, v1::Measurement* out) {
  out->set_time_ns(measured.time_ns);
  out->set_trial_id(measured.trial_id);
  out->set_time_ci_ns(measured.time_ci_ns);
  out->set_samples(measured.samples);
}

}  // namespace

void CountResult(TrialStatus status, v1::TrialCounts& counts) {
  if (!IsChargedToBudget(status)) {
    counts.set_retried(counts.retried() + 1);
    return;
  }
  counts.set_total(counts.total() + 1);
  if (status == TrialStatus::kOk) {
    counts.set_ok(counts.ok() + 1);
  } else if (status == TrialStatus::kInvalidConfig) {
    counts.set_invalid(counts.invalid() + 1);
  } else {
    counts.set_failed(counts.failed() + 1);
  }
}

v1::Job JobView(const JobRecord& record, const JobProgress& progress) {
  v1::Job view;
  view.set_id(record.id);
  *view.mutable_workload() = WorkloadProto(record);
  view.set_strategy(record.strategy);
  view.set_budget(record.budget);
  view.set_seed(record.seed);
  SetVersions(record, view);
  view.set_roofline_ns(record.roofline_ns);
  view.set_created_unix_ms(record.created_ms);
  view.set_finished_unix_ms(record.finished_ms.value_or(0));
  view.set_state(ToProto(record.state));
  view.set_message(record.message);
  view.set_effort(record.effort);
  view.set_time_limit_s(record.time_limit_s);
  view.set_stop_after_no_improvement(record.stop_after_no_improvement);
  view.set_target_time_ns(record.target_time_ns);
  view.set_stopped_by(record.stopped_by);
  view.set_priority(record.priority);
  view.set_model(record.model);
  *view.mutable_trials() = progress.counts;
  if (progress.best) {
    view.mutable_best()->set_config(progress.best->config);
    SetMeasured(*progress.best, view.mutable_best());
  }
  view.mutable_default_config()->set_config(record.default_config);
  if (progress.default_result) SetMeasured(*progress.default_result, view.mutable_default_config());
  if (const kernels::Kernel* kernel = kernels::FindKernel(record.workload.kernel)) {
    auto target = kernels::CachedTarget(record.workload.target);
    view.set_stale(kernel->version() != record.kernel_version ||
                   (target.ok() && target->version != record.target_version));
  }
  return view;
}

JobProgress ProgressFromTrials(const JobRecord& record, std::span<const TrialSummary> trials,
                               const BestRecord* published) {
  JobProgress progress;
  std::set<std::string> verified;  // configs that passed a verification
  for (const TrialSummary& t : trials) {
    if (t.status == TrialStatus::kOk && t.verified) verified.insert(t.config);
  }
  const TrialSummary* best = nullptr;
  const TrialSummary* best_verified = nullptr;
  for (const TrialSummary& t : trials) {
    if (t.is_verify) continue;
    CountResult(t.status, progress.counts);
    if (t.status != TrialStatus::kOk) continue;
    if (!best || *t.time_ns < *best->time_ns) best = &t;
    if (verified.contains(t.config) && (!best_verified || *t.time_ns < *best_verified->time_ns)) {
      best_verified = &t;
    }
    if (t.is_default) progress.default_result = MeasuredConfig{t.config, *t.time_ns, t.id, 0, 0};
  }
  const TrialSummary* shown =
      record.state == JobState::kCompleted && best_verified ? best_verified : best;
  if (shown) progress.best = MeasuredConfig{shown->config, *shown->time_ns, shown->id, 0, 0};
  if (record.state == JobState::kCompleted && published != nullptr) {
    progress.best = MeasuredConfig{published->config, published->time_ns, published->trial_id,
                                   published->time_ci_ns, published->samples};
  }
  return progress;
}

absl::StatusOr<v1::Job> StoredJobView(Store& store, int64_t job_id) {
  auto record = store.GetJob(job_id);
  if (!record.ok()) return record.status();
  const int64_t ids[] = {job_id};
  auto trials = store.TrialSummariesForJobs(ids);
  if (!trials.ok()) return trials.status();
  auto published = store.BestsPublishedBy(ids);
  if (!published.ok()) return published.status();
  auto it = published->find(job_id);
  auto mine = trials->find(job_id);
  return JobView(
      *record, ProgressFromTrials(
                   *record, mine == trials->end() ? std::span<const TrialSummary>() : mine->second,
                   it == published->end() ? nullptr : &it->second));
}

}  // namespace tessel::server

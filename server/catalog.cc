#include "server/catalog.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/adapt.h"
#include "kernels/info.h"
#include "kernels/kernel.h"
#include "kernels/workload.h"
#include "schema/graded_match.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"
#include "schema/workload_key.h"
#include "server/report_check.h"
#include "sim/target.h"

namespace tessel::server {
namespace {

// Lookup answers kept in memory; the cache is dropped whole when it would grow past this.
constexpr size_t kMaxCachedLookups = 100'000;

}  // namespace

absl::StatusOr<v1::LookupResponse> Catalog::Lookup(const v1::LookupRequest& request) {
  auto resolved = kernels::Resolve(request.workload());
  if (!resolved.ok()) return resolved.status();
  if (request.snapshot_id() < 0) {
    return absl::InvalidArgumentError("snapshot_id must be >= 0");
  }
  const WorkloadRecord workload = WorkloadRecordFor(*resolved);
  // Answers are cached until the next publication (publications are the only thing that can
  // change an answer; versions are fixed for the life of the process).
  std::string workload_key =
      WorkloadKeyFromCanonical(workload.kernel, workload.dims, workload.dtype, workload.target);
  const std::string cache_key = StrCat(workload_key, "|", request.snapshot_id());
  uint64_t generation = 0;
  std::optional<v1::LookupResponse> cached;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = lookup_cache_.find(cache_key); it != lookup_cache_.end()) {
      cached = it->second.response;
    }
    generation = publish_generation_;
  }
  if (cached) {
    if (metrics_ != nullptr) metrics_->CountLookup(cached->match(), "cache");
    return *std::move(cached);
  }
  auto answer = LookupUncached(*resolved, workload, request.snapshot_id());
  if (answer.ok() && metrics_ != nullptr) metrics_->CountLookup(answer->match(), "store");
  if (answer.ok()) {
    absl::MutexLock lock(&mu_);
    if (generation == publish_generation_) {
      if (lookup_cache_.size() >= kMaxCachedLookups) lookup_cache_.clear();
      lookup_cache_.emplace(cache_key,
                            CachedLookup{*answer, std::move(workload_key), workload.kernel});
    }
  }
  return answer;
}

absl::StatusOr<v1::LookupResponse> Catalog::LookupUncached(
    const kernels::ResolvedWorkload& resolved, const WorkloadRecord& workload,
    int64_t snapshot_id) {
  v1::LookupResponse response;
  auto fill = [&](const BestRecord& best, MatchLevel match) {
    response.set_config(best.config);
    response.set_match(std::string(MatchLevelName(match)));
    response.set_time_ns(best.time_ns);
    response.set_snapshot_id(best.snapshot_id);
    response.set_job_id(best.job_id);
    response.set_tuned_dims(best.workload.dims);
    response.set_tuned_target(best.workload.target);
    response.set_time_ci_ns(best.time_ci_ns);
    response.set_samples(best.samples);
    response.set_noise_sigma(best.noise_sigma);
    auto target = kernels::CachedTarget(best.workload.target);
    response.set_stale(best.kernel_version != resolved.kernel->version() ||
                       (target.ok() && best.target_version != target->version));
  };
  // A stored config is served only as it is valid for the asked workload, or adapted to it
  // (kernels::ServeGraded, the rule libtessel's snapshot reader runs too).
  auto answer = [&](const std::vector<BestRecord>& rows,
                    const kernels::ServedConfig& served) -> v1::LookupResponse {
    if (served.candidate) {
      fill(rows[*served.candidate], served.level);
    } else {
      response.set_match(std::string(MatchLevelName(MatchLevel::kDefault)));
    }
    response.set_config(served.usable.config.ToString());
    if (!served.usable.changes.empty()) {
      response.set_adapted(true);
      response.set_adaptation(StrJoin(served.usable.changes, ", "));
    }
    return response;
  };
  auto serve = [&](const std::vector<BestRecord>& rows) {
    return kernels::ServeGraded(
        resolved, {.count = rows.size(),
                   .offer =
                       [&rows](GradedMatcher& matcher, size_t i) {
                         const WorkloadRecord& tuned = rows[i].workload;
                         auto dims = Dims::Parse(tuned.dims);
                         matcher.Offer(i, tuned.dims, tuned.dtype, tuned.target,
                                       dims.ok() ? DimsLogs(*dims) : DimsLogs());
                       },
                   .config = [&rows](size_t i) -> std::string_view { return rows[i].config; }});
  };
  // The exact workload is one indexed query; the other levels need every best of the kernel.
  auto exact = store_->LatestBest(workload, snapshot_id);
  if (!exact.ok()) return exact.status();
  if (*exact) {
    const std::vector<BestRecord> rows = {**exact};
    TESSEL_ASSIGN_OR_RETURN(const kernels::ServedConfig served, serve(rows));
    if (served.level == MatchLevel::kExact) return answer(rows, served);
  }
  auto all = store_->BestForKernel(workload.kernel, snapshot_id);
  if (!all.ok()) return all.status();
  TESSEL_ASSIGN_OR_RETURN(const kernels::ServedConfig served, serve(*all));
  return answer(*all, served);
}

absl::StatusOr<v1::ExportResponse> Catalog::Export(const v1::ExportRequest& request) {
  if (request.snapshot_id() < 0) return absl::InvalidArgumentError("snapshot_id must be >= 0");
  std::vector<const kernels::Kernel*> chosen;
  if (request.kernels_size() == 0) {
    chosen = kernels::AllKernels();
  } else {
    for (const std::string& name : request.kernels()) {
      TESSEL_ASSIGN_OR_RETURN(const kernels::Kernel* kernel, kernels::ResolveKernel(name));
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
    auto target = kernels::CachedTarget(name);
    if (!target.ok() || target->systolic) continue;
    v1::VersionInfo* version = response.add_targets();
    version->set_name(target->name);
    version->set_version(target->version);
    targets.push_back(*std::move(target));
  }
  for (const kernels::Kernel* kernel : chosen) {
    for (const sim::Target& target : targets) {
      for (const std::string& dtype : kernel->dtypes()) {
        absl::StatusOr<Config> config = kernels::ExampleDefault(*kernel, dtype, target);
        if (!config.ok()) continue;  // the target cannot run this dtype for this kernel
        v1::DefaultConfig* d = response.add_defaults();
        d->set_kernel(std::string(kernel->name()));
        d->set_dtype(dtype);
        d->set_target(target.name);
        d->set_config(config->ToString());
      }
    }
  }
  return response;
}

namespace {

// The record `b` as it would be published, or InvalidArgument saying why it cannot be.
absl::StatusOr<BestRecord> CheckedImport(const v1::BestConfig& b) {
  TESSEL_ASSIGN_OR_RETURN(const Dims dims, Dims::Parse(b.dims()));
  const std::string dtype = b.dtype().empty() ? kDefaultDtype : b.dtype();
  TESSEL_ASSIGN_OR_RETURN(
      const kernels::ResolvedWorkload resolved,
      kernels::Resolve({.kernel = b.kernel(), .dims = dims, .dtype = dtype, .target = b.target()}));
  absl::StatusOr<Config> config = Config::Parse(b.config());
  if (!config.ok() || b.config().empty()) {
    return absl::InvalidArgumentError(StrCat("bad config '", b.config(), "'"));
  }
  TESSEL_ASSIGN_OR_RETURN(const kernels::Space space,
                          resolved.kernel->SpaceFor(resolved.problem, resolved.target));
  if (absl::Status valid = space.Validate(*config); !valid.ok()) {
    return absl::InvalidArgumentError(
        StrCat("config ", b.config(), " is invalid here: ", std::string(valid.message())));
  }
  const double roofline_ns =
      kernels::RooflineNs(*resolved.kernel, resolved.problem, resolved.target);
  if (std::optional<std::string> why =
          ImplausibleTime(b.time_ns(), roofline_ns, /*noise_sigma=*/0, "time_ns")) {
    return absl::InvalidArgumentError(*why);
  }
  BestRecord record;
  record.workload = WorkloadRecord{b.kernel(), dims.Canonical(), dtype, b.target()};
  record.kernel_version = b.kernel_version();
  record.target_version = b.target_version();
  record.config = b.config();
  record.time_ns = b.time_ns();
  return record;
}

}  // namespace

absl::StatusOr<v1::ImportResponse> Catalog::Import(const v1::ImportRequest& request) {
  v1::ImportResponse response;
  std::vector<BestRecord> records;
  for (int i = 0; i < request.best_size(); ++i) {
    const v1::BestConfig& b = request.best(i);
    absl::StatusOr<BestRecord> record = CheckedImport(b);
    if (record.ok()) {
      records.push_back(*std::move(record));
      continue;
    }
    v1::RefusedImport* refused = response.add_refused();
    refused->set_index(i);
    refused->set_workload(StrCat(b.kernel(), " ", b.dims(), " ", b.dtype(), " ", b.target()));
    refused->set_reason(std::string(record.status().message()));
  }
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
    auto snapshot = Publish(record);
    if (!snapshot.ok()) return snapshot.status();
    response.set_imported(response.imported() + 1);
  }
  return response;
}

absl::StatusOr<int64_t> Catalog::Publish(const BestRecord& best) {
  absl::StatusOr<int64_t> snapshot = store_->Publish(best);
  // Dropped even on failure: the write may have committed before the error was reported.
  // A new best of workload W changes the answers for W and, through the graded fallback, any
  // answer of W's kernel that is not an exact match; an exact answer for another workload reads
  // only that workload's best, so it stays.
  const std::string published = WorkloadKeyFromCanonical(best.workload.kernel, best.workload.dims,
                                                         best.workload.dtype, best.workload.target);
  const std::string_view exact = MatchLevelName(MatchLevel::kExact);
  absl::MutexLock lock(&mu_);
  ++publish_generation_;
  std::erase_if(lookup_cache_, [&](const auto& entry) {
    const CachedLookup& c = entry.second;
    return c.kernel == best.workload.kernel &&
           (c.workload_key == published || c.response.match() != exact);
  });
  return snapshot;
}

v1::ListKernelsResponse Catalog::ListKernels() {
  v1::ListKernelsResponse response;
  auto target = kernels::CachedTarget(kDefaultTarget);
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    v1::KernelInfo* info = response.add_kernels();
    info->set_name(std::string(kernel->name()));
    info->set_version(kernel->version());
    info->set_description(std::string(kernel->description()));
    for (const std::string& dim : kernel->dims()) info->add_dims(dim);
    for (const std::string& dtype : kernel->dtypes()) info->add_dtypes(dtype);
    if (!target.ok()) continue;
    for (const kernels::Param& param : kernels::DescribeKernel(*kernel, *target).params) {
      v1::ParamInfo* p = info->add_params();
      p->set_name(param.name);
      p->set_help(param.help);
      for (const std::string& v : param.values) p->add_values(v);
    }
  }
  return response;
}

}  // namespace tessel::server

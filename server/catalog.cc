#include "server/catalog.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "kernels/kernel.h"
#include "schema/strings.h"
#include "sim/target.h"

namespace tessel::server {
namespace {

// Lookup answers kept in memory; the cache is dropped whole when it would grow past this.
constexpr size_t kMaxCachedLookups = 100'000;

}  // namespace

absl::StatusOr<v1::LookupResponse> Catalog::Lookup(const v1::LookupRequest& request) {
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
    absl::MutexLock lock(&mu_);
    if (auto it = lookup_cache_.find(cache_key); it != lookup_cache_.end()) return it->second;
    generation = publish_generation_;
  }
  auto answer = LookupUncached(*resolved, workload, request.snapshot_id());
  if (answer.ok()) {
    absl::MutexLock lock(&mu_);
    if (generation == publish_generation_) {
      if (lookup_cache_.size() >= kMaxCachedLookups) lookup_cache_.clear();
      lookup_cache_.emplace(cache_key, *answer);
    }
  }
  return answer;
}

absl::StatusOr<v1::LookupResponse> Catalog::LookupUncached(const ResolvedWorkload& resolved_ref,
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

absl::StatusOr<v1::ExportResponse> Catalog::Export(const v1::ExportRequest& request) {
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
        kernels::Problem problem = kernel->Example();
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

absl::StatusOr<v1::ImportResponse> Catalog::Import(const v1::ImportRequest& request) {
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
    auto snapshot = Publish(record);
    if (!snapshot.ok()) return snapshot.status();
    response.set_imported(response.imported() + 1);
  }
  return response;
}

absl::StatusOr<int64_t> Catalog::Publish(const BestRecord& best) {
  absl::StatusOr<int64_t> snapshot = store_->Publish(best);
  // Dropped even on failure: the write may have committed before the error was reported.
  absl::MutexLock lock(&mu_);
  ++publish_generation_;
  lookup_cache_.clear();
  return snapshot;
}

v1::ListKernelsResponse Catalog::ListKernels() {
  v1::ListKernelsResponse response;
  auto target = CachedTarget("snc2");
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    v1::KernelInfo* info = response.add_kernels();
    info->set_name(std::string(kernel->name()));
    info->set_version(kernel->version());
    info->set_description(std::string(kernel->description()));
    for (const std::string& dim : kernel->dims()) info->add_dims(dim);
    for (const std::string& dtype : kernel->dtypes()) info->add_dtypes(dtype);
    if (!target.ok()) continue;
    auto space = kernel->SpaceFor(kernel->Example(), *target);
    if (!space.ok()) continue;
    for (const kernels::Param& param : space->params()) {
      v1::ParamInfo* p = info->add_params();
      p->set_name(param.name);
      p->set_help(param.help);
      for (const std::string& v : param.values) p->add_values(v);
    }
  }
  return response;
}

}  // namespace tessel::server

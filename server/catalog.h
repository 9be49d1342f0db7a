// The catalog: what the server knows about kernels and published configs, for readers. Graded
// lookup (exact, nearest, other target, the kernel's default: schema/graded_match.h) with an
// answer cache keyed by schema/workload_key.h, export and import of published results, the kernel
// list with each kernel's parameters (kernels/info.h), and Publish, the one door to the store's
// published configs (so the cache never serves a superseded answer). Of server/, depends on the
// store and the wire only. Thread-safe.
#ifndef TESSEL_SERVER_CATALOG_H_
#define TESSEL_SERVER_CATALOG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/workload.h"
#include "schema/tessel.pb.h"
#include "server/metrics.h"
#include "server/store.h"
#include "server/wire.h"

namespace tessel::server {

class Catalog {
 public:
  // `store` must outlive the catalog.
  // `metrics`, when set, counts lookups by match level and source (cache or store).
  explicit Catalog(Store* store, Metrics* metrics = nullptr) : store_(store), metrics_(metrics) {}
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  // The best published config for the workload (as of the request's snapshot, 0 = newest), or
  // the nearest tuned shape, or the same shape on another target, or the kernel's default config.
  // InvalidArgument for a bad workload or a negative snapshot id.
  absl::StatusOr<v1::LookupResponse> Lookup(const v1::LookupRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The newest publication of every workload (of the named kernels; all when none), with the
  // current kernel/target versions and each kernel's default configs. InvalidArgument for an
  // unknown kernel name.
  absl::StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request);
  // Publishes imported results. Idempotent: a record equal (config, versions, time) to the newest
  // publication of its workload is left alone. A record is refused, with its reason in the
  // response, unless its workload resolves (kernels::Resolve), its config is valid in the
  // kernel's space for that shape and target, and its time is a finite number no faster than
  // the workload's roofline; the other records are imported. Fails only when the store does.
  absl::StatusOr<v1::ImportResponse> Import(const v1::ImportRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Store::Publish, then drops the cached lookup answers; returns the snapshot id.
  absl::StatusOr<int64_t> Publish(const BestRecord& best) ABSL_LOCKS_EXCLUDED(mu_);

  // Every registered kernel with its dims, dtypes and the parameters of its example problem
  // (kernels::DescribeKernel, from Kernel::Example) on the default target.
  static v1::ListKernelsResponse ListKernels();

 private:
  absl::StatusOr<v1::LookupResponse> LookupUncached(const kernels::ResolvedWorkload& resolved,
                                                    const WorkloadRecord& workload,
                                                    int64_t snapshot_id);

  Store* const store_;
  Metrics* const metrics_;
  absl::Mutex mu_;
  // A cached answer, with the workload it answers (its key and kernel): a publication drops the
  // answers it can change (Publish).
  struct CachedLookup {
    v1::LookupResponse response;
    std::string workload_key;
    std::string kernel;
  };
  std::map<std::string, CachedLookup> lookup_cache_ ABSL_GUARDED_BY(mu_);
  uint64_t publish_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessel::server

#endif  // TESSEL_SERVER_CATALOG_H_

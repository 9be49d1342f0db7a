// Snapshot files: an immutable, self-contained SQLite copy of published best configs, readable
// with no server. `tessel export --format snapshot` writes them; libtessel reads them.
//
// File format (kSnapshotFormatVersion):
//   meta(key, value)            format_version, key_version, snapshot_id, created_unix_ms
//   versions(kind, name, version)   kind "kernel" | "target": versions current at export time
//   best(kernel, dims, dtype, target, kernel_version, target_version, config, time_ns, job_id,
//        snapshot_id, published_unix_ms)   one row per workload, dims canonical (sorted)
//   defaults(kernel, dtype, target, config)
#ifndef TESSEL_CLIENT_SNAPSHOT_H_
#define TESSEL_CLIENT_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/key.h"
#include "schema/tessel.pb.h"
#include "schema/vocab.h"
#include "schema/workload_key.h"

namespace tessel::client {

// Version of the snapshot file layout above. Bump when a table or column changes meaning; a
// reader rejects files of another version with a message naming both.
// 1: initial layout.
inline constexpr int kSnapshotFormatVersion = 1;

// Writes `contents` to `path` as a snapshot file: to a temporary name first, then renamed, so a
// reader never sees a half-written file. Rows are written sorted, so equal contents give equal
// tables. Fails with the path in the message on I/O errors.
absl::Status WriteSnapshot(const tessel::v1::ExportResponse& contents, const std::string& path);

// What a lookup found, and where it came from.
struct LookupResult {
  std::string config;       // canonical "name=value,..."
  std::string match;        // "exact" | "nearest" | "other_target" | "default"
  double time_ns = 0;       // measured time of `config` (0 for default)
  bool stale = false;       // tuned under an older kernel or target version
  int64_t snapshot_id = 0;  // publication the answer came from (0 for default)
  int64_t job_id = 0;
  std::string tuned_dims;  // canonical dims of the tuned workload (empty for default)
  std::string tuned_target;
  std::string source;  // "cache" | "snapshot" | "server" | "local-cache"
  // The tuned config was adapted to the asked workload (kernels::AdaptConfig); what
  // changed, e.g. "block_k 8->4".
  bool adapted = false;
  std::string adaptation;
};

// A server's Lookup answer as a LookupResult with source "server".
LookupResult FromLookupResponse(const tessel::v1::LookupResponse& response);

// A snapshot file loaded into memory. Immutable after Open, so thread-safe.
class Snapshot {
 public:
  // Reads the whole file (read-only). NotFound when absent; FailedPrecondition naming both
  // versions when the file's format version differs from kSnapshotFormatVersion.
  static absl::StatusOr<std::unique_ptr<Snapshot>> Open(const std::string& path);

  // Best answer for the workload, by the server's serving rule (kernels::ServeGraded): exact,
  // else nearest (same kernel, dtype and target, smallest DimsDistance), else other_target (same
  // kernel, dims and dtype), skipping entries whose config is invalid for the asked workload even
  // after kernels::AdaptConfig, else the kernel's default for the asked workload. Every answer is
  // valid for the asked workload (adapted says when it was changed to be). InvalidArgument when
  // the workload does not resolve (an unknown kernel or target, bad dims or dtype).
  absl::StatusOr<LookupResult> Find(std::string_view kernel, const Dims& dims,
                                    std::string_view dtype, std::string_view target) const;

  int64_t snapshot_id() const { return snapshot_id_; }
  size_t size() const { return entries_.size(); }
  // All entries as export records, sorted by key (for import and re-export).
  const std::vector<tessel::v1::BestConfig>& entries() const { return entries_; }
  // The whole snapshot (entries, versions, defaults) as the export it was written from.
  tessel::v1::ExportResponse ToExport() const;

 private:
  Snapshot() = default;
  LookupResult FromEntry(const tessel::v1::BestConfig& entry, MatchLevel match) const;

  int64_t snapshot_id_ = 0;
  std::vector<tessel::v1::BestConfig> entries_;
  // For nearest: each entry's dims prepared for DimsDistance, so a query costs one subtraction per
  // dim and entry.
  std::vector<DimsLogs> entry_logs_;
  absl::flat_hash_map<std::string, size_t> exact_;        // workload key -> index
  std::map<std::string, std::vector<size_t>> by_kernel_;  // kernel -> indices
  std::map<std::string, int> kernel_versions_;
  std::map<std::string, int> target_versions_;
  std::map<std::string, std::string> defaults_;  // "kernel|dtype|target"
};

}  // namespace tessel::client

#endif  // TESSEL_CLIENT_SNAPSHOT_H_

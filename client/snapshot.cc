#include "client/snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "kernels/adapt.h"
#include "kernels/workload.h"
#include "schema/graded_match.h"
#include "schema/sqlite.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::client {
namespace {

constexpr char kCreateSql[] = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE versions (kind TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
                       PRIMARY KEY (kind, name));
CREATE TABLE best (kernel TEXT NOT NULL, dims TEXT NOT NULL, dtype TEXT NOT NULL,
                   target TEXT NOT NULL, kernel_version INTEGER NOT NULL,
                   target_version INTEGER NOT NULL, config TEXT NOT NULL, time_ns REAL NOT NULL,
                   job_id INTEGER NOT NULL, snapshot_id INTEGER NOT NULL,
                   published_unix_ms INTEGER NOT NULL,
                   PRIMARY KEY (kernel, dims, dtype, target));
CREATE TABLE defaults (kernel TEXT NOT NULL, dtype TEXT NOT NULL, target TEXT NOT NULL,
                       config TEXT NOT NULL, PRIMARY KEY (kernel, dtype, target));
)sql";

// "kernel|dtype|target": the key of the defaults table in memory.
std::string DefaultsKey(std::string_view kernel, std::string_view dtype, std::string_view target) {
  return StrCat(kernel, "|", dtype, "|", target);
}

}  // namespace

absl::Status WriteSnapshot(const tessel::v1::ExportResponse& contents, const std::string& path) {
  const std::string tmp = StrCat(path, ".tmp.", getpid());
  std::remove(tmp.c_str());
  absl::Status written = [&]() -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(tmp, {.create = true}));
    TESSEL_ASSIGN_OR_RETURN(auto transaction, sqlite::Transaction::Begin(*db));
    TESSEL_RETURN_IF_ERROR(db->ExecScript(kCreateSql, "create snapshot tables"));
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"format_version", std::to_string(kSnapshotFormatVersion)},
             {"key_version", std::to_string(kKeyVersion)},
             {"snapshot_id", std::to_string(contents.snapshot_id())}}) {
      TESSEL_ASSIGN_OR_RETURN(auto insert,
                              db->Prepare("INSERT INTO meta (key, value) VALUES (?, ?)"));
      TESSEL_RETURN_IF_ERROR(insert.BindText(key).BindText(value).Run());
    }
    for (const auto* versions : {&contents.kernels(), &contents.targets()}) {
      const char* kind = versions == &contents.kernels() ? "kernel" : "target";
      for (const auto& v : *versions) {
        TESSEL_ASSIGN_OR_RETURN(
            auto insert,
            db->Prepare("INSERT INTO versions (kind, name, version) VALUES (?, ?, ?)"));
        TESSEL_RETURN_IF_ERROR(insert.BindText(kind).BindText(v.name()).BindInt(v.version()).Run());
      }
    }
    std::vector<tessel::v1::BestConfig> best(contents.best().begin(), contents.best().end());
    std::sort(best.begin(), best.end(), [](const auto& a, const auto& b) {
      return std::tie(a.kernel(), a.target(), a.dtype(), a.dims()) <
             std::tie(b.kernel(), b.target(), b.dtype(), b.dims());
    });
    for (const auto& b : best) {
      TESSEL_ASSIGN_OR_RETURN(const Dims dims, Dims::Parse(b.dims()));
      TESSEL_ASSIGN_OR_RETURN(
          auto insert,
          db->Prepare("INSERT OR REPLACE INTO best (kernel, dims, dtype, target, kernel_version, "
                      "target_version, config, time_ns, job_id, snapshot_id, published_unix_ms) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      insert.BindText(b.kernel()).BindText(dims.Canonical()).BindText(b.dtype());
      insert.BindText(b.target()).BindInt(b.kernel_version()).BindInt(b.target_version());
      insert.BindText(b.config()).BindDouble(b.time_ns()).BindInt(b.job_id());
      TESSEL_RETURN_IF_ERROR(insert.BindInt(b.snapshot_id()).BindInt(b.published_unix_ms()).Run());
    }
    for (const auto& d : contents.defaults()) {
      TESSEL_ASSIGN_OR_RETURN(auto insert,
                              db->Prepare("INSERT OR REPLACE INTO defaults (kernel, dtype, target, "
                                          "config) VALUES (?, ?, ?, ?)"));
      insert.BindText(d.kernel()).BindText(d.dtype()).BindText(d.target());
      TESSEL_RETURN_IF_ERROR(insert.BindText(d.config()).Run());
    }
    return transaction.Commit();
  }();
  if (!written.ok()) {
    std::remove(tmp.c_str());
    return absl::Status(written.code(), StrCat("cannot write snapshot ", path, ": ",
                                               std::string(written.message())));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(StrCat("cannot write snapshot ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Snapshot>> Snapshot::Open(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(StrCat("snapshot file ", path, " does not exist or is unreadable"));
  }
  TESSEL_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path, {.read_only = true}));
  std::unique_ptr<Snapshot> snapshot(new Snapshot());
  std::map<std::string, std::string> meta;
  {
    auto select = db->Prepare("SELECT key, value FROM meta");
    if (!select.ok()) {
      return absl::InvalidArgumentError(
          StrCat(path, " is not a tessel snapshot (", std::string(select.status().message()), ")"));
    }
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select->Step());
      if (!row) break;
      meta[select->Text(0)] = select->Text(1);
    }
  }
  const std::string format = meta.count("format_version") ? meta["format_version"] : "?";
  if (format != std::to_string(kSnapshotFormatVersion)) {
    return absl::FailedPreconditionError(
        StrCat("snapshot ", path, " has format version ", format, "; this tessel reads version ",
               kSnapshotFormatVersion, " (re-export it with a matching tessel)"));
  }
  snapshot->snapshot_id_ = std::atoll(meta["snapshot_id"].c_str());
  {
    TESSEL_ASSIGN_OR_RETURN(auto select, db->Prepare("SELECT kind, name, version FROM versions"));
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) break;
      auto& map =
          select.Text(0) == "kernel" ? snapshot->kernel_versions_ : snapshot->target_versions_;
      map[select.Text(1)] = static_cast<int>(select.Int(2));
    }
  }
  {
    TESSEL_ASSIGN_OR_RETURN(
        auto select,
        db->Prepare("SELECT kernel, dims, dtype, target, kernel_version, target_version, "
                    "config, time_ns, job_id, snapshot_id, published_unix_ms FROM best "
                    "ORDER BY kernel, target, dtype, dims"));
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) break;
      tessel::v1::BestConfig b;
      b.set_kernel(select.Text(0));
      b.set_dims(select.Text(1));
      b.set_dtype(select.Text(2));
      b.set_target(select.Text(3));
      b.set_kernel_version(static_cast<int>(select.Int(4)));
      b.set_target_version(static_cast<int>(select.Int(5)));
      b.set_config(select.Text(6));
      b.set_time_ns(select.Double(7));
      b.set_job_id(select.Int(8));
      b.set_snapshot_id(select.Int(9));
      b.set_published_unix_ms(select.Int(10));
      auto dims = Dims::Parse(b.dims());
      if (!dims.ok()) {
        return absl::DataLossError(StrCat("snapshot ", path, ": bad dims '", b.dims(), "'"));
      }
      const size_t index = snapshot->entries_.size();
      snapshot->exact_[WorkloadKey(b.kernel(), *dims, b.dtype(), b.target())] = index;
      snapshot->by_kernel_[b.kernel()].push_back(index);
      snapshot->entry_logs_.emplace_back(*dims);
      snapshot->entries_.push_back(std::move(b));
    }
  }
  {
    TESSEL_ASSIGN_OR_RETURN(auto select,
                            db->Prepare("SELECT kernel, dtype, target, config FROM defaults"));
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) break;
      snapshot->defaults_[DefaultsKey(select.Text(0), select.Text(1), select.Text(2))] =
          select.Text(3);
    }
  }
  return snapshot;
}

LookupResult FromLookupResponse(const tessel::v1::LookupResponse& response) {
  LookupResult r;
  r.config = response.config();
  r.match = response.match();
  r.time_ns = response.time_ns();
  r.stale = response.stale();
  r.snapshot_id = response.snapshot_id();
  r.job_id = response.job_id();
  r.tuned_dims = response.tuned_dims();
  r.tuned_target = response.tuned_target();
  r.source = "server";
  r.adapted = response.adapted();
  r.adaptation = response.adaptation();
  return r;
}

LookupResult Snapshot::FromEntry(const tessel::v1::BestConfig& entry, MatchLevel match) const {
  LookupResult r;
  r.config = entry.config();
  r.match = std::string(MatchLevelName(match));
  r.time_ns = entry.time_ns();
  r.snapshot_id = entry.snapshot_id();
  r.job_id = entry.job_id();
  r.tuned_dims = entry.dims();
  r.tuned_target = entry.target();
  r.source = "snapshot";
  auto kv = kernel_versions_.find(entry.kernel());
  auto tv = target_versions_.find(entry.target());
  r.stale = (kv != kernel_versions_.end() && kv->second != entry.kernel_version()) ||
            (tv != target_versions_.end() && tv->second != entry.target_version());
  return r;
}

absl::StatusOr<LookupResult> Snapshot::Find(std::string_view kernel, const Dims& dims,
                                            std::string_view dtype, std::string_view target) const {
  TESSEL_ASSIGN_OR_RETURN(const kernels::ResolvedWorkload asked,
                          kernels::Resolve({.kernel = std::string(kernel),
                                            .dims = dims,
                                            .dtype = std::string(dtype),
                                            .target = std::string(target)}));
  // The serving rule the server runs (kernels::ServeGraded) over `indices` of entries_.
  auto serve = [&](const std::vector<size_t>& indices) {
    return kernels::ServeGraded(
        asked,
        {.count = indices.size(),
         .offer =
             [&](GradedMatcher& matcher, size_t i) {
               const auto& entry = entries_[indices[i]];
               matcher.Offer(i, entry.dims(), entry.dtype(), entry.target(),
                             entry_logs_[indices[i]]);
             },
         .config = [&](size_t i) -> std::string_view { return entries_[indices[i]].config(); }});
  };
  auto answer = [&](const std::vector<size_t>& indices, const kernels::ServedConfig& served) {
    LookupResult r;
    if (served.candidate) {
      r = FromEntry(entries_[indices[*served.candidate]], served.level);
    } else {
      r.match = std::string(MatchLevelName(MatchLevel::kDefault));
      r.source = "snapshot";
    }
    r.config = served.usable.config.ToString();
    r.adapted = !served.usable.changes.empty();
    r.adaptation = StrJoin(served.usable.changes, ", ");
    return r;
  };
  const std::string exact_key = WorkloadKey(kernel, dims, asked.problem.dtype, asked.target.name);
  if (auto it = exact_.find(exact_key); it != exact_.end()) {
    const std::vector<size_t> indices = {it->second};
    TESSEL_ASSIGN_OR_RETURN(const kernels::ServedConfig served, serve(indices));
    if (served.level == MatchLevel::kExact) return answer(indices, served);
  }
  static const std::vector<size_t> kNone;
  auto it = by_kernel_.find(std::string(kernel));
  const std::vector<size_t>& indices = it == by_kernel_.end() ? kNone : it->second;
  TESSEL_ASSIGN_OR_RETURN(const kernels::ServedConfig served, serve(indices));
  return answer(indices, served);
}

tessel::v1::ExportResponse Snapshot::ToExport() const {
  tessel::v1::ExportResponse out;
  out.set_snapshot_id(snapshot_id_);
  for (const auto& entry : entries_) *out.add_best() = entry;
  for (const auto& [name, version] : kernel_versions_) {
    auto* v = out.add_kernels();
    v->set_name(name);
    v->set_version(version);
  }
  for (const auto& [name, version] : target_versions_) {
    auto* v = out.add_targets();
    v->set_name(name);
    v->set_version(version);
  }
  for (const auto& [key, config] : defaults_) {
    std::vector<std::string_view> parts = StrSplit(key, '|');
    if (parts.size() != 3) continue;
    auto* d = out.add_defaults();
    d->set_kernel(std::string(parts[0]));
    d->set_dtype(std::string(parts[1]));
    d->set_target(std::string(parts[2]));
    d->set_config(config);
  }
  return out;
}

}  // namespace tessel::client

#include "client/snapshot.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

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

// Owns a sqlite3 handle.
struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
};
// Owns a prepared statement.
struct Stmt {
  sqlite3_stmt* stmt = nullptr;
  ~Stmt() { sqlite3_finalize(stmt); }
};

absl::Status SqlError(sqlite3* db, const std::string& path, const std::string& what) {
  return absl::InternalError(StrCat("snapshot ", path, ": ", what, ": ", sqlite3_errmsg(db)));
}

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

// Sorted dim names joined by ',' and log2 of the values in that order.
std::pair<std::string, std::vector<double>> LogDims(const Dims& dims) {
  auto items = dims.items();
  std::sort(items.begin(), items.end());
  std::string names;
  std::vector<double> logs;
  for (const auto& [name, value] : items) {
    names += name;
    names += ',';
    logs.push_back(std::log2(static_cast<double>(value)));
  }
  return {std::move(names), std::move(logs)};
}

std::string ColumnText(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

}  // namespace

std::string WorkloadKey(std::string_view kernel, const Dims& dims, std::string_view dtype,
                        std::string_view target) {
  return StrCat(kernel, "|", dims.Canonical(), "|", dtype, "|", target);
}

absl::Status WriteSnapshot(const tessel::v1::ExportResponse& contents, const std::string& path) {
  const std::string tmp = StrCat(path, ".tmp.", getpid());
  std::remove(tmp.c_str());
  {
    Db db;
    if (sqlite3_open_v2(tmp.c_str(), &db.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      return absl::UnavailableError(StrCat("cannot create snapshot ", path, ": ",
                                           db.db ? sqlite3_errmsg(db.db) : "out of memory"));
    }
    if (sqlite3_exec(db.db, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK ||
        sqlite3_exec(db.db, kCreateSql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(db.db, path, "create tables");
    }
    auto run = [&](const char* sql, const std::vector<std::string>& texts,
                   const std::vector<int64_t>& ints, const std::vector<double>& reals,
                   const std::vector<int>& order) -> absl::Status {
      // `order` says, per placeholder, 0 = next text, 1 = next int, 2 = next real.
      Stmt stmt;
      if (sqlite3_prepare_v2(db.db, sql, -1, &stmt.stmt, nullptr) != SQLITE_OK) {
        return SqlError(db.db, path, "prepare");
      }
      size_t t = 0, i = 0, r = 0;
      for (size_t p = 0; p < order.size(); ++p) {
        const int index = static_cast<int>(p) + 1;
        if (order[p] == 0) BindText(stmt.stmt, index, texts[t++]);
        if (order[p] == 1) sqlite3_bind_int64(stmt.stmt, index, ints[i++]);
        if (order[p] == 2) sqlite3_bind_double(stmt.stmt, index, reals[r++]);
      }
      if (sqlite3_step(stmt.stmt) != SQLITE_DONE) return SqlError(db.db, path, "insert");
      return absl::OkStatus();
    };
    const char* meta = "INSERT INTO meta (key, value) VALUES (?, ?)";
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"format_version", std::to_string(kSnapshotFormatVersion)},
             {"key_version", std::to_string(kKeyVersion)},
             {"snapshot_id", std::to_string(contents.snapshot_id())}}) {
      if (auto s = run(meta, {key, value}, {}, {}, {0, 0}); !s.ok()) return s;
    }
    const char* version = "INSERT INTO versions (kind, name, version) VALUES (?, ?, ?)";
    for (const auto& v : contents.kernels()) {
      if (auto s = run(version, {"kernel", v.name()}, {v.version()}, {}, {0, 0, 1}); !s.ok()) {
        return s;
      }
    }
    for (const auto& v : contents.targets()) {
      if (auto s = run(version, {"target", v.name()}, {v.version()}, {}, {0, 0, 1}); !s.ok()) {
        return s;
      }
    }
    std::vector<tessel::v1::BestConfig> best(contents.best().begin(), contents.best().end());
    std::sort(best.begin(), best.end(), [](const auto& a, const auto& b) {
      return std::tie(a.kernel(), a.target(), a.dtype(), a.dims()) <
             std::tie(b.kernel(), b.target(), b.dtype(), b.dims());
    });
    const char* insert_best =
        "INSERT OR REPLACE INTO best (kernel, dims, dtype, target, kernel_version, "
        "target_version, config, time_ns, job_id, snapshot_id, published_unix_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    for (const auto& b : best) {
      auto dims = Dims::Parse(b.dims());
      if (!dims.ok()) return dims.status();
      if (auto s =
              run(insert_best, {b.kernel(), dims->Canonical(), b.dtype(), b.target(), b.config()},
                  {b.kernel_version(), b.target_version(), b.job_id(), b.snapshot_id(),
                   b.published_unix_ms()},
                  {b.time_ns()}, {0, 0, 0, 0, 1, 1, 0, 2, 1, 1, 1});
          !s.ok()) {
        return s;
      }
    }
    const char* insert_default =
        "INSERT OR REPLACE INTO defaults (kernel, dtype, target, config) VALUES (?, ?, ?, ?)";
    for (const auto& d : contents.defaults()) {
      if (auto s = run(insert_default, {d.kernel(), d.dtype(), d.target(), d.config()}, {}, {},
                       {0, 0, 0, 0});
          !s.ok()) {
        return s;
      }
    }
    if (sqlite3_exec(db.db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(db.db, path, "commit");
    }
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
  Db db;
  if (sqlite3_open_v2(path.c_str(), &db.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    return absl::UnavailableError(StrCat("cannot open snapshot ", path, ": ",
                                         db.db ? sqlite3_errmsg(db.db) : "out of memory"));
  }
  std::unique_ptr<Snapshot> snapshot(new Snapshot());
  std::map<std::string, std::string> meta;
  {
    Stmt stmt;
    if (sqlite3_prepare_v2(db.db, "SELECT key, value FROM meta", -1, &stmt.stmt, nullptr) !=
        SQLITE_OK) {
      return absl::InvalidArgumentError(
          StrCat(path, " is not a tessel snapshot (", sqlite3_errmsg(db.db), ")"));
    }
    while (sqlite3_step(stmt.stmt) == SQLITE_ROW) {
      meta[ColumnText(stmt.stmt, 0)] = ColumnText(stmt.stmt, 1);
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
    Stmt stmt;
    if (sqlite3_prepare_v2(db.db, "SELECT kind, name, version FROM versions", -1, &stmt.stmt,
                           nullptr) != SQLITE_OK) {
      return SqlError(db.db, path, "read versions");
    }
    while (sqlite3_step(stmt.stmt) == SQLITE_ROW) {
      auto& map = ColumnText(stmt.stmt, 0) == "kernel" ? snapshot->kernel_versions_
                                                       : snapshot->target_versions_;
      map[ColumnText(stmt.stmt, 1)] = sqlite3_column_int(stmt.stmt, 2);
    }
  }
  {
    Stmt stmt;
    if (sqlite3_prepare_v2(db.db,
                           "SELECT kernel, dims, dtype, target, kernel_version, target_version, "
                           "config, time_ns, job_id, snapshot_id, published_unix_ms FROM best "
                           "ORDER BY kernel, target, dtype, dims",
                           -1, &stmt.stmt, nullptr) != SQLITE_OK) {
      return SqlError(db.db, path, "read best");
    }
    while (sqlite3_step(stmt.stmt) == SQLITE_ROW) {
      tessel::v1::BestConfig b;
      b.set_kernel(ColumnText(stmt.stmt, 0));
      b.set_dims(ColumnText(stmt.stmt, 1));
      b.set_dtype(ColumnText(stmt.stmt, 2));
      b.set_target(ColumnText(stmt.stmt, 3));
      b.set_kernel_version(sqlite3_column_int(stmt.stmt, 4));
      b.set_target_version(sqlite3_column_int(stmt.stmt, 5));
      b.set_config(ColumnText(stmt.stmt, 6));
      b.set_time_ns(sqlite3_column_double(stmt.stmt, 7));
      b.set_job_id(sqlite3_column_int64(stmt.stmt, 8));
      b.set_snapshot_id(sqlite3_column_int64(stmt.stmt, 9));
      b.set_published_unix_ms(sqlite3_column_int64(stmt.stmt, 10));
      auto dims = Dims::Parse(b.dims());
      if (!dims.ok()) {
        return absl::DataLossError(StrCat("snapshot ", path, ": bad dims '", b.dims(), "'"));
      }
      const size_t index = snapshot->entries_.size();
      snapshot->exact_[WorkloadKey(b.kernel(), *dims, b.dtype(), b.target())] = index;
      snapshot->by_kernel_[b.kernel()].push_back(index);
      auto [names, logs] = LogDims(*dims);
      snapshot->entry_dim_names_.push_back(std::move(names));
      snapshot->entry_log_dims_.push_back(std::move(logs));
      snapshot->entries_.push_back(std::move(b));
    }
  }
  {
    Stmt stmt;
    if (sqlite3_prepare_v2(db.db, "SELECT kernel, dtype, target, config FROM defaults", -1,
                           &stmt.stmt, nullptr) != SQLITE_OK) {
      return SqlError(db.db, path, "read defaults");
    }
    while (sqlite3_step(stmt.stmt) == SQLITE_ROW) {
      snapshot->defaults_[StrCat(ColumnText(stmt.stmt, 0), "|", ColumnText(stmt.stmt, 1), "|",
                                 ColumnText(stmt.stmt, 2))] = ColumnText(stmt.stmt, 3);
    }
  }
  return snapshot;
}

LookupResult Snapshot::FromEntry(const tessel::v1::BestConfig& entry, std::string match) const {
  LookupResult r;
  r.config = entry.config();
  r.match = std::move(match);
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
  if (auto it = exact_.find(WorkloadKey(kernel, dims, dtype, target)); it != exact_.end()) {
    return FromEntry(entries_[it->second], "exact");
  }
  const std::vector<size_t>* same_kernel = nullptr;
  if (auto it = by_kernel_.find(std::string(kernel)); it != by_kernel_.end()) {
    same_kernel = &it->second;
  }
  if (same_kernel) {
    size_t nearest = 0;
    double nearest_distance = std::numeric_limits<double>::infinity();
    std::optional<size_t> other_target;
    const std::string canonical = dims.Canonical();
    const auto [query_names, query_logs] = LogDims(dims);
    for (size_t index : *same_kernel) {
      const auto& entry = entries_[index];
      if (entry.dtype() != dtype) continue;
      if (entry.target() != target) {
        if (!other_target && entry.dims() == canonical) other_target = index;
        continue;
      }
      // DimsDistance, on precomputed logs.
      if (entry_dim_names_[index] != query_names) continue;
      double distance = 0;
      const std::vector<double>& logs = entry_log_dims_[index];
      for (size_t d = 0; d < logs.size(); ++d) distance += std::abs(logs[d] - query_logs[d]);
      if (distance < nearest_distance) {
        nearest_distance = distance;
        nearest = index;
      }
    }
    if (std::isfinite(nearest_distance)) return FromEntry(entries_[nearest], "nearest");
    if (other_target) return FromEntry(entries_[*other_target], "other_target");
  }
  if (auto it = defaults_.find(StrCat(kernel, "|", dtype, "|", target)); it != defaults_.end()) {
    LookupResult r;
    r.config = it->second;
    r.match = "default";
    r.source = "snapshot";
    return r;
  }
  return absl::NotFoundError(StrCat("snapshot ", snapshot_id_, " knows nothing of kernel '", kernel,
                                    "' with dtype ", dtype, " on ", target));
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

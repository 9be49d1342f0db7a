#include "client/lookup.h"

#include <sqlite3.h>

#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "client/client.h"
#include "schema/strings.h"

namespace tessel::client {
namespace {

constexpr char kCacheSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS answers (
  workload TEXT NOT NULL, pin INTEGER NOT NULL, config TEXT NOT NULL, match TEXT NOT NULL,
  time_ns REAL NOT NULL, stale INTEGER NOT NULL, snapshot_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL, tuned_dims TEXT NOT NULL, tuned_target TEXT NOT NULL,
  PRIMARY KEY (workload, pin));
)sql";

tessel::v1::Workload WorkloadProto(std::string_view kernel, const Dims& dims,
                                   std::string_view dtype, std::string_view target) {
  tessel::v1::Workload w;
  w.set_kernel(std::string(kernel));
  w.set_dtype(std::string(dtype));
  w.set_target(std::string(target));
  for (const auto& [name, value] : dims.items()) {
    tessel::v1::Dim* d = w.add_dims();
    d->set_name(name);
    d->set_value(value);
  }
  return w;
}

}  // namespace

class Lookup::Impl {
 public:
  LookupOptions options;
  std::unique_ptr<Snapshot> snapshot;
  sqlite3* cache_db = nullptr;  // guarded by cache_mu
  std::mutex cache_mu;

  mutable std::shared_mutex mu;
  absl::node_hash_map<std::string, LookupResult> memory;  // guarded by mu

  std::mutex server_mu;
  std::unique_ptr<Client> client;        // guarded by server_mu; connected lazily
  std::set<std::string> tune_requested;  // guarded by server_mu
  std::vector<std::thread> tuners;       // guarded by server_mu

  mutable std::mutex counters_mu;
  Counters counters;  // guarded by counters_mu

  ~Impl() {
    for (std::thread& t : tuners) t.join();
    if (cache_db) sqlite3_close(cache_db);
  }

  void Count(int64_t Counters::*field) {
    std::lock_guard<std::mutex> lock(counters_mu);
    ++(counters.*field);
  }

  absl::StatusOr<LookupResult> AskServer(std::string_view kernel, const Dims& dims,
                                         std::string_view dtype, std::string_view target) {
    std::lock_guard<std::mutex> lock(server_mu);
    if (!client) {
      ClientOptions client_options;
      client_options.call_timeout_ms = options.server_timeout_ms;
      client_options.connect_timeout_ms = options.server_timeout_ms;
      auto connected = Client::Connect(options.server_address, client_options);
      if (!connected.ok()) return connected.status();
      client = *std::move(connected);
    }
    tessel::v1::LookupRequest request;
    *request.mutable_workload() = WorkloadProto(kernel, dims, dtype, target);
    request.set_snapshot_id(options.pin_snapshot);
    auto response = client->Lookup(request);
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kUnavailable ||
          response.status().code() == absl::StatusCode::kDeadlineExceeded) {
        client.reset();  // reconnect next time
      }
      return response.status();
    }
    LookupResult r;
    r.config = response->config();
    r.match = response->match();
    r.time_ns = response->time_ns();
    r.stale = response->stale();
    r.snapshot_id = response->snapshot_id();
    r.job_id = response->job_id();
    r.tuned_dims = response->tuned_dims();
    r.tuned_target = response->tuned_target();
    r.source = "server";
    if (options.tune_misses && r.match != "exact") RequestTuning(kernel, dims, dtype, target);
    return r;
  }

  // REQUIRES: server_mu held.
  void RequestTuning(std::string_view kernel, const Dims& dims, std::string_view dtype,
                     std::string_view target) {
    const std::string key = WorkloadKey(kernel, dims, dtype, target);
    if (!tune_requested.insert(key).second) return;
    Count(&Counters::tune_requests);
    tessel::v1::SubmitJobRequest request;
    *request.mutable_workload() = WorkloadProto(kernel, dims, dtype, target);
    request.set_budget(options.tune_budget);
    std::string address = options.server_address;
    int timeout = options.server_timeout_ms;
    tuners.emplace_back([request, address, timeout] {
      ClientOptions client_options;
      client_options.call_timeout_ms = std::max(timeout, 2000);
      auto client = Client::Connect(address, client_options);
      if (client.ok()) (void)(*client)->SubmitJob(request);
    });
  }

  void Remember(const std::string& key, const LookupResult& r) {
    if (!cache_db) return;
    std::lock_guard<std::mutex> lock(cache_mu);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(cache_db,
                           "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &stmt, nullptr) != SQLITE_OK) {
      return;
    }
    sqlite3_bind_text(stmt, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, options.pin_snapshot);
    sqlite3_bind_text(stmt, 3, r.config.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 4, r.match.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(stmt, 5, r.time_ns);
    sqlite3_bind_int(stmt, 6, r.stale ? 1 : 0);
    sqlite3_bind_int64(stmt, 7, r.snapshot_id);
    sqlite3_bind_int64(stmt, 8, r.job_id);
    sqlite3_bind_text(stmt, 9, r.tuned_dims.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 10, r.tuned_target.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
  }

  std::optional<LookupResult> Recall(const std::string& key) {
    if (!cache_db) return std::nullopt;
    std::lock_guard<std::mutex> lock(cache_mu);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(cache_db,
                           "SELECT config, match, time_ns, stale, snapshot_id, job_id, "
                           "tuned_dims, tuned_target FROM answers WHERE workload = ? AND pin = ?",
                           -1, &stmt, nullptr) != SQLITE_OK) {
      return std::nullopt;
    }
    sqlite3_bind_text(stmt, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, options.pin_snapshot);
    std::optional<LookupResult> out;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      auto text = [&](int i) {
        const unsigned char* t = sqlite3_column_text(stmt, i);
        return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
      };
      LookupResult r;
      r.config = text(0);
      r.match = text(1);
      r.time_ns = sqlite3_column_double(stmt, 2);
      r.stale = sqlite3_column_int(stmt, 3) != 0;
      r.snapshot_id = sqlite3_column_int64(stmt, 4);
      r.job_id = sqlite3_column_int64(stmt, 5);
      r.tuned_dims = text(6);
      r.tuned_target = text(7);
      r.source = "local-cache";
      out = std::move(r);
    }
    sqlite3_finalize(stmt);
    return out;
  }
};

Lookup::Lookup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Lookup::~Lookup() = default;

absl::StatusOr<std::unique_ptr<Lookup>> Lookup::Create(const LookupOptions& options) {
  if (options.snapshot_path.empty() && options.server_address.empty()) {
    return absl::InvalidArgumentError(
        "libtessel lookup needs a snapshot file or a server address (or both)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!options.snapshot_path.empty()) {
    auto snapshot = Snapshot::Open(options.snapshot_path);
    if (!snapshot.ok()) return snapshot.status();
    impl->snapshot = *std::move(snapshot);
  }
  if (!options.cache_path.empty()) {
    if (sqlite3_open(options.cache_path.c_str(), &impl->cache_db) != SQLITE_OK ||
        sqlite3_exec(impl->cache_db, kCacheSchema, nullptr, nullptr, nullptr) != SQLITE_OK) {
      std::string message = impl->cache_db ? sqlite3_errmsg(impl->cache_db) : "out of memory";
      return absl::UnavailableError(
          StrCat("cannot open lookup cache ", options.cache_path, ": ", message));
    }
    sqlite3_busy_timeout(impl->cache_db, 1000);
  }
  return std::unique_ptr<Lookup>(new Lookup(std::move(impl)));
}

const LookupResult* Lookup::FindPrepared(const std::string& workload_key) const {
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  auto it = impl_->memory.find(workload_key);
  return it == impl_->memory.end() ? nullptr : &it->second;
}

absl::StatusOr<LookupResult> Lookup::Find(std::string_view kernel, const Dims& dims,
                                          std::string_view dtype, std::string_view target) {
  const std::string key = WorkloadKey(kernel, dims, dtype, target);
  if (const LookupResult* cached = FindPrepared(key)) {
    impl_->Count(&Counters::cache_hits);
    LookupResult r = *cached;
    return r;
  }
  std::optional<LookupResult> answer;
  absl::Status failure = absl::OkStatus();
  if (impl_->snapshot) {
    auto found = impl_->snapshot->Find(kernel, dims, dtype, target);
    if (found.ok()) {
      answer = *found;
    } else {
      failure = found.status();
    }
  }
  const bool exact = answer && answer->match == "exact";
  if (!exact && !impl_->options.server_address.empty()) {
    auto served = impl_->AskServer(kernel, dims, dtype, target);
    if (served.ok()) {
      impl_->Count(&Counters::server_answers);
      impl_->Remember(key, *served);
      answer = *served;
    } else {
      impl_->Count(&Counters::server_failures);
      if (auto recalled = impl_->Recall(key)) {
        impl_->Count(&Counters::local_cache_answers);
        answer = *recalled;
      } else if (!answer) {
        failure = served.status();
      }
    }
  } else if (answer) {
    impl_->Count(&Counters::snapshot_answers);
  }
  if (!answer) return failure;
  {
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    impl_->memory.emplace(key, *answer);
  }
  return *answer;
}

Lookup::Counters Lookup::counters() const {
  std::lock_guard<std::mutex> lock(impl_->counters_mu);
  return impl_->counters;
}

}  // namespace tessel::client

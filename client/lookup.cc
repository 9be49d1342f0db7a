#include "client/lookup.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client/answer_table.h"
#include "client/client.h"
#include "schema/credentials.h"
#include "schema/sqlite.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "schema/vocab.h"

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

// Lookup::Counters kept per thread stripe, so that counting a cache hit writes a cache line no
// other thread writes (one shared counter would make every hit of two threads contend).
class StripedCounters {
 public:
  void Add(int64_t Lookup::Counters::*field) {
    Stripe& stripe = stripes_[ThisThreadStripe()];
    for (size_t i = 0; i < kFields.size(); ++i) {
      if (kFields[i] == field) stripe.count[i].fetch_add(1, std::memory_order_relaxed);
    }
  }
  Lookup::Counters Sum() const {
    Lookup::Counters out;
    for (const Stripe& stripe : stripes_) {
      for (size_t i = 0; i < kFields.size(); ++i) {
        out.*kFields[i] += stripe.count[i].load(std::memory_order_relaxed);
      }
    }
    return out;
  }

 private:
  using C = Lookup::Counters;
  static constexpr std::array<int64_t C::*, 6> kFields = {
      &C::cache_hits,          &C::snapshot_answers, &C::server_answers,
      &C::local_cache_answers, &C::server_failures,  &C::tune_requests};
  static constexpr size_t kStripes = 16;
  struct alignas(64) Stripe {
    std::array<std::atomic<int64_t>, kFields.size()> count{};
  };

  // Threads take stripes round-robin, once each.
  static size_t ThisThreadStripe() {
    static std::atomic<size_t> next{0};
    thread_local const size_t stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return stripe;
  }

  std::array<Stripe, kStripes> stripes_;
};

}  // namespace

// Locks: server_mu, tune_mu and cache_mu are each held only briefly and never together; no lock
// is held across a server call, and the answer table's reads take none.
class Lookup::Impl {
 public:
  LookupOptions options;
  std::unique_ptr<Snapshot> snapshot;
  AnswerTable answers;
  StripedCounters counters;

  std::mutex server_mu;
  // Connected lazily; shared by concurrent calls (a Client is thread-safe), replaced after a
  // transport failure.
  std::shared_ptr<Client> client ABSL_GUARDED_BY(server_mu);

  std::mutex tune_mu;
  std::set<std::string> tune_requested ABSL_GUARDED_BY(tune_mu);
  std::vector<std::thread> tuners ABSL_GUARDED_BY(tune_mu);

  std::mutex cache_mu;
  std::unique_ptr<sqlite::Database> cache_db ABSL_GUARDED_BY(cache_mu);  // null: no cache file

  ~Impl() {
    std::lock_guard<std::mutex> lock(tune_mu);
    for (std::thread& t : tuners) t.join();
  }

  // The token and TLS files of a client of the server; the deadlines are the caller's.
  ClientOptions ServerClientOptions() const {
    ClientOptions client_options;
    if (!options.token.empty()) client_options.token = options.token;
    client_options.tls_ca_file = options.tls_ca_file;
    client_options.tls_cert_file = options.tls_cert_file;
    client_options.tls_key_file = options.tls_key_file;
    return client_options;
  }

  absl::StatusOr<std::shared_ptr<Client>> Connected() {
    std::lock_guard<std::mutex> lock(server_mu);
    if (!client) {
      ClientOptions client_options = ServerClientOptions();
      client_options.call_timeout_ms = options.server_timeout_ms;
      client_options.connect_timeout_ms = options.server_timeout_ms;
      TESSEL_ASSIGN_OR_RETURN(client, Client::Connect(options.server_address, client_options));
    }
    return client;
  }

  // Drops `failed` so the next call reconnects (unless another thread already replaced it).
  void Disconnect(const std::shared_ptr<Client>& failed) {
    std::lock_guard<std::mutex> lock(server_mu);
    if (client == failed) client.reset();
  }

  absl::StatusOr<LookupResult> AskServer(std::string_view kernel, const Dims& dims,
                                         std::string_view dtype, std::string_view target) {
    TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<Client> connected, Connected());
    tessel::v1::LookupRequest request;
    *request.mutable_workload() = WorkloadProto(kernel, dims, dtype, target);
    request.set_snapshot_id(options.pin_snapshot);
    auto response = connected->Lookup(request);
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kUnavailable ||
          response.status().code() == absl::StatusCode::kDeadlineExceeded) {
        Disconnect(connected);
      }
      return response.status();
    }
    LookupResult r = FromLookupResponse(*response);
    if (options.tune_misses && r.match != MatchLevelName(MatchLevel::kExact)) {
      RequestTuning(kernel, dims, dtype, target);
    }
    return r;
  }

  void RequestTuning(std::string_view kernel, const Dims& dims, std::string_view dtype,
                     std::string_view target) {
    std::lock_guard<std::mutex> lock(tune_mu);
    if (!tune_requested.insert(WorkloadKey(kernel, dims, dtype, target)).second) return;
    counters.Add(&Counters::tune_requests);
    tessel::v1::SubmitJobRequest request;
    *request.mutable_workload() = WorkloadProto(kernel, dims, dtype, target);
    request.set_budget(options.tune_budget);
    std::string address = options.server_address;
    ClientOptions client_options = ServerClientOptions();
    client_options.call_timeout_ms = std::max(options.server_timeout_ms, 2000);
    tuners.emplace_back([request, address, client_options] {
      auto client = Client::Connect(address, client_options);
      if (client.ok()) (void)(*client)->SubmitJob(request);
    });
  }

  // Keeps a server answer in the cache file. Best effort: a failed write only loses the fallback.
  void Remember(const std::string& key, const LookupResult& r) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (!cache_db) return;
    auto insert =
        cache_db->Prepare("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert.ok()) return;
    insert->BindText(key).BindInt(options.pin_snapshot).BindText(r.config).BindText(r.match);
    insert->BindDouble(r.time_ns).BindInt(r.stale ? 1 : 0).BindInt(r.snapshot_id);
    insert->BindInt(r.job_id).BindText(r.tuned_dims).BindText(r.tuned_target);
    (void)insert->Run();
  }

  std::optional<LookupResult> Recall(const std::string& key) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (!cache_db) return std::nullopt;
    auto select = cache_db->Prepare(
        "SELECT config, match, time_ns, stale, snapshot_id, job_id, tuned_dims, tuned_target "
        "FROM answers WHERE workload = ? AND pin = ?");
    if (!select.ok()) return std::nullopt;
    select->BindText(key).BindInt(options.pin_snapshot);
    auto row = select->Step();
    if (!row.ok() || !*row) return std::nullopt;
    LookupResult r;
    r.config = select->Text(0);
    r.match = select->Text(1);
    r.time_ns = select->Double(2);
    r.stale = select->Int(3) != 0;
    r.snapshot_id = select->Int(4);
    r.job_id = select->Int(5);
    r.tuned_dims = select->Text(6);
    r.tuned_target = select->Text(7);
    r.source = "local-cache";
    return r;
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
  if (!options.server_address.empty()) {
    if (options.token.empty()) {
      absl::StatusOr<std::optional<std::string>> from_env = ClientToken("");
      if (!from_env.ok()) {
        return absl::InvalidArgumentError(
            StrCat("$", kTokenFileEnv, ": ", std::string(from_env.status().message())));
      }
      if (*from_env) impl->options.token = **std::move(from_env);
    } else if (!IsWellFormedToken(options.token)) {
      return absl::InvalidArgumentError(
          StrCat("LookupOptions.token is not a well-formed token (expected up to ", kMaxTokenBytes,
                 " printable characters without spaces)"));
    }
    // The TLS files are read now so that a wrong path fails here, not at the first miss.
    TESSEL_RETURN_IF_ERROR(ChannelCredentials({.ca_file = options.tls_ca_file,
                                               .cert_file = options.tls_cert_file,
                                               .key_file = options.tls_key_file})
                               .status());
  }
  if (!options.snapshot_path.empty()) {
    TESSEL_ASSIGN_OR_RETURN(impl->snapshot, Snapshot::Open(options.snapshot_path));
  }
  if (!options.cache_path.empty()) {
    auto opened = [&]() -> absl::StatusOr<std::unique_ptr<sqlite::Database>> {
      TESSEL_ASSIGN_OR_RETURN(
          auto db,
          sqlite::Database::Open(options.cache_path, {.create = true, .busy_timeout_ms = 1000}));
      TESSEL_RETURN_IF_ERROR(db->ExecScript(kCacheSchema, "create the answers table"));
      return db;
    }();
    if (!opened.ok()) {
      return absl::UnavailableError(StrCat("cannot open lookup cache ", options.cache_path, ": ",
                                           std::string(opened.status().message())));
    }
    std::lock_guard<std::mutex> lock(impl->cache_mu);
    impl->cache_db = *std::move(opened);
  }
  return std::unique_ptr<Lookup>(new Lookup(std::move(impl)));
}

const LookupResult* Lookup::FindPrepared(const std::string& workload_key) const {
  return impl_->answers.Find(workload_key);
}

absl::StatusOr<LookupResult> Lookup::Find(std::string_view kernel, const Dims& dims,
                                          std::string_view dtype, std::string_view target) {
  const std::string key = WorkloadKey(kernel, dims, dtype, target);
  if (const LookupResult* cached = impl_->answers.Find(key)) {
    impl_->counters.Add(&Counters::cache_hits);
    return *cached;
  }
  std::optional<LookupResult> answer;
  absl::Status failure = absl::OkStatus();
  if (impl_->snapshot) {
    auto found = impl_->snapshot->Find(kernel, dims, dtype, target);
    if (found.ok()) {
      answer = *std::move(found);
    } else {
      failure = found.status();
    }
  }
  const bool exact = answer && answer->match == MatchLevelName(MatchLevel::kExact);
  if (!exact && !impl_->options.server_address.empty()) {
    auto served = impl_->AskServer(kernel, dims, dtype, target);
    if (served.ok()) {
      impl_->counters.Add(&Counters::server_answers);
      impl_->Remember(key, *served);
      answer = *std::move(served);
    } else {
      impl_->counters.Add(&Counters::server_failures);
      if (auto recalled = impl_->Recall(key)) {
        impl_->counters.Add(&Counters::local_cache_answers);
        answer = *recalled;
      } else if (!answer) {
        failure = served.status();
      }
    }
  } else if (answer) {
    impl_->counters.Add(&Counters::snapshot_answers);
  }
  if (!answer) return failure;
  return *impl_->answers.Insert(key, *std::move(answer));
}

Lookup::Counters Lookup::counters() const { return impl_->counters.Sum(); }

}  // namespace tessel::client

#include "server/dashboard.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>

#include "kernels/advice.h"
#include "kernels/workload.h"
#include "schema/strings.h"
#include "schema/vocab.h"
#include "server/wire.h"
#include "sim/simulate.h"
#include "sim/trace.h"

namespace tessel::server {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kTimelineBins = 240;
constexpr int64_t kTimelineInstructions = 200'000;  // per core, traced for the timeline
constexpr int kOverviewJobs = 50;
// A job page's data is rebuilt at most this often, however many pages poll it.
constexpr auto kJobDataTtl = std::chrono::seconds(1);
constexpr size_t kMaxCachedJobs = 64;
constexpr size_t kFastest = 10;  // trials a job page lists in full

std::string StateName(v1::JobState state) {
  const std::optional<JobState> known = JobStateFromProto(state);
  return known ? std::string(JobStateName(*known)) : "unknown";
}

// The best config's bottleneck and core 0's engine timeline, simulated here.
json BestDetails(const v1::Job& job) {
  json best = {{"config", job.best().config()}, {"time_ns", job.best().time_ns()}};
  absl::StatusOr<kernels::ResolvedWorkload> resolved = kernels::Resolve(job.workload());
  absl::StatusOr<Config> config = Config::Parse(job.best().config());
  if (!resolved.ok() || !config.ok()) return best;
  absl::StatusOr<kernels::Space> space =
      resolved->kernel->SpaceFor(resolved->problem, resolved->target);
  absl::StatusOr<sim::SimResult> result =
      kernels::Evaluate(*resolved->kernel, resolved->problem, *config, resolved->target, {});
  if (space.ok() && result.ok()) {
    best["bottleneck"] = kernels::Advise(*resolved->kernel, resolved->problem, resolved->target,
                                         *space, *config, *result)
                             .Summary();
  }
  absl::StatusOr<sim::Program> program =
      resolved->kernel->Lower(resolved->problem, *config, resolved->target);
  if (!program.ok()) return best;
  std::vector<sim::TraceEvent> events;
  if (!sim::Simulate(resolved->target, *program, {}, &events, kTimelineInstructions).ok()) {
    return best;
  }
  const sim::Timeline t = sim::BinTimeline(resolved->target, events, 0, kTimelineBins);
  best["timeline"] = {{"span_ns", t.span_ns}, {"engines", t.engines}, {"busy", t.busy}};
  return best;
}

std::string WebFile(const std::string& name) {
  for (const auto& [file, text] : EmbeddedWebFiles()) {
    if (file == name) return text;
  }
  return "";
}

HttpResponse Json(const json& body, int status = 200) {
  return {status, "application/json", body.dump()};
}
HttpResponse Text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body)};
}

class Dashboard {
 public:
  explicit Dashboard(DashboardSources sources) : s_(std::move(sources)) {}

  HttpResponse Handle(const HttpRequest& request) {
    const std::string& path = request.path;
    if (path == "/healthz") return Text(200, "ok\n");
    if (path == "/readyz") {
      return s_.ready && s_.ready() ? Text(200, "ready\n") : Text(503, "not ready\n");
    }
    if (path == "/metrics") return Shared(metrics_, [this] { return Metrics(); });
    if (path == "/" || path == "/index.html") return Page();
    if (path == "/api/overview") return Shared(overview_, [this] { return Overview(); });
    if (path.rfind("/jobs/", 0) == 0) {
      if (!JobId(path.substr(6))) return Text(400, "job id must be a positive integer\n");
      return Page();
    }
    if (path.rfind("/api/jobs/", 0) == 0) {
      const std::optional<int64_t> id = JobId(path.substr(10));
      if (!id) return Text(400, "job id must be a positive integer\n");
      return JobData(*id);
    }
    return Text(404, StrCat("no such page: ", Shown(path, 100), "\n"));
  }

 private:
  static std::optional<int64_t> JobId(const std::string& text) {
    if (text.empty() || text.size() > 18) return std::nullopt;
    int64_t id = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return std::nullopt;
      id = id * 10 + (c - '0');
    }
    if (id <= 0) return std::nullopt;
    return id;
  }

  HttpResponse Page() const { return {200, "text/html; charset=utf-8", WebFile("dashboard.html")}; }

  HttpResponse Metrics() {
    if (s_.metrics == nullptr || s_.store == nullptr) return Text(503, "no metrics\n");
    MetricsSnapshot now;
    absl::StatusOr<std::map<std::pair<std::string, std::string>, int64_t>> trials =
        s_.store->TrialCounts();
    absl::StatusOr<std::map<std::string, int64_t>> jobs = s_.store->JobCounts();
    if (!trials.ok() || !jobs.ok()) return Text(503, "the store cannot be read\n");
    now.trials = *std::move(trials);
    now.jobs = *std::move(jobs);
    const Scheduler::Stats stats = s_.scheduler->CurrentStats();
    now.ready_trials = stats.queued_trials;
    now.leases_outstanding = stats.leases_outstanding;
    now.workers_alive = stats.workers_alive;
    return {200, "text/plain; version=0.0.4; charset=utf-8", s_.metrics->Render(now)};
  }

  HttpResponse Overview() {
    absl::StatusOr<std::vector<v1::Job>> jobs = s_.scheduler->ListJobs(kOverviewJobs);
    if (!jobs.ok()) return Text(503, "the store cannot be read\n");
    json rows = json::array();
    for (const v1::Job& j : *jobs) {
      rows.push_back({{"id", j.id()},
                      {"kernel", j.workload().kernel()},
                      {"shape", ShapeOf(j.workload())},
                      {"dtype", j.workload().dtype()},
                      {"target", j.workload().target()},
                      {"state", StateName(j.state())},
                      {"trials", j.trials().total()},
                      {"budget", j.budget()},
                      {"best_ns", j.has_best() ? j.best().time_ns() : 0.0}});
    }
    json workers = json::array();
    for (const v1::WorkerInfo& w : s_.scheduler->ListWorkers()) {
      workers.push_back({{"id", w.worker_id()},
                         {"name", w.name()},
                         {"state", w.state()},
                         {"slots", w.slots()},
                         {"leased", w.leased_trials()},
                         {"done", w.trials_done()}});
    }
    const Scheduler::Stats stats = s_.scheduler->CurrentStats();
    return Json({{"jobs", rows},
                 {"workers", workers},
                 {"stats",
                  {{"queued_trials", stats.queued_trials},
                   {"leases_outstanding", stats.leases_outstanding},
                   {"workers_alive", stats.workers_alive}}}});
  }

  // Rebuilt at most once per kJobDataTtl, serialized once for every page that polls; a running
  // job's trials are read incrementally (those after the last one seen).
  HttpResponse JobData(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    Cached& entry = cache_[id];
    if (!entry.body.empty() && Clock::now() - entry.built < kJobDataTtl) {
      return {200, "application/json", entry.body};
    }
    absl::StatusOr<v1::Job> job = s_.scheduler->GetJob(id);
    if (!job.ok()) {
      cache_.erase(id);
      return absl::IsNotFound(job.status()) ? Text(404, StrCat("no job ", id, "\n"))
                                            : Text(503, "the store cannot be read\n");
    }
    absl::StatusOr<std::vector<v1::TrialResult>> trials =
        s_.scheduler->ListTrials(id, entry.digest.last_id());
    if (!trials.ok()) return Text(503, "the store cannot be read\n");
    for (const v1::TrialResult& trial : *trials) entry.digest.Add(trial);
    entry.body = JobPageData(*job, entry.digest).dump();
    entry.built = Clock::now();
    if (cache_.size() > kMaxCachedJobs) {
      std::erase_if(cache_, [id](const auto& e) { return e.first != id; });
    }
    return {200, "application/json", entry.body};
  }

  // A response built at most once per kJobDataTtl, whoever asks (what was built is sent as is).
  struct SharedResponse {
    std::mutex mu;
    Clock::time_point built;
    std::optional<HttpResponse> response;
  };
  template <typename Build>
  static HttpResponse Shared(SharedResponse& shared, Build build) {
    std::lock_guard<std::mutex> lock(shared.mu);
    if (!shared.response || Clock::now() - shared.built >= kJobDataTtl) {
      shared.response = build();
      shared.built = Clock::now();
    }
    return *shared.response;
  }

  struct Cached {
    Clock::time_point built;
    TrialDigest digest;
    std::string body;
  };
  SharedResponse metrics_, overview_;
  DashboardSources s_;
  std::mutex mu_;
  std::map<int64_t, Cached> cache_;
};

// BestDetails is a simulation: kept per (job id, config), bounded.
json CachedBest(const v1::Job& job) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, std::string>, json>* cache =
      new std::map<std::pair<int64_t, std::string>, json>();
  const auto key = std::make_pair(job.id(), job.best().config());
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
  }
  json details = BestDetails(job);
  std::lock_guard<std::mutex> lock(mu);
  if (cache->size() >= kMaxCachedJobs) cache->clear();
  (*cache)[key] = details;
  return details;
}

}  // namespace

void TrialDigest::Add(const v1::TrialResult& trial) {
  last_id_ = std::max(last_id_, trial.trial_id());
  const bool ok = trial.status() == v1::TRIAL_OK && trial.time_ns() > 0;
  times_.push_back(ok ? trial.time_ns() : 0.0);
  const std::string& arm = trial.arm();
  auto known = std::find(arms_.begin(), arms_.end(), arm);
  if (known == arms_.end()) known = arms_.insert(arms_.end(), arm);
  arm_of_.push_back(int(known - arms_.begin()));
  if (!ok) return;
  auto faster = [](const v1::TrialResult& a, const v1::TrialResult& b) {
    return a.time_ns() < b.time_ns();
  };
  if (fastest_.size() == kFastest && !faster(trial, fastest_.back())) return;
  fastest_.insert(std::upper_bound(fastest_.begin(), fastest_.end(), trial, faster), trial);
  if (fastest_.size() > kFastest) fastest_.pop_back();
}

json TrialDigest::ToJson() const {
  json fastest = json::array();
  for (const v1::TrialResult& t : fastest_) {
    fastest.push_back({{"id", t.trial_id()},
                       {"time_ns", t.time_ns()},
                       {"bound", t.bound()},
                       {"arm", t.arm()},
                       {"config", t.config()}});
  }
  return {{"times", times_}, {"arms", arms_}, {"arm_of", arm_of_}, {"fastest", fastest}};
}

json JobPageData(const v1::Job& job, const TrialDigest& trials) {
  const bool has_best = job.has_best() && job.best().time_ns() > 0;
  json data = {{"id", job.id()},
               {"kernel", job.workload().kernel()},
               {"shape", ShapeOf(job.workload())},
               {"dtype", job.workload().dtype()},
               {"target", job.workload().target()},
               {"strategy", job.strategy()},
               {"state", StateName(job.state())},
               {"budget", job.budget()},
               {"charged", job.trials().total()},
               {"best_ns", has_best ? job.best().time_ns() : 0.0},
               {"default_ns", job.has_default_config() ? job.default_config().time_ns() : 0.0},
               {"best", has_best ? CachedBest(job) : json(nullptr)}};
  data.update(trials.ToJson());
  return data;
}

std::string StandaloneJobPage(const json& data) {
  std::string page = WebFile("dashboard.html");
  // ASCII-only JSON, and no "</" that could end the script element early.
  std::string text = data.dump(-1, ' ', /*ensure_ascii=*/true);
  std::string safe;
  safe.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += text[i];
    }
  }
  const std::string marker = "/*TESSEL_DATA*/null";
  const size_t at = page.find(marker);
  if (at != std::string::npos) page.replace(at, marker.size(), safe);
  return page;
}

HttpHandler MakeDashboard(DashboardSources sources) {
  auto dashboard = std::make_shared<Dashboard>(std::move(sources));
  return [dashboard](const HttpRequest& request) { return dashboard->Handle(request); };
}

}  // namespace tessel::server

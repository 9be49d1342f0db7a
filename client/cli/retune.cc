// `tessel retune --stale`: re-measure the stored top configs of workloads whose published result
// was tuned under an older kernel or target version, instead of tuning them from zero.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/key.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;
namespace v1 = tessel::v1;

bool IsStale(const v1::BestConfig& best, const std::map<std::string, int>& kernels,
             const std::map<std::string, int>& targets) {
  auto k = kernels.find(best.kernel());
  auto t = targets.find(best.target());
  return (k != kernels.end() && k->second != best.kernel_version()) ||
         (t != targets.end() && t->second != best.target_version());
}

class RetuneCommand final : public Command {
 public:
  RetuneCommand()
      : Command("retune", "re-validate stale results by re-measuring their stored top configs",
                "tessel retune --stale --top-k 3 --db tessel.db") {}

  // Fails when no workload was re-validated successfully while some were stale.
  absl::Status Run(int& exit_code) override;

 private:
  void AddOptions(CLI::App& command) override {
    command
        .add_flag("--stale", stale_,
                  "every workload whose best was tuned under an older kernel/target version")
        ->required();
    command.add_option("--top-k", top_k_, "configs re-measured per workload (plus the default)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    command.add_option("--kernel", kernels_, "only these kernels (repeatable)");
    command.add_option("--workers", workers_, "embedded worker threads with --db");
    command.add_flag("-q,--quiet", quiet_, "no progress on stderr");
    AddServerOptions(command, backend_);
  }

  bool stale_ = false;
  int top_k_ = 8;
  std::vector<std::string> kernels_;
  ServerArgs backend_;
  int workers_ = 0;
  bool quiet_ = false;
};

absl::Status RetuneCommand::Run(int& exit_code) {
  auto backend = OpenBackend(backend_, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  client::Client& client = *(*backend)->client;
  v1::ExportRequest request;
  for (const std::string& k : kernels_) request.add_kernels(k);
  auto published = client.Export(request);
  if (!published.ok()) return published.status();
  std::map<std::string, int> kernel_versions, target_versions;
  for (const auto& k : published->kernels()) kernel_versions[k.name()] = k.version();
  for (const auto& t : published->targets()) target_versions[t.name()] = t.version();

  EmbeddedWorkers embedded;
  if (absl::Status started = embedded.Start(**backend, workers_); !started.ok()) {
    return started;
  }
  json results = json::array();
  int stale_found = 0, restored = 0;
  for (const v1::BestConfig& best : published->best()) {
    if (!IsStale(best, kernel_versions, target_versions)) continue;
    ++stale_found;
    // The previous job's fastest distinct OK configs, best first; the published one at least.
    std::vector<std::pair<double, std::string>> ranked;
    if (best.job_id() > 0) {
      auto trials = client.ListTrials(best.job_id());
      if (trials.ok()) {
        for (const v1::TrialResult& t : *trials) {
          if (t.status() == v1::TRIAL_OK) ranked.emplace_back(t.time_ns(), t.config());
        }
      }
    }
    ranked.emplace_back(best.time_ns(), best.config());
    std::sort(ranked.begin(), ranked.end());
    std::vector<std::string> seeds;
    std::set<std::string> seen;
    for (const auto& [time, config] : ranked) {
      if (static_cast<int>(seeds.size()) >= top_k_) break;
      if (seen.insert(config).second) seeds.push_back(config);
    }
    v1::SubmitJobRequest submit;
    submit.mutable_workload()->set_kernel(best.kernel());
    submit.mutable_workload()->set_dtype(best.dtype());
    submit.mutable_workload()->set_target(best.target());
    auto dims = Dims::Parse(best.dims());
    if (!dims.ok()) return dims.status();
    for (const auto& [name, value] : dims->items()) {
      v1::Dim* d = submit.mutable_workload()->add_dims();
      d->set_name(name);
      d->set_value(value);
    }
    for (const std::string& seed : seeds) submit.add_seed_configs(seed);
    // The default plus the seeds: nothing else is proposed.
    submit.set_budget(static_cast<int>(seeds.size()) + 1);
    submit.set_seed(1);
    json entry = {{"kernel", best.kernel()},
                  {"dims", best.dims()},
                  {"dtype", best.dtype()},
                  {"target", best.target()},
                  {"previous_config", best.config()},
                  {"previous_time_ns", best.time_ns()},
                  {"previous_job_id", best.job_id()}};
    auto job = client.SubmitJob(submit);
    if (!job.ok()) {
      entry["error"] = std::string(job.status().message());
      results.push_back(entry);
      continue;
    }
    if (!quiet_) {
      std::fprintf(stderr, "retuning %s %s on %s: job %lld re-measures %zu stored config(s)\n",
                   best.kernel().c_str(), best.dims().c_str(), best.target().c_str(),
                   static_cast<long long>(job->id()), seeds.size());
    }
    auto done = client.WatchJob(job->id(), [](const v1::JobEvent&) { return true; });
    if (!done.ok()) return done.status();
    entry["job_id"] = done->id();
    entry["state"] = client::JobStateName(done->state());
    entry["evaluations"] = done->trials().total();
    if (done->has_best() && done->best().time_ns() > 0) {
      entry["config"] = done->best().config();
      entry["time_ns"] = done->best().time_ns();
    }
    if (done->state() == v1::JOB_COMPLETED) ++restored;
    results.push_back(entry);
  }
  embedded.Stop();
  if (json_) {
    PrintJson({{"stale_found", stale_found}, {"restored", restored}, {"workloads", results}});
  } else {
    std::cout << fmt::format("{} stale workload(s), {} re-validated\n", stale_found, restored);
    for (const json& e : results) {
      std::cout << fmt::format(
          "  {} {} {} on {}: {}\n", e["kernel"].get<std::string>(), e["dims"].get<std::string>(),
          e["dtype"].get<std::string>(), e["target"].get<std::string>(),
          e.contains("time_ns")
              ? fmt::format("{} in {} evaluations", HumanTime(e["time_ns"].get<double>()),
                            e["evaluations"].get<int>())
              : std::string("failed"));
    }
  }
  if (restored < stale_found) exit_code = kExitFailure;
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Command> NewRetuneCommand() { return std::make_unique<RetuneCommand>(); }

}  // namespace tessel::cli

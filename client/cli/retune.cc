#include "client/cli/retune.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "client/cli/common.h"
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

}  // namespace

CLI::App* AddRetuneCommand(CLI::App& app, RetuneArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "retune", "re-validate stale results by re-measuring their stored top configs");
  cmd->add_flag("--stale", args.stale,
                "every workload whose best was tuned under an older kernel/target version")
      ->required();
  cmd->add_option("--top-k", args.top_k, "configs re-measured per workload (plus the default)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--kernel", args.kernels, "only these kernels (repeatable)");
  cmd->add_option("--workers", args.workers, "embedded worker threads with --db");
  cmd->add_flag("-q,--quiet", args.quiet, "no progress on stderr");
  cmd->add_flag("--json", args.json, "print one JSON object");
  cmd->add_option("--server", args.server, "tessel-server address (HOST:PORT)");
  cmd->add_option("--db", args.db, "database file (default ./tessel.db)");
  return cmd;
}

absl::Status RunRetune(const RetuneArgs& args, int& exit_code) {
  if (!args.server.empty() && !args.db.empty()) {
    return absl::InvalidArgumentError("give --server or --db, not both");
  }
  auto backend = OpenBackend(args.server, args.db.empty() ? kDefaultDb : args.db,
                             /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  client::Client& client = *(*backend)->client;
  v1::ExportRequest request;
  for (const std::string& k : args.kernels) request.add_kernels(k);
  auto published = client.Export(request);
  if (!published.ok()) return published.status();
  std::map<std::string, int> kernel_versions, target_versions;
  for (const auto& k : published->kernels()) kernel_versions[k.name()] = k.version();
  for (const auto& t : published->targets()) target_versions[t.name()] = t.version();

  EmbeddedWorkers embedded;
  if (absl::Status started = embedded.Start(**backend, args.workers); !started.ok()) {
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
      if (static_cast<int>(seeds.size()) >= args.top_k) break;
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
    if (!args.quiet) {
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
  if (args.json) {
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

}  // namespace tessel::cli

#include "client/cli/workers.h"

#include <iostream>
#include <memory>
#include <vector>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"

namespace tessel::cli {

namespace v1 = tessel::v1;
using nlohmann::json;

CLI::App* AddWorkersCommand(CLI::App& app, ListArgs& args) {
  CLI::App* cmd = app.add_subcommand("workers", "list registered workers");
  cmd->add_flag("--json", args.json, "print one JSON object");
  AddServerOptions(cmd, args.backend);
  return cmd;
}

absl::Status RunWorkers(const ListArgs& args) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(args.backend.server, args.backend.db, /*must_exist=*/true);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::vector<v1::WorkerInfo>> workers = (*backend)->client->ListWorkers();
  if (!workers.ok()) return workers.status();
  if (args.json) {
    json list = json::array();
    for (const v1::WorkerInfo& w : *workers) {
      list.push_back({{"id", w.worker_id()},
                      {"name", w.name()},
                      {"targets", std::vector<std::string>(w.targets().begin(), w.targets().end())},
                      {"slots", w.slots()},
                      {"state", w.state()},
                      {"leased_trials", w.leased_trials()},
                      {"trials_done", w.trials_done()},
                      {"last_heartbeat_unix_ms", w.last_heartbeat_unix_ms()}});
    }
    PrintJson({{"workers", list}});
    return absl::OkStatus();
  }
  std::cout << fmt::format("{:<14} {:<24} {:<6} {:>5} {:>7} {:>8}  {}\n", "ID", "NAME", "STATE",
                           "SLOTS", "LEASED", "DONE", "TARGETS");
  for (const v1::WorkerInfo& w : *workers) {
    std::cout << fmt::format("{:<14} {:<24} {:<6} {:>5} {:>7} {:>8}  {}\n", w.worker_id(), w.name(),
                             w.state(), w.slots(), w.leased_trials(), w.trials_done(),
                             w.targets().empty() ? "all" : StrJoin(w.targets(), ","));
  }
  if (workers->empty()) std::cout << "(no workers)\n";
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace tessel::cli

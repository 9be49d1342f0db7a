// `tessel workers`: list the workers registered with a server.
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

namespace v1 = tessel::v1;
using nlohmann::json;

json WorkerRow(const v1::WorkerInfo& w) {
  return {{"id", w.worker_id()},
          {"name", w.name()},
          {"targets", std::vector<std::string>(w.targets().begin(), w.targets().end())},
          {"slots", w.slots()},
          {"state", w.state()},
          {"leased_trials", w.leased_trials()},
          {"trials_done", w.trials_done()},
          {"last_heartbeat_unix_ms", w.last_heartbeat_unix_ms()},
          {"quarantine_reason", w.quarantine_reason()}};
}

// Every string in the table came from a worker: shown escaped (schema/strings.h Shown), so none
// can forge a line or a terminal escape; --json carries them as sent.
std::vector<std::string> WorkerCells(const json& row) {
  auto text = [&](const char* key) { return Shown(row[key].get<std::string>(), 128); };
  std::vector<std::string> targets;
  for (const auto& t : row["targets"]) targets.push_back(Shown(t.get<std::string>()));
  auto number = [&](const char* key) { return std::to_string(row[key].get<int64_t>()); };
  return {text("id"),
          text("name"),
          row["state"].get<std::string>(),
          number("slots"),
          number("leased_trials"),
          number("trials_done"),
          targets.empty() ? "all" : StrJoin(targets, ","),
          text("quarantine_reason")};
}

class WorkersCommand final : public Command {
 public:
  WorkersCommand()
      : Command("workers", "list registered workers", "tessel workers --server localhost:7070") {}

  // Prints the workers as a table, or {"workers": [...]} with --json.
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(auto backend, OpenBackend(backend_, /*must_exist=*/true));
    TESSEL_ASSIGN_OR_RETURN(const std::vector<v1::WorkerInfo> workers,
                            backend->client->ListWorkers());
    json rows = json::array();
    for (const v1::WorkerInfo& worker : workers) rows.push_back(WorkerRow(worker));
    PrintList(rows, json_,
              {.key = "workers",
               .columns = {{"ID"},
                           {"NAME"},
                           {"STATE"},
                           {"SLOTS", true},
                           {"LEASED", true},
                           {"DONE", true},
                           {"TARGETS"},
                           {"QUARANTINED BECAUSE"}},
               .cells = WorkerCells,
               .line = nullptr,
               .when_empty = "(no workers)\n",
               .footer = ""});
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override { AddServerOptions(command, backend_); }

  ServerArgs backend_;
};

}  // namespace

std::unique_ptr<Command> NewWorkersCommand() { return std::make_unique<WorkersCommand>(); }

}  // namespace tessel::cli

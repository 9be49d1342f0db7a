#include "client/cli/targets.h"

#include <iostream>
#include <string>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "sim/target.h"

namespace tessel::cli {

namespace v1 = tessel::v1;
using nlohmann::json;

CLI::App* AddTargetsCommand(CLI::App& app, JsonOnlyArgs& args) {
  CLI::App* cmd = app.add_subcommand("targets", "list built-in targets");
  cmd->add_flag("--json", args.json, "print one JSON object");
  return cmd;
}

absl::Status RunTargets(const JsonOnlyArgs& args) {
  json list = json::array();
  for (const std::string& name : sim::TargetNames()) {
    absl::StatusOr<sim::Target> target = sim::LoadTarget(name);
    if (!target.ok()) return target.status();
    list.push_back({{"name", target->name},
                    {"version", target->version},
                    {"description", target->description}});
  }
  if (args.json) {
    PrintJson({{"targets", list}});
    return absl::OkStatus();
  }
  for (const json& t : list) {
    std::cout << fmt::format("{:<22} v{}  {}\n", t["name"].get<std::string>(),
                             t["version"].get<int>(), t["description"].get<std::string>());
  }
  std::cout << "(systolic-RxC-{ws,os,is} names any systolic array size)" << std::endl;
  return absl::OkStatus();
}

}  // namespace tessel::cli

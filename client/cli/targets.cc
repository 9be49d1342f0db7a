// `tessel targets`: the built-in targets.
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/common.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "sim/target.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

std::vector<std::string> TargetCells(const json& t) {
  return {t["name"].get<std::string>(), fmt::format("v{}", t["version"].get<int>()),
          t["description"].get<std::string>()};
}

class TargetsCommand final : public Command {
 public:
  TargetsCommand() : Command("targets", "list built-in targets", "tessel targets") {}

  // Prints each target with its version, or {"targets": [...]} with --json.
  absl::Status Run(int&) override {
    json rows = json::array();
    for (const std::string& name : sim::TargetNames()) {
      TESSEL_ASSIGN_OR_RETURN(const sim::Target target, sim::LoadTarget(name));
      rows.push_back({{"name", target.name},
                      {"version", target.version},
                      {"description", target.description}});
    }
    PrintList(rows, json_,
              {.key = "targets",
               .columns = {{"NAME"}, {"VERSION"}, {"DESCRIPTION"}},
               .cells = TargetCells,
               .line = nullptr,
               .when_empty = "",
               .footer = "(systolic-RxC-{ws,os,is} names any systolic array size)\n"});
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Command> NewTargetsCommand() { return std::make_unique<TargetsCommand>(); }

}  // namespace tessel::cli

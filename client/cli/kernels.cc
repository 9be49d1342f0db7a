#include "client/cli/kernels.h"

#include <iostream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/info.h"
#include "kernels/kernel.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"
#include "sim/target.h"

namespace tessel::cli {

using nlohmann::json;

CLI::App* AddKernelsCommand(CLI::App& app, JsonOnlyArgs& args) {
  CLI::App* cmd = app.add_subcommand("kernels", "list kernels, their dims and params");
  cmd->add_flag("--json", args.json, "print one JSON object");
  return cmd;
}

absl::Status RunKernels(const JsonOnlyArgs& args) {
  // The default target is embedded in the binary, so it always loads.
  absl::StatusOr<sim::Target> target = sim::LoadTarget(kDefaultTarget);
  if (!target.ok()) return target.status();
  json list = json::array();
  for (const kernels::Kernel* kernel : kernels::AllKernels()) {
    const kernels::KernelInfo info = kernels::DescribeKernel(*kernel, *target);
    json params = json::array();
    for (const kernels::Param& p : info.params) {
      params.push_back({{"name", p.name}, {"values", p.values}, {"help", p.help}});
    }
    list.push_back({{"name", info.name},
                    {"version", info.version},
                    {"description", info.description},
                    {"dims", info.dims},
                    {"dtypes", info.dtypes},
                    {"params", params}});
  }
  if (args.json) {
    PrintJson({{"kernels", list}});
    return absl::OkStatus();
  }
  for (const json& k : list) {
    std::cout << fmt::format("{} (v{}): {}\n  dims: {}  dtypes: {}\n", k["name"].get<std::string>(),
                             k["version"].get<int>(), k["description"].get<std::string>(),
                             StrJoin(k["dims"].get<std::vector<std::string>>(), ","),
                             StrJoin(k["dtypes"].get<std::vector<std::string>>(), ","));
    for (const json& p : k["params"]) {
      std::cout << fmt::format("  {:<12} {}\n", p["name"].get<std::string>(),
                               StrJoin(p["values"].get<std::vector<std::string>>(), " "));
    }
  }
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace tessel::cli

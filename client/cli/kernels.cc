// `tessel kernels`: the kernels, their dims, dtypes and params.
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/common.h"
#include "fmt/format.h"
#include "kernels/info.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

json KernelRow(const kernels::KernelInfo& info) {
  json params = json::array();
  for (const kernels::Param& p : info.params) {
    params.push_back({{"name", p.name}, {"values", p.values}, {"help", p.help}});
  }
  return {{"name", info.name}, {"version", info.version}, {"description", info.description},
          {"dims", info.dims}, {"dtypes", info.dtypes},   {"params", params}};
}

std::string KernelLines(const json& k) {
  std::string text =
      fmt::format("{} (v{}): {}\n  dims: {}  dtypes: {}\n", k["name"].get<std::string>(),
                  k["version"].get<int>(), k["description"].get<std::string>(),
                  StrJoin(k["dims"].get<std::vector<std::string>>(), ","),
                  StrJoin(k["dtypes"].get<std::vector<std::string>>(), ","));
  for (const json& p : k["params"]) {
    text += fmt::format("  {:<12} {}\n", p["name"].get<std::string>(),
                        StrJoin(p["values"].get<std::vector<std::string>>(), " "));
  }
  return text;
}

class KernelsCommand final : public Command {
 public:
  KernelsCommand() : Command("kernels", "list kernels, their dims and params") {}

  // Prints each kernel with its params, or {"kernels": [...]} with --json.
  absl::Status Run(int&) override {
    // The default target is embedded in the binary, so it always loads.
    TESSEL_ASSIGN_OR_RETURN(const sim::Target target, sim::LoadTarget(kDefaultTarget));
    json rows = json::array();
    for (const kernels::Kernel* kernel : kernels::AllKernels()) {
      rows.push_back(KernelRow(kernels::DescribeKernel(*kernel, target)));
    }
    PrintList(
        rows, json_,
        {.key = "kernels", .header = "", .line = KernelLines, .when_empty = "", .footer = ""});
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Command> NewKernelsCommand() { return std::make_unique<KernelsCommand>(); }

}  // namespace tessel::cli

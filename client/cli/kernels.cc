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
  KernelsCommand()
      : Command("kernels", "list kernels, their dims and params", "tessel kernels --target snc3") {}

  // Prints each kernel with its params, or {"kernels": [...]} with --json.
  absl::Status Run(int&) override {
    // Values that depend on the target (shards: its cores) are shown for --target.
    TESSEL_ASSIGN_OR_RETURN(const sim::Target target, LoadTargetOrExplain(target_));
    json rows = json::array();
    for (const kernels::Kernel* kernel : kernels::AllKernels()) {
      rows.push_back(KernelRow(kernels::DescribeKernel(*kernel, target)));
    }
    PrintList(rows, json_,
              {.key = "kernels",
               .columns = {},
               .cells = nullptr,
               .line = KernelLines,
               .when_empty = "",
               .footer = StrCat("(param values for target ", target_, "; others: --target)\n")});
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    command
        .add_option("--target", target_, "target whose values are listed (see `tessel targets`)")
        ->capture_default_str();
  }

  std::string target_ = kDefaultTarget;
};

}  // namespace

std::unique_ptr<Command> NewKernelsCommand() { return std::make_unique<KernelsCommand>(); }

}  // namespace tessel::cli

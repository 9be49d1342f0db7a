#include "client/cli/space.h"

#include <cmath>
#include <iostream>
#include <random>

#include "client/cli/common.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "schema/strings.h"

namespace tessel::cli {

CLI::App* AddSpaceCommand(CLI::App& app, SpaceArgs& args) {
  CLI::App* cmd = app.add_subcommand("space", "size and parameters of a kernel's schedule space");
  cmd->add_option("kernel", args.kernel, "kernel name (see `tessel kernels`)")->required();
  cmd->add_option("--shape", args.shape, "named dims, e.g. M=4096,N=4096,K=4096")->required();
  cmd->add_option("--dtype", args.dtype, "element type")->capture_default_str();
  cmd->add_option("--target", args.target, "target (see `tessel targets`)")->capture_default_str();
  cmd->add_option("--enumerate-limit", args.enumerate_limit,
                  "enumerate spaces up to this size; sample larger ones")
      ->capture_default_str();
  cmd->add_option("--samples", args.samples, "samples for the estimate of a larger space")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args.json, "print one JSON object");
  return cmd;
}

absl::Status RunSpace(const SpaceArgs& args) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  absl::StatusOr<sim::Target> target = LoadTargetOrExplain(args.target);
  if (!target.ok()) return target.status();
  absl::StatusOr<kernels::Space> space = workload->kernel->SpaceFor(workload->problem, *target);
  if (!space.ok()) return space.status();

  const uint64_t size = space->Size();
  uint64_t valid = 0;
  bool estimated = false;
  uint64_t checked = 0;
  if (size <= args.enumerate_limit) {
    for (uint64_t i = 0; i < size; ++i) valid += space->Validate(space->Decode(i)).ok();
    checked = size;
  } else {
    // Uniform samples of the product, seeded so the estimate is reproducible.
    estimated = true;
    std::mt19937_64 rng(1);
    uint64_t hits = 0;
    for (int i = 0; i < args.samples; ++i)
      hits += space->Validate(space->Decode(rng() % size)).ok();
    checked = uint64_t(args.samples);
    valid = uint64_t(std::llround(double(hits) / double(args.samples) * double(size)));
  }
  const Config def = workload->kernel->Default(workload->problem, *target);

  nlohmann::json params = nlohmann::json::array();
  for (const kernels::Param& p : space->params()) {
    params.push_back({{"name", p.name}, {"values", p.values}, {"help", p.help}});
  }
  if (args.json) {
    PrintJson({{"kernel", args.kernel},
               {"shape", workload->shape},
               {"dtype", args.dtype},
               {"target", args.target},
               {"size", size},
               {"valid", valid},
               {"valid_estimated", estimated},
               {"checked", checked},
               {"default", def.ToString()},
               {"params", params}});
    return absl::OkStatus();
  }
  std::cout << fmt::format("{} {} {} on {}: {} configs, {}{} valid{}\n", args.kernel,
                           workload->shape, args.dtype, args.target, size, estimated ? "~" : "",
                           valid,
                           estimated ? fmt::format(" (estimated from {} samples)", checked) : "");
  for (const kernels::Param& p : space->params()) {
    std::cout << fmt::format("  {:<14} {}\n", p.name, StrJoin(p.values, " "));
  }
  std::cout << "  default: " << def.ToString() << "\n";
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace tessel::cli

// `tessel space KERNEL --shape DIMS`: the size of a kernel's schedule space for one workload.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "schema/status_macros.h"
#include "schema/strings.h"

namespace tessel::cli {
namespace {

// How many points of a space are valid: counted, or estimated from seeded uniform samples.
struct ValidCount {
  uint64_t valid = 0;
  uint64_t checked = 0;
  bool estimated = false;
};

ValidCount CountValid(const kernels::Space& space, uint64_t enumerate_limit, int samples) {
  ValidCount count;
  const uint64_t size = space.Size();
  if (size <= enumerate_limit) {
    for (uint64_t i = 0; i < size; ++i) count.valid += space.ValidateAt(i).ok();
    count.checked = size;
    return count;
  }
  // Uniform samples of the product, seeded so the estimate is reproducible.
  count.estimated = true;
  std::mt19937_64 rng(1);
  uint64_t hits = 0;
  for (int i = 0; i < samples; ++i) hits += space.ValidateAt(rng() % size).ok();
  count.checked = uint64_t(samples);
  count.valid = uint64_t(std::llround(double(hits) / double(samples) * double(size)));
  return count;
}

class SpaceCommand final : public Command {
 public:
  SpaceCommand()
      : Command("space", "size and parameters of a kernel's schedule space",
                "tessel space attention --shape B=1,H=16,S=4096,D=128") {}

  // Prints size (full product), valid (exact count, or an estimate with "valid_estimated": true)
  // and the params: one JSON object with --json, a short table otherwise. InvalidArgument for a
  // bad kernel, shape, dtype or target.
  absl::Status Run(int&) override {
    TESSEL_ASSIGN_OR_RETURN(const Workload workload, ValidateWorkload(workload_));
    TESSEL_ASSIGN_OR_RETURN(const sim::Target target, LoadTargetOrExplain(workload_.target));
    TESSEL_ASSIGN_OR_RETURN(const kernels::Space space,
                            workload.kernel->SpaceFor(workload.problem, target));
    const uint64_t size = space.Size();
    const ValidCount count = CountValid(space, enumerate_limit_, samples_);
    const Config def = workload.kernel->Default(workload.problem, target);
    if (json_) {
      nlohmann::json params = nlohmann::json::array();
      for (const kernels::Param& p : space.params()) {
        params.push_back({{"name", p.name}, {"values", p.values}, {"help", p.help}});
      }
      PrintJson({{"kernel", workload_.kernel},
                 {"shape", workload.shape},
                 {"dtype", workload_.dtype},
                 {"target", workload_.target},
                 {"size", size},
                 {"valid", count.valid},
                 {"valid_estimated", count.estimated},
                 {"checked", count.checked},
                 {"default", def.ToString()},
                 {"params", params}});
      return absl::OkStatus();
    }
    std::cout << fmt::format(
        "{} {} {} on {}: {} configs, {}{} valid{}\n", workload_.kernel, workload.shape,
        workload_.dtype, workload_.target, size, count.estimated ? "~" : "", count.valid,
        count.estimated ? fmt::format(" (estimated from {} samples)", count.checked) : "");
    for (const kernels::Param& p : space.params()) {
      std::cout << fmt::format("  {:<14} {}\n", p.name, StrJoin(p.values, " "));
    }
    std::cout << "  default: " << def.ToString() << "\n";
    std::cout.flush();
    return absl::OkStatus();
  }

 private:
  void AddOptions(CLI::App& command) override {
    AddWorkloadOptions(command, workload_);
    command
        .add_option("--enumerate-limit", enumerate_limit_,
                    "enumerate spaces up to this size; sample larger ones")
        ->capture_default_str();
    AddPositiveOption(command, "--samples", samples_, "samples for the estimate of a larger space");
  }

  WorkloadArgs workload_;
  // Spaces up to this many points are enumerated; larger ones are estimated by sampling.
  uint64_t enumerate_limit_ = 5'000'000;
  int samples_ = 200'000;
};

}  // namespace

std::unique_ptr<Command> NewSpaceCommand() { return std::make_unique<SpaceCommand>(); }

}  // namespace tessel::cli

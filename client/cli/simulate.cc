#include "client/cli/simulate.h"

#include <iostream>
#include <string>

#include "fmt/format.h"
#include "kernels/kernel.h"
#include "nlohmann/json.hpp"
#include "schema/key.h"
#include "schema/strings.h"
#include "sim/result_json.h"
#include "sim/simulate.h"
#include "sim/target.h"

namespace tessel::cli {

using nlohmann::json;

CLI::App* AddSimulateCommand(CLI::App& app, SimulateArgs& args) {
  CLI::App* cmd =
      app.add_subcommand("simulate", "lower and simulate one config locally (no server)");
  cmd->add_option("kernel", args.kernel, "kernel name")->required();
  cmd->add_option("--shape", args.shape, "named dims")->required();
  cmd->add_option("--dtype", args.dtype, "element type")->capture_default_str();
  cmd->add_option("--target", args.target, "target")->capture_default_str();
  cmd->add_option("--config", args.config,
                  "config, e.g. tile_m=128,tile_n=512 (default: the kernel's default)");
  cmd->add_option("--trace", args.trace,
                  "write a Chrome trace-event JSON file (Perfetto / chrome://tracing)");
  cmd->add_option("--noise", args.noise, "relative run-to-run noise sigma (0 = off)");
  cmd->add_option("--seed", args.seed, "seed of the noise");
  cmd->add_flag("--exact", args.exact, "simulate every iteration (no fast path)");
  cmd->add_flag("--json", args.json, "print one JSON object");
  return cmd;
}

absl::Status RunSimulate(const SimulateArgs& args) {
  absl::StatusOr<Workload> workload =
      ValidateWorkload(args.kernel, args.shape, args.dtype, args.target);
  if (!workload.ok()) return workload.status();
  if (args.noise < 0) return absl::InvalidArgumentError("--noise must be >= 0");
  const sim::SimOptions options{.noise_sigma = args.noise, .seed = args.seed, .exact = args.exact};
  absl::StatusOr<sim::Target> target = LoadTargetOrExplain(args.target);
  if (!target.ok()) return target.status();
  Config config;
  if (args.config.empty()) {
    config = workload->kernel->Default(workload->problem, *target);
  } else {
    absl::StatusOr<Config> parsed = Config::Parse(args.config);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          StrCat("bad --config '", args.config, "': ", std::string(parsed.status().message())));
    }
    config = *parsed;
  }
  json out = {{"kernel", args.kernel},       {"shape", workload->shape},
              {"dtype", args.dtype},         {"target", args.target},
              {"config", config.ToString()}, {"default", args.config.empty()}};
  absl::StatusOr<sim::SimResult> result =
      kernels::Evaluate(*workload->kernel, workload->problem, config, *target, options);
  if (result.ok() && !args.trace.empty()) {
    absl::StatusOr<sim::Program> program =
        workload->kernel->Lower(workload->problem, config, *target);
    absl::Status written =
        program.ok() ? sim::WriteTrace(*target, *program, options, args.trace) : program.status();
    if (!written.ok()) {
      return absl::UnavailableError(
          StrCat("cannot write trace ", args.trace, ": ", std::string(written.message())));
    }
  }
  if (!result.ok()) {
    if (!absl::IsInvalidArgument(result.status())) {
      return absl::InternalError(
          StrCat("simulation failed: ", std::string(result.status().message())));
    }
    out["valid"] = false;
    out["reason"] = std::string(result.status().message());
    if (args.json) {
      PrintJson(out);
    } else {
      std::cout << fmt::format("{} {} on {}: config {} is invalid: {}\n", args.kernel,
                               workload->shape, args.target, config.ToString(),
                               out["reason"].get<std::string>());
    }
    return absl::OkStatus();
  }
  out.update(sim::ResultJson(*result));
  out["valid"] = true;
  out["time_ns"] = result->time_ns;
  out["roofline_fraction"] =
      result->time_ns > 0 ? json(result->roofline_ns / result->time_ns) : json(nullptr);
  const json& engines = out["engines"];
  if (args.json) {
    PrintJson(out);
    return absl::OkStatus();
  }
  std::cout << fmt::format("{} {} {} on {}\n  config:   {}{}\n  time:     {} ({} bound)\n",
                           args.kernel, workload->shape, args.dtype, args.target, config.ToString(),
                           args.config.empty() ? " (default)" : "", HumanTime(result->time_ns),
                           result->bound);
  std::cout << fmt::format("  roofline: {} ({:.1f}% reached)\n", HumanTime(result->roofline_ns),
                           result->time_ns > 0 ? 100 * result->roofline_ns / result->time_ns : 0);
  std::cout << "  engines: ";
  for (const auto& [name, e] : engines.items()) {
    std::cout << fmt::format(" {} {:.0f}%", name, 100 * e["busy_frac"].get<double>());
  }
  std::cout << fmt::format(
      "\n  hbm: {} bytes  sbuf peak: {} B/partition  psum peak: {} "
      "B/partition\n",
      result->hbm_bytes, result->sbuf_peak_bytes, result->psum_peak_bytes);
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace tessel::cli

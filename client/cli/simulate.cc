// `tessel simulate KERNEL --shape DIMS [--config ...]`: lower and simulate one config locally (no
// server).
#include "sim/simulate.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "kernels/kernel.h"
#include "schema/key.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/result_json.h"
#include "sim/target.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

class SimulateCommand final : public Command {
 public:
  SimulateCommand()
      : Command("simulate", "lower and simulate one config locally (no server)",
                "tessel simulate matmul --shape M=2048,N=2048,K=2048 --config tile_n=256 --trace "
                "t.json") {}

  // Prints the simulated time, bound, roofline, engine use and memory peaks (sim::ResultJson's
  // fields, one JSON object with --json). A config the kernel rejects is reported ("valid":
  // false with the reason) and exits 1; InvalidArgument for a bad workload or --config.
  absl::Status Run(int& exit_code) override;

 private:
  void AddOptions(CLI::App& command) override {
    AddWorkloadOptions(command, workload_);
    command.add_option(
        "--config", config_,
        "config, e.g. tile_m=128,tile_n=512; parameters not given take the kernel's default "
        "values");
    command.add_option("--trace", trace_,
                       "write a Chrome trace-event JSON file (Perfetto / chrome://tracing)");
    command
        .add_option("--trace-limit", trace_limit_,
                    "instructions per core the trace keeps (the first ones; 0 = all); the file's "
                    "otherData says when some were left out")
        ->default_val(sim::kDefaultTraceLimit)
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
    command.add_option("--noise", noise_, "relative run-to-run noise sigma (0 = off)");
    command.add_option("--seed", seed_, "seed of the noise");
    command.add_flag("--exact", exact_, "simulate every iteration (no fast path)");
  }
  // --config, or the kernel's default for the workload.
  absl::StatusOr<Config> ChosenConfig(const Workload& workload, const sim::Target& target) const;
  // " (P, Q from --config; the rest the kernel's defaults)" for a partial --config.
  std::string MergedNote() const;
  // Prints a valid result as a short report (not --json).
  void PrintReport(const std::string& shape, const Config& config, const sim::SimResult& result,
                   const json& engines) const;

  WorkloadArgs workload_;
  std::string config_;  // empty: the kernel's default for the workload
  std::string trace_;   // a Chrome trace-event file to write, when set
  int64_t trace_limit_ = sim::kDefaultTraceLimit;
  double noise_ = 0;
  uint64_t seed_ = 0;
  bool exact_ = false;
};

absl::StatusOr<Config> SimulateCommand::ChosenConfig(const Workload& workload,
                                                     const sim::Target& target) const {
  return ConfigFor(workload, target, config_);
}

absl::Status SimulateCommand::Run(int& exit_code) {
  TESSEL_ASSIGN_OR_RETURN(const Workload workload, ValidateWorkload(workload_));
  if (noise_ < 0) return absl::InvalidArgumentError("--noise must be >= 0");
  const sim::SimOptions options{.noise_sigma = noise_, .seed = seed_, .exact = exact_};
  TESSEL_ASSIGN_OR_RETURN(const sim::Target target, LoadTargetOrExplain(workload_.target));
  TESSEL_ASSIGN_OR_RETURN(const Config config, ChosenConfig(workload, target));
  json out = {{"kernel", workload_.kernel},  {"shape", workload.shape},
              {"dtype", workload_.dtype},    {"target", workload_.target},
              {"config", config.ToString()}, {"default", config_.empty()}};
  absl::StatusOr<sim::SimResult> result =
      kernels::Evaluate(*workload.kernel, workload.problem, config, target, options);
  if (result.ok() && !trace_.empty()) {
    absl::StatusOr<sim::Program> program = workload.kernel->Lower(workload.problem, config, target);
    absl::Status written =
        program.ok()
            ? sim::WriteTrace(target, *program, options, trace_,
                              trace_limit_ > 0 ? trace_limit_ : std::numeric_limits<int64_t>::max())
            : program.status();
    if (!written.ok()) {
      return absl::UnavailableError(
          StrCat("cannot write trace ", trace_, ": ", std::string(written.message())));
    }
  }
  if (!result.ok()) {
    if (!absl::IsInvalidArgument(result.status())) {
      return absl::InternalError(
          StrCat("simulation failed: ", std::string(result.status().message())));
    }
    ReportInvalidConfig(std::move(out), result.status(), json_, exit_code);
    return absl::OkStatus();
  }
  out.update(sim::ResultJson(*result));
  out["valid"] = true;
  out["time_ns"] = result->time_ns;
  out["roofline_fraction"] =
      result->time_ns > 0 ? json(result->roofline_ns / result->time_ns) : json(nullptr);
  if (json_) {
    PrintJson(out);
  } else {
    PrintReport(workload.shape, config, *result, out["engines"]);
  }
  return absl::OkStatus();
}

std::string SimulateCommand::MergedNote() const {
  absl::StatusOr<Config> given = Config::Parse(config_);
  if (!given.ok()) return "";
  std::vector<std::string> names;
  for (const auto& [name, value] : given->items()) names.push_back(name);
  return StrCat(" (", StrJoin(names, ", "), " from --config; the rest the kernel's defaults)");
}

void SimulateCommand::PrintReport(const std::string& shape, const Config& config,
                                  const sim::SimResult& result, const json& engines) const {
  std::cout << fmt::format("{} {} {} on {}\n  config:   {}{}\n  time:     {} ({} bound)\n",
                           workload_.kernel, shape, workload_.dtype, workload_.target,
                           config.ToString(), config_.empty() ? " (default)" : MergedNote(),
                           HumanTime(result.time_ns), result.bound);
  if (result.bound == "latency" && result.busiest[0].busy_frac > 0) {
    // No resource explains the time: say how busy the busiest ones were.
    std::cout << "  busiest: ";
    for (const sim::SimResult::Busy& busy : result.busiest) {
      if (busy.busy_frac > 0) {
        std::cout << fmt::format(" {} {:.0f}%", sim::EngineName(busy.resource),
                                 100 * busy.busy_frac);
      }
    }
    std::cout << "\n";
  }
  auto percent = [&](double ns) { return result.time_ns > 0 ? 100 * ns / result.time_ns : 0; };
  std::cout << fmt::format(
      "  roofline: {} ({:.1f}% reached; the problem's compulsory bytes and flops)\n"
      "  issued:   {} ({:.1f}%; the bytes and flops this schedule issues)\n",
      HumanTime(result.roofline_ns), percent(result.roofline_ns),
      HumanTime(result.issued_roofline_ns), percent(result.issued_roofline_ns));
  std::cout << "  engines: ";
  for (const auto& [name, e] : engines.items()) {
    std::cout << fmt::format(" {} {:.0f}%", name, 100 * e["busy_frac"].get<double>());
  }
  std::cout << fmt::format(
      "\n  hbm: {} bytes  sbuf peak: {} B/partition  psum peak: {} "
      "B/partition\n",
      result.hbm_bytes, result.sbuf_peak_bytes, result.psum_peak_bytes);
  std::cout.flush();
}

}  // namespace

std::unique_ptr<Command> NewSimulateCommand() { return std::make_unique<SimulateCommand>(); }

}  // namespace tessel::cli

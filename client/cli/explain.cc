// `tessel explain KERNEL --shape DIMS --config KV`: why a config takes the time it does. The
// per-engine time split, the roofline, the bound and what to try next, and the on-chip limits the
// config is near.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli/command.h"
#include "client/cli/options.h"
#include "fmt/format.h"
#include "kernels/advice.h"
#include "schema/status_macros.h"
#include "schema/strings.h"
#include "sim/result_json.h"

namespace tessel::cli {
namespace {

using nlohmann::json;

// A limit at or above this fraction of its capacity is "near".
constexpr double kNearLimit = 0.8;

class ExplainCommand final : public Command {
 public:
  ExplainCommand()
      : Command("explain", "why a config takes its time: engines, roofline, bound, limits",
                "tessel explain matmul --shape M=4096,N=4096,K=4096 --config block_k=4,bufs=3") {}

  // One report (one JSON object with --json). A config the kernel rejects exits 1 with the
  // reason; InvalidArgument for a bad workload or --config.
  absl::Status Run(int& exit_code) override {
    TESSEL_ASSIGN_OR_RETURN(const Workload workload, ValidateWorkload(workload_));
    TESSEL_ASSIGN_OR_RETURN(const sim::Target target, LoadTargetOrExplain(workload_.target));
    TESSEL_ASSIGN_OR_RETURN(const Config config, ConfigFor(workload, target, config_));
    TESSEL_ASSIGN_OR_RETURN(const kernels::Space space,
                            workload.kernel->SpaceFor(workload.problem, target));
    absl::StatusOr<sim::SimResult> result =
        kernels::Evaluate(*workload.kernel, workload.problem, config, target, {});
    json out = {{"kernel", workload_.kernel},
                {"shape", workload.shape},
                {"dtype", workload_.dtype},
                {"target", workload_.target},
                {"config", config.ToString()}};
    if (!result.ok()) {
      if (!absl::IsInvalidArgument(result.status())) return result.status();
      ReportInvalidConfig(std::move(out), result.status(), json_, exit_code);
      return absl::OkStatus();
    }
    const sim::SimResult& r = *result;
    const kernels::Bottleneck b =
        kernels::Advise(*workload.kernel, workload.problem, target, space, config, r);
    out["valid"] = true;
    out["time_ns"] = r.time_ns;
    out["bound"] = r.bound;
    out["roofline_ns"] = r.roofline_ns;
    out["issued_roofline_ns"] = r.issued_roofline_ns;
    out["roofline_fraction"] = r.time_ns > 0 ? r.roofline_ns / r.time_ns : 0.0;
    const int cores = std::max(1, int(config.GetInt("shards").value_or(1)));
    json engines = json::object();
    for (int e = 0; e < sim::kNumEngines; ++e) {
      const sim::EngineKind kind = sim::EngineKind(e);
      // Busy time per engine instance: a core's engine (DMA: all its DMA engines together).
      const double busy = r.engines[size_t(e)].busy_frac * r.time_ns;
      engines[std::string(sim::EngineName(kind))] = {{"busy_frac", r.engines[size_t(e)].busy_frac},
                                                     {"busy_ns", busy}};
    }
    out["engines"] = engines;
    json limits = json::array();
    auto limit = [&](const std::string& name, double used, double capacity,
                     const std::string& unit) {
      if (capacity <= 0) return;
      limits.push_back({{"name", name},
                        {"used", used},
                        {"capacity", capacity},
                        {"fraction", used / capacity},
                        {"near", used / capacity >= kNearLimit},
                        {"unit", unit}});
    };
    limit("sbuf", double(r.sbuf_peak_bytes),
          double(target.sbuf_bytes_per_partition - target.sbuf_reserved_bytes_per_partition),
          "B/partition");
    limit("psum", double(r.psum_peak_bytes),
          double(target.psum_banks) * double(target.psum_bank_bytes_per_partition), "B/partition");
    limit("cores", double(cores), double(target.cores_per_chip), "shards");
    out["limits"] = limits;
    out["bottleneck"] = {{"summary", b.Summary()}, {"try_next", b.try_next}};
    if (json_) {
      PrintJson(out);
      return absl::OkStatus();
    }
    std::cout << fmt::format("{} {} {} on {}\n  config:   {}\n  time:     {}\n", workload_.kernel,
                             workload.shape, workload_.dtype, workload_.target, config.ToString(),
                             HumanTime(r.time_ns));
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, e] : engines.items()) {
      const double frac = e["busy_frac"].get<double>();
      rows.push_back({name, HumanTime(e["busy_ns"].get<double>()),
                      fmt::format("{:.1f}%", 100 * frac),
                      std::string(size_t(std::clamp(frac, 0.0, 1.0) * 30 + 0.5), '#')});
    }
    std::cout << "  engine time (per engine, over the run):\n"
              << Indent(FormatTable({{"ENGINE"}, {"BUSY", true}, {"OF RUN", true}, {""}}, rows));
    std::cout << fmt::format(
        "  roofline: {} ({:.1f}% reached; the problem's compulsory bytes and flops), issued {}\n",
        HumanTime(r.roofline_ns), 100 * out["roofline_fraction"].get<double>(),
        HumanTime(r.issued_roofline_ns));
    std::cout << "  bottleneck: " << b.Summary() << "\n  limits:\n";
    for (const json& l : limits) {
      std::cout << fmt::format(
          "    {:<6} {:>9.0f} of {:>9.0f} {} ({:.0f}%){}\n", l["name"].get<std::string>(),
          l["used"].get<double>(), l["capacity"].get<double>(), l["unit"].get<std::string>(),
          100 * l["fraction"].get<double>(), l["near"].get<bool>() ? "  <- near its limit" : "");
    }
    std::cout.flush();
    return absl::OkStatus();
  }

 private:
  static std::string Indent(const std::string& text) {
    std::string out;
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = text.find('\n', start);
      out += "    " + text.substr(start, end - start) + "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }

  void AddOptions(CLI::App& command) override {
    AddWorkloadOptions(command, workload_);
    command.add_option("--config", config_,
                       "config, e.g. tile_n=256,block_k=4; parameters not given take the kernel's "
                       "default values (default: the kernel's default config)");
  }

  WorkloadArgs workload_;
  std::string config_;
};

}  // namespace

std::unique_ptr<Command> NewExplainCommand() { return std::make_unique<ExplainCommand>(); }

}  // namespace tessel::cli
